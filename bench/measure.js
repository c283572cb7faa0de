// Shared helpers of the benchmarks: medians, bare interpreter spawns, and the plain JSON echo baseline.
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

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

/** Resolves what `child` prints on stdout once it exits with 0; rejects naming it (`name`) otherwise. */
export function printedText(child, name) {
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${name} exited ${code}`))));
  });
}

/** Resolves what `child` prints on stdout, as a number, once it exits with 0 (see {@link printedText}). */
export function printedNumber(child, name) {
  return printedText(child, name).then(Number);
}

/**
 * A minimal Python client (`source`, run with `args`) on an inherited socketpair (fd 3), answered by a minimal Node
 * server: one reply line, `answer(request)`, for each request line. Resolves the number the client prints (`name`
 * says which client failed).
 */
export function answerLineClient({ executable, source, args = [], answer, name }) {
  const child = spawn(executable, ['-S', '-c', source, ...args], {
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
      socket.write(`${answer(request)}\n`);
      newline = pending.indexOf('\n');
    }
  });
  socket.on('error', () => {});
  return printedNumber(child, name);
}

/**
 * The baseline of a tool call: a minimal Python client and a minimal Node JSON echo over the same kind of socket
 * (an inherited socketpair), with no validation, dispatch or concurrency support. Resolves µs per round trip.
 */
export function plainJsonEchoMicroseconds(executable, calls) {
  return answerLineClient({
    executable,
    source: ECHO_CLIENT,
    args: [String(calls)],
    answer: (request) => JSON.stringify({ id: request.id, result: request.params }),
    name: 'echo client',
  });
}

/** Formats a ratio with two decimals. */
export function ratio(value, baseline) {
  return `${(value / baseline).toFixed(2)}×`;
}

/**
 * Starts `count` processes at once (same stdio layout as codecall) and waits for all; resolves { ms, failures }.
 * The baseline of concurrent runs: the same number of bare interpreters.
 */
export async function timeConcurrentSpawns(command, args, count) {
  const started = performance.now();
  const outcomes = await Promise.allSettled(Array.from({ length: count }, () => timeSpawn(command, args)));
  return {
    ms: performance.now() - started,
    failures: outcomes.filter((outcome) => outcome.status === 'rejected').length,
  };
}

/**
 * A bare interpreter started the way the bubblewrap runner starts scripts — bwrap with exactly the runner's flags
 * (namespaces, mounts, seccomp, sized tmpfs, empty environment, unprivileged user) — but without codecall around it:
 * no cgroups, tool channel, boot script or output capture. Returns a function that times one such launch in ms.
 */
export async function bareBubblewrapLauncher({ interpreter, root, limits }) {
  const { createBubblewrapRunner } = await import('../dist/sandbox/bubblewrap-runner.js');
  const { buildScriptEnvironment } = await import('../dist/sandbox/environment.js');
  const runner = await createBubblewrapRunner({ cgroups: false });
  mkdirSync(root, { recursive: true, mode: 0o711 });
  let count = 0;
  return async (pythonArguments = ['-S', '-c', 'pass']) => {
    count += 1;
    const workDir = join(root, String(count));
    mkdirSync(workDir, { mode: 0o700 });
    mkdirSync(join(workDir, 'tmp'), { mode: 0o700 });
    const started = performance.now();
    const { plan, containment } = await runner.prepare({
      runId: `bare${count}`,
      interpreter,
      pythonArguments,
      workDir,
      readOnlyPaths: [],
      environment: buildScriptEnvironment({
        workDir,
        tmpDir: join(workDir, 'tmp'),
        artifactsDir: join(workDir, 'artifacts'),
        pythonPath: interpreter.sitePaths,
        limits,
      }),
      limits,
      network: false,
    });
    const child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      env: plan.environment,
      detached: true,
      // Slot 3 is the tool channel in codecall runs; the runner's descriptors start at 4.
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...(plan.inheritedFileDescriptors ?? [])],
      uid: plan.uid,
      gid: plan.gid,
    });
    await containment?.afterSpawn?.(child.pid);
    child.stdout.resume();
    child.stderr.resume();
    const code = await new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    const elapsed = performance.now() - started;
    await containment?.dispose?.();
    rmSync(workDir, { recursive: true, force: true });
    if (code !== 0) throw new Error(`bare bwrap launch exited with ${code}`);
    return elapsed;
  };
}
