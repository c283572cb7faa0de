// Shared helpers of the benchmarks: medians, bare interpreter spawns, and the plain JSON echo baseline.
import { spawn } from 'node:child_process';

/** Median of a list of numbers. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Spawns a process with the same stdio layout codecall uses (pipes and a socketpair on fd 3); resolves its ms. */
export function timeSpawn(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: options.env ?? { PATH: '/usr/local/bin:/usr/bin:/bin' },
      detached: true,
    });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`${command} ${args.join(' ')} exited with ${code}`));
      else resolve(performance.now() - started);
    });
  });
}

const ECHO_CLIENT = `
import json, os, sys, time
fd = 3
os.set_blocking(fd, True)
dumps, loads = json.dumps, json.loads
calls = int(sys.argv[1])
pending = b""
start = time.perf_counter()
for i in range(1, calls + 1):
    os.write(fd, (dumps({"id": i, "method": "echo", "params": {"value": i}}) + "\\n").encode())
    while b"\\n" not in pending:
        pending += os.read(fd, 65536)
    line, _, pending = pending.partition(b"\\n")
    assert loads(line)["result"] == {"value": i}
print((time.perf_counter() - start) / calls * 1e6)
`;

/**
 * The baseline of a tool call: a minimal Python client and a minimal Node JSON echo over the same kind of socket
 * (an inherited socketpair), with no validation, dispatch or concurrency support. Resolves µs per round trip.
 */
export function plainJsonEchoMicroseconds(executable, calls) {
  return new Promise((resolve, reject) => {
    const child = spawn(executable, ['-S', '-c', ECHO_CLIENT, String(calls)], {
      stdio: ['ignore', 'pipe', 'inherit', 'pipe'],
      env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
    });
    const socket = child.stdio[3];
    let pending = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      pending += chunk;
      let newline = pending.indexOf('\n');
      while (newline !== -1) {
        const request = JSON.parse(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        socket.write(`${JSON.stringify({ id: request.id, result: request.params })}\n`);
        newline = pending.indexOf('\n');
      }
    });
    socket.on('error', () => {});
    let output = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(Number(output)) : reject(new Error(`echo client exited ${code}`)),
    );
  });
}

/** Formats a ratio with two decimals. */
export function ratio(value, baseline) {
  return `${(value / baseline).toFixed(2)}×`;
}
