import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { ScriptExceptionReport } from '../rpc/protocol.js';
import { ToolCallServer, type ToolLookup } from '../rpc/tool-call-server.js';
import { buildScriptEnvironment } from '../sandbox/environment.js';
import type { PythonInterpreter } from '../sandbox/interpreter.js';
import type { LimitReason, PreparedLaunch, SandboxRunner } from '../sandbox/runner.js';
import { collectArtifacts } from './artifacts.js';
import { CodecallAbortError, CodecallError } from './errors.js';
import { failureHint, formatSeconds, type HintContext } from './failure-hints.js';
import type { Limits } from './limits.js';
import { decodeUtf8, sanitizeForModel } from './model-text.js';
import { type CapturedOutput, OutputCapture, utf8PrefixEnd, utf8SuffixStart } from './output-capture.js';
import { forgetProcessGroup, signalProcessGroup, trackProcessGroup } from './process-registry.js';
import type { ExecuteResult, ExecuteStatus, ScriptError } from './result.js';
import { createRunDirectory, removeRunDirectory } from './run-directory.js';

/** Time between SIGTERM and SIGKILL when a run is stopped. */
export const KILL_GRACE_MS = 200;
/** How long output still in the pipes is read after the interpreter exited. */
export const OUTPUT_DRAIN_MS = 250;
/** File name of the script inside its run directory (what tracebacks show). */
export const SCRIPT_FILE_NAME = 'script.py';
/** How the interpreter starts: import the boot module (its bytecode is cached, a script file's never is). */
export const BOOT_COMMAND = 'import codecall_boot; codecall_boot.main()';

/** Everything about a codecall instance that a run needs; fixed between runs. */
export interface RunEnvironment {
  readonly interpreter: PythonInterpreter;
  readonly runner: SandboxRunner;
  readonly tools: ToolLookup;
  /** Directories for `sys.path` before the interpreter's site paths (generated modules, runtime). */
  readonly modulePaths: readonly string[];
  /** Directory of the shipped Python runtime (boot script and `codecall_runtime`). */
  readonly runtimeDir: string;
  readonly runsRoot: string;
  /** Where full outputs and artifacts are kept after a run. */
  readonly outputRoot: string;
  readonly environmentExtra?: Readonly<Record<string, string>> | undefined;
  readonly environmentPassthrough?: readonly string[] | undefined;
  readonly network: boolean;
  readonly hintContext: Omit<HintContext, 'limits'>;
}

/** Per-run options. */
export interface RunOptions {
  readonly limits: Limits;
  readonly signal?: AbortSignal | undefined;
  /** Called once the process runs with a function that stops it (for `close()`). */
  readonly onStart?: ((stop: (reason: LimitReason) => void) => void) | undefined;
}

/** A run id: 16 hex characters, safe as a file name. */
export function createRunId(): string {
  return randomBytes(8).toString('hex');
}

/**
 * Runs one script: private directory, launch through the runner, tool channel, output capture, limits, kill of the
 * whole process tree, cleanup. Resolves with the result for every failure of the script; rejects only for host
 * problems (spawn failure) and with an AbortError when `signal` fires.
 */
