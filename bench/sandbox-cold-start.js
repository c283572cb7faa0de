// Cold `print(1)`: codecall under bubblewrap, next to the same interpreter started by bwrap with the same flags
// (no codecall around it), a plain interpreter, and codecall without a sandbox — interleaved in one run, medians.
// Usage: npm run build && node bench/sandbox-cold-start.js [runs=40] [python=python3]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveLimits } from '../dist/core/limits.js';
import { createCodecall } from '../dist/index.js';
import { describeSandboxProbe, probeSandbox } from '../dist/sandbox/bubblewrap-probe.js';
import { resolvePythonInterpreter } from '../dist/sandbox/interpreter.js';
import { bareBubblewrapLauncher, median } from './measure.js';

const RUNS = Number(process.argv[2] ?? 40);
const PYTHON = process.argv[3] ?? 'python3';
const WARMUP_RUNS = 3;

const probe = await probeSandbox();
if (!probe.bubblewrap.available) {
  console.error(`bubblewrap is not usable here: ${probe.bubblewrap.reason}`);
  process.exit(1);
}
const interpreter = await resolvePythonInterpreter(PYTHON);
const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-'));
const sandboxed = createCodecall({ sandbox: 'bubblewrap', python: PYTHON, stateDir: join(stateDir, 'sandboxed') });
const unsandboxed = createCodecall({ sandbox: 'none', python: PYTHON, stateDir: join(stateDir, 'plain') });

// The bare launch: bwrap with exactly the runner's flags, without codecall around it (see measure.js).
const bareBubblewrap = await bareBubblewrapLauncher({
  interpreter,
  root: join(stateDir, 'bare'),
  limits: resolveLimits({}),
});

function waitForExit(child) {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

async function plainInterpreter() {
  const started = performance.now();
  const child = spawn(interpreter.executable, ['-S', '-c', 'print(1)'], { stdio: ['ignore', 'pipe', 'pipe'], env: {} });
  child.stdout.resume();
  child.stderr.resume();
  await waitForExit(child);
  return performance.now() - started;
}

async function codecallRun(codecall) {
  const started = performance.now();
  const result = await codecall.execute('print(1)');
  const elapsed = performance.now() - started;
  if (result.status !== 'success' || result.stdout !== '1\n')
    throw new Error(`unexpected result: ${JSON.stringify(result)}`);
  return elapsed;
}

const variants = {
  'codecall, bubblewrap': () => codecallRun(sandboxed),
  'bwrap + python, same flags': () => bareBubblewrap(['-S', '-c', 'print(1)']),
  'codecall, no sandbox': () => codecallRun(unsandboxed),
  'python, plain': plainInterpreter,
};
const samples = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
for (let round = 0; round < WARMUP_RUNS + RUNS; round += 1) {
  for (const [name, run] of Object.entries(variants)) {
    const elapsed = await run();
    if (round >= WARMUP_RUNS) samples[name].push(elapsed);
  }
}
await Promise.all([sandboxed.close(), unsandboxed.close()]);
rmSync(stateDir, { recursive: true, force: true });

const medians = Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, median(values)]));
const bare = medians['bwrap + python, same flags'];
console.log(
  `cold print(1), median of ${RUNS} interleaved runs; ${interpreter.executable} (Python ${interpreter.version})`,
);
for (const line of describeSandboxProbe(probe)) console.log(`  ${line}`);
for (const [name, value] of Object.entries(medians)) {
  console.log(`${name.padEnd(28)} ${value.toFixed(1).padStart(7)} ms   ${(value / bare).toFixed(2)}x bare bwrap`);
}
