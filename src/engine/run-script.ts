import { randomBytes } from 'node:crypto';
import { constants } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { CodecallAbortError } from '../core/errors.js';
import type { LimitReason } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import type { ExecuteResult } from '../core/result.js';
import {
  DONE_NOTIFICATION,
  encodeNotification,
  RUN_NOTIFICATION,
  type ScriptExceptionReport,
} from '../rpc/protocol.js';
import { collectArtifacts } from './artifacts.js';
import {
  createChannelServer,
  type LaunchedInterpreter,
  launchInterpreter,
  type ProcessExit,
  type RunEnvironment,
  settledWithin,
} from './interpreter-launch.js';
import { OutputCapture } from './output-capture.js';
import { OutputSplitter } from './output-splitter.js';
import { buildResult, type ProcessOutcome } from './run-result.js';

export {
  BOOT_COMMAND,
  type RunEnvironment,
  SCRIPT_FILE_NAME,
} from './interpreter-launch.js';

/** Time between SIGTERM and SIGKILL when a run is stopped. */
export const KILL_GRACE_MS = 200;
/** How long output still in the pipes is read after the interpreter exited. */
export const OUTPUT_DRAIN_MS = 250;

/** Per-run options. */
export interface RunOptions {
  readonly limits: Limits;
  readonly signal?: AbortSignal | undefined;
  /** Called once the process runs with a function that stops it (for `close()`). */
  readonly onStart?: ((stop: (reason: LimitReason) => void) => void) | undefined;
  /**
   * Takes the end of the run's cleanup (releasing the runner's resources, e.g. cgroups) so the result can be
   * returned first; the caller must wait for it before it reports itself closed. The run directory is removed
   * before the result either way. Without it the run awaits the whole cleanup.
   */
  readonly deferCleanup?: ((cleanup: Promise<void>) => void) | undefined;
}

/** A run id: 16 hex characters, safe as a file name. */
export function createRunId(): string {
  return randomBytes(8).toString('hex');
}

/**
 * Runs one script in a fresh interpreter: private directory, launch through the runner, tool channel, output
 * capture, limits, kill of the whole process tree, cleanup. Resolves with the result for every failure of the script;
 * rejects only for host problems (spawn failure) and with an AbortError when `signal` fires.
 */
export async function runScript(
  environment: RunEnvironment,
  code: string,
  options: RunOptions,
): Promise<ExecuteResult> {
  const startedAt = performance.now();
  if (options.signal?.aborted) throw new CodecallAbortError(options.signal.reason);
  const launched = await launchInterpreter(environment, {
    runId: createRunId(),
    limits: options.limits,
    mode: 'cold',
    script: code,
  });
  return finishRun(environment, launched, { ...options, startedAt });
}

/**
 * Runs one script in a warm-pool interpreter (started with `launchInterpreter` in `pooled` mode with the same
 * launch limits): `$run` hands the script over (the boot writes it to its file) as the channel, captures and timers
 * start, and the run goes on exactly like a cold one. The interpreter is used for this run only.
 */
export async function runPooledScript(
  environment: RunEnvironment,
  launched: LaunchedInterpreter,
  code: string,
  options: RunOptions,
): Promise<ExecuteResult> {
  const startedAt = performance.now();
  if (options.signal?.aborted) {
    const cleanup = launched.release();
    if (options.deferCleanup !== undefined) options.deferCleanup(cleanup);
    else await cleanup;
    throw new CodecallAbortError(options.signal.reason);
  }
  return finishRun(environment, launched, {
    ...options,
    startedAt,
    handOver: encodeNotification(RUN_NOTIFICATION, { code: wellFormed(code) }),
  });
}

interface FinishOptions extends RunOptions {
  readonly startedAt: number;
  /** The `$run` frame of a pooled interpreter, written once the run is supervised. */
  readonly handOver?: string | undefined;
}

async function finishRun(
  environment: RunEnvironment,
  launched: LaunchedInterpreter,
  options: FinishOptions,
): Promise<ExecuteResult> {
  try {
    const outcome = await superviseProcess(environment, launched, options);
    const artifacts = await collectArtifacts(
      launched.directory.artifacts,
      join(environment.outputRoot, launched.runId),
    );
    if (outcome.reason === 'aborted' && options.signal?.aborted) throw new CodecallAbortError(options.signal.reason);
    return buildResult({
      outcome,
      limits: options.limits,
      hintContext: environment.hintContext,
      artifacts,
      durationMs: performance.now() - options.startedAt,
    });
  } finally {
    const cleanup = launched.release();
    if (options.deferCleanup !== undefined) {
      // The directory goes before the result (callers may rely on it); the runner's own cleanup may follow.
      options.deferCleanup(cleanup);
      await launched.directoryRemoved;
    } else {
      await cleanup;
    }
  }
}

/** The code as the file a cold run would have written: lone surrogates become U+FFFD, as Node encodes them. */
export function wellFormed(code: string): string {
  return /[\uD800-\uDFFF]/.test(code) ? Buffer.from(code, 'utf8').toString('utf8') : code;
}