export async function runScript(
  environment: RunEnvironment,
  code: string,
  options: RunOptions,
): Promise<ExecuteResult> {
  const startedAt = performance.now();
  const { limits, signal } = options;
  if (signal?.aborted) throw new CodecallAbortError(signal.reason);
  const runId = createRunId();
  const directory = await createRunDirectory(environment.runsRoot, runId);
  let prepared: PreparedLaunch | undefined;
  try {
    await writeFile(join(directory.root, SCRIPT_FILE_NAME), code, { mode: 0o600 });
    const scriptEnvironment = buildScriptEnvironment({
      workDir: directory.root,
      tmpDir: directory.tmp,
      artifactsDir: directory.artifacts,
      pythonPath: [...environment.modulePaths, environment.runtimeDir, ...environment.interpreter.sitePaths],
      limits,
      extra: environment.environmentExtra,
      passthrough: environment.environmentPassthrough,
    });
    prepared = await environment.runner.prepare({
      runId,
      interpreter: environment.interpreter,
      pythonArguments: ['-S', '-c', BOOT_COMMAND, SCRIPT_FILE_NAME],
      workDir: directory.root,
      readOnlyPaths: [...new Set([...environment.modulePaths, environment.runtimeDir])],
      environment: scriptEnvironment,
      limits,
      network: environment.network,
    });
    const outcome = await superviseProcess(environment, prepared, {
      runId,
      limits,
      signal,
      artifactsDir: directory.artifacts,
      outputPath: join(environment.outputRoot, `${runId}-stdout.txt`),
      onStart: options.onStart,
    });
    const artifacts = await collectArtifacts(directory.artifacts, join(environment.outputRoot, runId));
    if (outcome.reason === 'aborted' && signal?.aborted) throw new CodecallAbortError(signal.reason);
    return buildResult(environment, outcome, limits, artifacts, performance.now() - startedAt);
  } finally {
    await prepared?.containment?.dispose?.();
    await removeRunDirectory(directory.root);
  }
}

interface SupervisionOptions {
  readonly runId: string;
  readonly limits: Limits;
  readonly signal?: AbortSignal | undefined;
  readonly artifactsDir: string;
  readonly outputPath: string;
  readonly onStart?: RunOptions['onStart'];
}

interface ProcessOutcome {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly reason?: LimitReason | undefined;
  readonly stdout: CapturedOutput;
  readonly stderr: CapturedOutput;
  readonly exception?: ScriptExceptionReport | undefined;
  readonly toolCalls: number;
  readonly toolCallLimitReached: boolean;
  readonly isolation: ExecuteResult['isolation'];
}

async function superviseProcess(
  environment: RunEnvironment,
  prepared: PreparedLaunch,
  options: SupervisionOptions,
): Promise<ProcessOutcome> {
  const { plan, containment } = prepared;
  const { limits } = options;
  let child: ChildProcess;
  try {
    child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      env: plan.environment,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...(plan.inheritedFileDescriptors ?? [])],
      uid: plan.uid,
      gid: plan.gid,
    });
  } catch (cause) {
    throw spawnError(plan.command, cause);
  }
  const pid = child.pid;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: Error }>((resolve) => {
    child.once('exit', (code, exitSignal) => resolve({ code, signal: exitSignal }));
    child.once('error', (error) => resolve({ error }));
  });
  if (pid === undefined) {
    const failure = await exited;
    throw spawnError(plan.command, 'error' in failure ? failure.error : undefined);
  }
  trackProcessGroup(pid);
  await containment?.afterSpawn?.(pid);

  let reason: LimitReason | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (why: LimitReason): void => {
    if (reason === undefined) reason = why;
    if (killTimer !== undefined) return;
    signalProcessGroup(pid, 'SIGTERM');
    killTimer = setTimeout(() => {
      signalProcessGroup(pid, 'SIGKILL');
      void containment?.killAll?.();
    }, KILL_GRACE_MS);
  };

  let exception: ScriptExceptionReport | undefined;
  const server = new ToolCallServer({
    socket: child.stdio[3] as Duplex,
    tools: environment.tools,
    runId: options.runId,
    artifactsDir: options.artifactsDir,
    maxToolCalls: limits.maxToolCalls,
    toolCallTimeoutMs: limits.toolCallTimeoutMs,
    maxFrameBytes: limits.maxFrameBytes,
    maxConcurrentToolCalls: limits.maxConcurrentToolCalls,
    onException: (report) => {
      exception = report;
    },
    onAbuse: (why) => stop(why),
  });

  const stdout = new OutputCapture({
    keepBytes: limits.maxStdoutBytes,
    fullOutputPath: options.outputPath,
    maxFullOutputBytes: limits.maxOutputBytes,
  });
  const stderr = new OutputCapture({ keepBytes: limits.maxStderrBytes });
  const onOutput = (capture: OutputCapture) => (chunk: Buffer) => {
    capture.push(chunk);
    if (stdout.totalBytes + stderr.totalBytes > limits.maxOutputBytes) stop('output');
  };
  child.stdout?.on('data', onOutput(stdout));
  child.stderr?.on('data', onOutput(stderr));

  const timeoutTimer = setTimeout(() => stop('timeout'), limits.timeoutMs);
  const onAbort = () => stop('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  options.onStart?.(stop);

  const exit = await exited;
  clearTimeout(timeoutTimer);
  options.signal?.removeEventListener('abort', onAbort);
  // Completion is the interpreter's exit: whatever it left behind in its group goes now.
  signalProcessGroup(pid, 'SIGKILL');
  if (killTimer !== undefined) clearTimeout(killTimer);
  await containment?.killAll?.();
  forgetProcessGroup(pid);
  server.end();
  await drainOutput(child);

  const exitCode = 'error' in exit ? null : exit.code;
  const exitSignal = 'error' in exit ? null : exit.signal;
  if (reason === undefined && exitCode !== 0) reason = await containment?.limitReason?.();
  if (reason === undefined && exitSignal === 'SIGXCPU') reason = 'cpu';
  if (reason === undefined && exitCode !== 0 && exception?.type === 'MemoryError') reason = 'memory';
  if (reason === undefined && exitCode !== 0 && server.limitReached) reason = 'tool_calls';
  const [stdoutCapture, stderrCapture] = await Promise.all([stdout.finish(), stderr.finish()]);
  return {
    exitCode,
    signal: exitSignal,
    reason,
    stdout: stdoutCapture,
    stderr: stderrCapture,
    exception,
    toolCalls: server.toolCalls,
    toolCallLimitReached: server.limitReached,
    isolation: environment.runner.isolation,
  };
}

