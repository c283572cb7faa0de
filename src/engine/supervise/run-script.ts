import { CodecallAbortError } from '../../core/errors.js';
import type { LimitReason } from '../../core/isolation.js';
import type { Limits } from '../../core/limits.js';
import type { ExecuteResult } from '../../core/result.js';
import { writeToChannel } from '../../rpc/channel-end.js';
import type { ApproveToolCall } from '../../tools/tool-approval.js';
import { type LaunchedInterpreter, launchInterpreter, type RunEnvironment } from '../launch/interpreter-launch.js';
import { createRunId } from '../launch/run-directory.js';
import { finishResult, outputPathsOf } from '../result/finish-result.js';
import { runFrame } from './hand-over.js';
import { type RunEventListener, runEventsFor } from './run-events.js';
import { killPolicy } from './stop-policy.js';
import { supervisorFor } from './supervisor.js';

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
  /** Receives the run's live events. */
  readonly onEvent?: RunEventListener | undefined;
  /** This run's approval hook, over the codecall's. */
  readonly approveToolCall?: ApproveToolCall | undefined;
}

/**
 * Runs one script in a fresh interpreter: private directory, launch through the runner, then the supervisor (tool
 * channel, output capture, limits, kill of the whole process tree), result, cleanup. Resolves with the result for
 * every failure of the script; rejects only for host problems (spawn failure) and with an AbortError when `signal`
 * fires; the AbortError carries the result of a run that had started (see {@link CodecallAbortError}).
 */
export async function runScript(
  environment: RunEnvironment,
  code: string,
  options: RunOptions,
): Promise<ExecuteResult> {
  // The run starts now, on performance.now()'s clock, read once the interpreter is spawned: the first use of
  // `performance` loads perf_hooks (a millisecond of a one-shot run), which need not delay the launch.
  const startedAtNs = process.hrtime.bigint();
  if (options.signal?.aborted) throw new CodecallAbortError(options.signal.reason);
  const launched = await launchInterpreter(environment, {
    runId: createRunId(),
    limits: options.limits,
    mode: 'cold',
    script: code,
  });
  return superviseRun(environment, launched, options, performanceTimeOf(startedAtNs));
}

/** The `performance.now()` of an earlier `process.hrtime.bigint()` reading: both read the same monotonic clock. */
function performanceTimeOf(hrtimeNs: bigint): number {
  return performance.now() - Number(process.hrtime.bigint() - hrtimeNs) / 1_000_000;
}

/**
 * Runs one script in a warm-pool interpreter (started with `launchInterpreter` in `pooled` mode with the same
 * launch limits): `$run` hands the script over (the boot writes it to its file), then the channel, captures and
 * timers start, and the run goes on exactly like a cold one. The interpreter is used for this run only.
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
  // The script first: the interpreter takes a while to wake up, and its supervision is set up meanwhile, in this same
  // tick, before any of its output or calls can be read.
  writeToChannel(launched.channel, runFrame(code));
  return superviseRun(environment, launched, options, startedAt);
}

/** A one-shot interpreter's one run, supervised with the kill policy; its result; its release. */
async function superviseRun(
  environment: RunEnvironment,
  launched: LaunchedInterpreter,
  options: RunOptions,
  startedAt: number,
): Promise<ExecuteResult> {
  try {
    const { limits } = options;
    const outputPaths = outputPathsOf(environment.outputRoot, launched.runId);
    const supervisor = supervisorFor(launched, environment, limits);
    const events = runEventsFor(options.onEvent, environment);
    const outcome = await supervisor.supervise({
      limits,
      nonce: launched.outputNonce,
      fullOutputPath: outputPaths.stdout,
      artifactsFolder: outputPaths.artifacts,
      stopPolicy: killPolicy(launched),
      signal: options.signal,
      onStart: options.onStart,
      events,
      approveToolCall: options.approveToolCall,
    });
    return await finishResult({
      outcome,
      limits,
      hintContext: environment.hintContext,
      outputPaths,
      startedAt,
      signal: options.signal,
      redactSecrets: environment.redactSecrets,
      events,
      runId: launched.runId,
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