async function superviseProcess(
  environment: RunEnvironment,
  launched: LaunchedInterpreter,
  options: FinishOptions,
): Promise<ProcessOutcome> {
  const { limits } = options;
  // The script first: the pooled interpreter takes a while to wake up, and everything below is set up in this same
  // tick, before any of its output or calls can be read.
  if (options.handOver !== undefined) launched.channel.write(options.handOver);
  launched.holdEventLoop(true);
  let reason: LimitReason | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (why: LimitReason): void => {
    if (reason === undefined) reason = why;
    if (killTimer !== undefined) return;
    launched.signal('SIGTERM');
    killTimer = setTimeout(() => void launched.killAll(), KILL_GRACE_MS);
  };

  let exception: ScriptExceptionReport | undefined;
  let doneReported = false;
  let reportDone!: (exit: ProcessExit) => void;
  const reportedDone = new Promise<ProcessExit>((resolve) => {
    reportDone = resolve;
  });
  const server = createChannelServer(launched, environment, limits, {
    onException: (report) => {
      exception = report;
    },
    onNotification: (method, params) => {
      const exitCode = (params as { exitCode?: unknown } | null)?.exitCode;
      if (method === DONE_NOTIFICATION && typeof exitCode === 'number' && Number.isInteger(exitCode)) {
        doneReported = true;
        reportDone({ code: exitCode, signal: null });
      }
    },
    onAbuse: (why) => stop(why),
  });

  const stdout = new OutputCapture({
    keepBytes: limits.maxStdoutBytes,
    fullOutputPath: join(environment.outputRoot, `${launched.runId}-stdout.txt`),
    maxFullOutputBytes: limits.maxOutputBytes,
  });
  const stderr = new OutputCapture({ keepBytes: limits.maxStderrBytes });
  const onOutput = (capture: OutputCapture) => (chunk: Buffer) => {
    capture.push(chunk);
    if (stdout.totalBytes + stderr.totalBytes > limits.maxOutputBytes) stop('output');
  };
  const outputs = [
    captureUntilEnd(launched.stdout, onOutput(stdout), launched.outputNonce),
    captureUntilEnd(launched.stderr, onOutput(stderr), launched.outputNonce),
  ];

  const timeoutTimer = setTimeout(() => stop('timeout'), limits.timeoutMs);
  const onAbort = () => stop('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  options.onStart?.(stop);
  // A pooled interpreter's channel was paused after `$ready`; the server listens now, so nothing is lost.
  if (options.handOver !== undefined) launched.channel.resume();

  // The boot reports its exit status as its last act; the exit itself follows once the kernel has torn it down.
  const exit = await Promise.race([launched.exited, reportedDone]);
  clearTimeout(timeoutTimer);
  options.signal?.removeEventListener('abort', onAbort);
  if (killTimer !== undefined) clearTimeout(killTimer);
  // Completion is the interpreter's exit (or its `$done`): whatever it left behind in its group goes now (a sandbox
  // goes with its pid namespace); the runner's own sweep (e.g. of a cgroup) follows in the release, after the result.
  launched.signal('SIGKILL');
  server.end();
  // What is still in the pipes, up to the end markers (or until they close): a process that escaped the group may
  // hold them open, so the wait is bounded.
  await settledWithin(Promise.all(outputs.map((output) => output.ended)), OUTPUT_DRAIN_MS);
  for (const output of outputs) output.stop();

  let exitCode = 'error' in exit ? null : exit.code;
  let exitSignal = 'error' in exit ? null : exit.signal;
  // bwrap reports a child killed by signal N as exit status 128 + N; the boot's own `$done` never carries that.
  const bubblewrapSignal = signalNameOf((exitCode ?? 0) - 128);
  if (environment.runner.isolation === 'bubblewrap' && !doneReported && exitSignal === null && bubblewrapSignal) {
    exitSignal = bubblewrapSignal;
    exitCode = null;
  }
  if (reason === undefined && exitCode !== 0) reason = await launched.containment?.limitReason?.();
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
    isolationWarning: environment.runner.isolationWarning,
  };
}

/** One output stream of a run feeding its capture; see {@link captureUntilEnd}. */
interface CapturedOutput {
  /** Settles once the end marker went by or the stream closed. */
  readonly ended: Promise<void>;
  /** Stops feeding the capture: what comes later is not the run's. */
  stop(): void;
}

/**
 * Feeds one output stream of a run into `push` up to the end marker with `nonce` that the boot writes when the
 * script is over (without a nonce, or when the marker never comes, up to the stream's close).
 */
function captureUntilEnd(stream: Readable, push: (chunk: Buffer) => void, nonce: string | undefined): CapturedOutput {
  let markEnded!: () => void;
  const ended = new Promise<void>((resolve) => {
    markEnded = resolve;
  });
  let splitter: OutputSplitter | undefined;
  if (nonce !== undefined) {
    splitter = new OutputSplitter({ output: push, outside: () => {}, ended: markEnded });
    splitter.expect(nonce);
  }
  const onData = splitter === undefined ? push : (chunk: Buffer) => splitter?.push(chunk);
  const onClose = () => {
    splitter?.flush();
    markEnded();
  };
  stream.on('data', onData);
  stream.once('close', onClose);
  if (stream.closed) onClose();
  return {
    ended,
    stop() {
      stream.off('data', onData);
      stream.off('close', onClose);
    },
  };
}

/** Reads what is still in the pipes after the exit, for at most {@link OUTPUT_DRAIN_MS}. */
export async function drainOutput(streams: readonly Readable[]): Promise<void> {
  const open = streams.filter((stream) => !stream.readableEnded && !stream.destroyed);
  if (open.length === 0) return;
  // A process that escaped the group may hold the pipes open: read what is there, then stop waiting.
  await settledWithin(
    Promise.all(open.map((stream) => new Promise((resolve) => stream.once('close', resolve)))),
    OUTPUT_DRAIN_MS,
  );
  for (const stream of open) stream.destroy();
}

/** The name of signal `number` (e.g. 9 → `SIGKILL`), or undefined when it is not a signal number. */
function signalNameOf(number: number): NodeJS.Signals | undefined {
  if (number <= 0) return undefined;
  for (const [name, value] of Object.entries(constants.signals)) {
    if (value === number) return name as NodeJS.Signals;
  }
  return undefined;
}