function drainOutput(child: ChildProcess): Promise<void> {
  const streams = [child.stdout, child.stderr].filter((stream) => stream !== null && !stream.readableEnded);
  if (streams.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    let open = streams.length;
    const finish = () => {
      clearTimeout(timer);
      for (const stream of streams) stream?.destroy();
      resolve();
    };
    // A process that escaped the group may hold the pipes open: read what is there, then stop waiting.
    const timer = setTimeout(finish, OUTPUT_DRAIN_MS);
    for (const stream of streams) {
      stream?.once('close', () => {
        open -= 1;
        if (open === 0) finish();
      });
    }
  });
}

function spawnError(command: string, cause: unknown): CodecallError {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  return new CodecallError(
    'SPAWN_FAILED',
    `cannot start "${command}"${code ? ` (${code})` : ''}; check that it is installed and executable`,
    { command },
    { cause },
  );
}

function renderStdout(capture: CapturedOutput): string {
  if (!capture.truncated) return sanitizeForModel(decodeUtf8(Buffer.concat([capture.head, capture.tail])));
  const head = capture.head.subarray(0, utf8PrefixEnd(capture.head));
  const tail = capture.tail.subarray(utf8SuffixStart(capture.tail));
  const omitted = capture.totalBytes - head.length - tail.length;
  const where = capture.fullOutputPath
    ? `; the ${capture.fullOutputComplete ? 'complete' : 'first part of the'} output is in ${capture.fullOutputPath}`
    : '';
  const notice = `\n[… ${omitted} bytes omitted: kept the first ${head.length} and the last ${tail.length} of ${capture.totalBytes} bytes${where} …]\n`;
  return `${sanitizeForModel(decodeUtf8(head))}${notice}${sanitizeForModel(decodeUtf8(tail))}`;
}

