import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { LimitReason } from '../../../src/core/isolation.js';
import { type Limits, resolveLimits } from '../../../src/core/limits.js';
import { RUNTIME_DIR } from '../../../src/engine/codecall.js';
import { BOOT_COMMAND } from '../../../src/engine/launch/interpreter-launch.js';
import { buildScriptEnvironment } from '../../../src/sandbox/environment.js';
import { resolvePythonInterpreter } from '../../../src/sandbox/interpreter.js';
import type { LaunchPlan, SandboxRunner } from '../../../src/sandbox/runner.js';

/** What a run launched by {@link launchWithRunner} did. */
export interface LaunchOutcome {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly reason: LimitReason | undefined;
  readonly workDir: string;
}

/** Options of {@link launchWithRunner}. */
export interface LaunchOptions {
  readonly runner: SandboxRunner;
  readonly code: string;
  readonly limits?: Partial<Limits>;
  readonly python?: string;
  /** Where the run directory goes (default: a fresh temporary folder, mode 0711). */
  readonly runsRoot?: string;
  readonly readOnlyPaths?: readonly string[];
  /**
   * Launch gated (`scriptGated`): the interpreter waits for one byte on the channel, sent once `afterSpawn`
   * resolved, before the boot runs the script — the contract of the engine's pooled boot.
   */
  readonly gated?: boolean;
  /** Called with the launch plan between `prepare` and the spawn. */
  readonly onPlan?: ((plan: LaunchPlan) => void) | undefined;
  /** Called while the script runs (after `afterSpawn`), with the run's id. */
  readonly whileRunning?: ((runId: string) => void | Promise<void>) | undefined;
}

/** Boot of a gated launch: wait for the host's go on the channel, then the engine's usual boot. */
const GATED_BOOT_COMMAND = `import os; os.read(3, 1); ${BOOT_COMMAND}`;

let runCounter = 0;

/**
 * Runs `script.py` under the engine's boot through a runner the way the engine does — plan spawned detached with stdio
 * 0..3 + inherited descriptors + control channel, `afterSpawn`, wait for exit, `killAll`, `limitReason`, `dispose`
 * — for tests of the runner itself, below the public API.
 */
export async function launchWithRunner(options: LaunchOptions): Promise<LaunchOutcome> {
  const interpreter = await resolvePythonInterpreter(options.python ?? 'python3');
  const limits = resolveLimits({ timeoutMs: 30_000, ...options.limits });
  const ownRoot = options.runsRoot === undefined;
  const runsRoot = options.runsRoot ?? mkdtempSync(join(tmpdir(), 'codecall-launch-'));
  // Traversable by the sandbox user, like the engine's runs folder.
  if (ownRoot) chmodSync(runsRoot, 0o711);
  runCounter += 1;
  const runId = `${process.pid.toString(16)}${runCounter.toString(16).padStart(8, '0')}`;
  const workDir = join(runsRoot, runId);
  mkdirSync(workDir, { mode: 0o700 });
  mkdirSync(join(workDir, 'tmp'), { mode: 0o700 });
  mkdirSync(join(workDir, 'artifacts'), { mode: 0o700 });
  writeFileSync(join(workDir, 'script.py'), options.code);
  const environment = buildScriptEnvironment({
    workDir,
    tmpDir: join(workDir, 'tmp'),
    artifactsDir: join(workDir, 'artifacts'),
    pythonPath: [RUNTIME_DIR, ...interpreter.sitePaths],
    limits,
  });
  const { plan, containment } = await options.runner.prepare({
    runId,
    interpreter,
    pythonArguments: ['-S', '-c', options.gated ? GATED_BOOT_COMMAND : BOOT_COMMAND, 'script.py'],
    workDir,
    scriptFile: join(workDir, 'script.py'),
    readOnlyPaths: [RUNTIME_DIR, ...(options.readOnlyPaths ?? [])],
    environment,
    limits,
    network: false,
    scriptGated: options.gated === true,
  });
  options.onPlan?.(plan);
  const inherited = plan.inheritedFileDescriptors ?? [];
  const child = spawn(plan.command, plan.args, {
    cwd: plan.cwd,
    env: plan.environment,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...inherited, ...(plan.controlChannel ? (['pipe'] as const) : [])],
    uid: plan.uid,
    gid: plan.gid,
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = setTimeout(() => process.kill(-(child.pid as number), 'SIGKILL'), limits.timeoutMs);
  try {
    const control = plan.controlChannel ? (child.stdio[4 + inherited.length] as Duplex) : undefined;
    await containment?.afterSpawn?.(child.pid as number, control);
    if (options.gated) (child.stdio[3] as Duplex).write('g');
    await options.whileRunning?.(runId);
    const exitCode = await exited;
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      // The group is gone already.
    }
    await containment?.killAll?.();
    const reason = await containment?.limitReason?.();
    return { exitCode, stdout, stderr, reason, workDir };
  } finally {
    clearTimeout(timer);
    await containment?.dispose?.();
    if (ownRoot) rmSync(runsRoot, { recursive: true, force: true });
    else rmSync(workDir, { recursive: true, force: true });
  }
}