function renderStderr(capture: CapturedOutput): string {
  if (!capture.truncated) return sanitizeForModel(decodeUtf8(Buffer.concat([capture.head, capture.tail])));
  const head = capture.head.subarray(0, utf8PrefixEnd(capture.head));
  const tail = capture.tail.subarray(utf8SuffixStart(capture.tail));
  const omitted = capture.totalBytes - head.length - tail.length;
  return `${sanitizeForModel(decodeUtf8(head))}\n[… ${omitted} bytes of stderr omitted …]\n${sanitizeForModel(decodeUtf8(tail))}`;
}

function scriptError(outcome: ProcessOutcome, limits: Limits, stderr: string): ScriptError | undefined {
  if (outcome.reason === 'timeout') {
    return { type: 'Timeout', message: `the script did not finish within ${formatSeconds(limits.timeoutMs)}` };
  }
  if (outcome.exception !== undefined) {
    return {
      type: outcome.exception.type,
      message: outcome.exception.message,
      traceback: outcome.exception.traceback,
    };
  }
  switch (outcome.reason) {
    case 'output':
      return { type: 'OutputLimit', message: `the script printed more than ${limits.maxOutputBytes} bytes` };
    case 'tool_calls':
      return { type: 'ToolCallLimit', message: `tool call limit reached (${limits.maxToolCalls})` };
    case 'aborted':
      return { type: 'Aborted', message: 'the run was stopped before the script finished' };
    case 'memory':
      return { type: 'MemoryLimit', message: `the script exceeded its memory limit of ${limits.memoryBytes} bytes` };
    case 'pids':
      return { type: 'ProcessLimit', message: `the script exceeded its limit of ${limits.maxProcesses} processes` };
    case 'cpu':
      return { type: 'CpuLimit', message: `the script used more than ${limits.cpuSeconds} s of CPU time` };
    default:
      break;
  }
  if (outcome.exitCode === 0) return undefined;
  if (outcome.signal !== null) return { type: 'Killed', message: `the interpreter was killed by ${outcome.signal}` };
  const lastLine = stderr.trimEnd().split('\n').at(-1) ?? '';
  const match = /^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): ?(.*)$/.exec(lastLine);
  if (match) return { type: match[1] ?? 'Error', message: match[2] ?? '', traceback: stderr.trim() || undefined };
  return { type: 'SystemExit', message: `the script exited with status ${outcome.exitCode}` };
}

function buildResult(
  environment: RunEnvironment,
  outcome: ProcessOutcome,
  limits: Limits,
  artifacts: ExecuteResult['artifacts'],
  durationMs: number,
): ExecuteResult {
  const status: ExecuteStatus =
    outcome.reason === 'timeout'
      ? 'timeout'
      : outcome.reason === 'aborted'
        ? 'aborted'
        : outcome.reason !== undefined
          ? 'limit'
          : outcome.exitCode === 0
            ? 'success'
            : 'error';
  const stderr = renderStderr(outcome.stderr);
  const error = status === 'success' ? undefined : scriptError(outcome, limits, stderr);
  const base = {
    status,
    stdout: renderStdout(outcome.stdout),
    stderr,
    exitCode: outcome.exitCode,
    ...(outcome.signal !== null ? { signal: outcome.signal } : {}),
    ...(error !== undefined ? { error } : {}),
    toolCalls: outcome.toolCalls,
    durationMs: Math.round(durationMs * 100) / 100,
    ...(outcome.stdout.truncated
      ? {
          stdoutTruncated: {
            keptBytes: outcome.stdout.head.length + outcome.stdout.tail.length,
            totalBytes: outcome.stdout.totalBytes,
            fullOutputPath: outcome.stdout.fullOutputPath,
          },
        }
      : {}),
    isolation: outcome.isolation,
    ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}),
    ...(artifacts !== undefined && artifacts.length > 0 ? { artifacts } : {}),
  };
  const hint = status === 'success' ? undefined : failureHint(base, { ...environment.hintContext, limits });
  return hint === undefined ? base : { ...base, hint };
}
