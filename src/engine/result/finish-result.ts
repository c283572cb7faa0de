import { join } from 'node:path';
import { CodecallAbortError } from '../../core/errors.js';
import type { Limits } from '../../core/limits.js';
import type { ExecuteResult } from '../../core/result.js';
import type { RunEvents } from '../supervise/run-events.js';
import type { ReceivedArtifacts } from './artifact-sink.js';
import type { HintContext } from './failure-hints.js';
import { buildResult, type ProcessOutcome } from './run-result.js';
import { recordRunSpans } from './run-spans.js';

/** Where a run's or a cell's saved outputs go below the output root: `<name>-stdout.txt` and the folder `<name>/`. */
export interface OutputPaths {
  /** The complete stdout, once it outgrew what the result keeps. */
  readonly stdout: string;
  /** The artifacts' folder. */
  readonly artifacts: string;
}

/** The saved outputs of the run or cell named `name` (a run id, or a run id and a cell number). */
export function outputPathsOf(outputRoot: string, name: string): OutputPaths {
  return { stdout: join(outputRoot, `${name}-stdout.txt`), artifacts: join(outputRoot, name) };
}

/** Options of {@link finishResult}. */
export interface FinishResultOptions {
  /** The supervised outcome, with the artifacts the script sent over the channel. */
  readonly outcome: ProcessOutcome & { readonly artifacts: ReceivedArtifacts };
  readonly limits: Limits;
  readonly hintContext: Omit<HintContext, 'limits'>;
  readonly outputPaths: OutputPaths;
  /** `performance.now()` when the call started. */
  readonly startedAt: number;
  /** The caller's signal: a run or cell stopped because it fired rejects instead of resolving. */
  readonly signal?: AbortSignal | undefined;
  /** Sessions: the interpreter was replaced (variables of earlier cells are gone). */
  readonly stateLost?: boolean | undefined;
  /** Mask secret-shaped tokens in what the result carries (the `redactSecrets` option; default true). */
  readonly redactSecrets?: boolean | undefined;
  /** The run's live events: its artifacts and its end go there. */
  readonly events?: RunEvents | undefined;
  /** Names the run in its OpenTelemetry span (and the cell, in a session). */
  readonly runId: string;
  readonly cell?: number | undefined;
}

/**
/**
 * The result of a supervised run or cell, built from its outcome (the artifacts it sent are already on the host).
 * Run and cell alike reject with an AbortError when their signal stopped them; the error carries the result (status
 * `aborted`, what was printed up to the abort).
 */
export async function finishResult(options: FinishResultOptions): Promise<ExecuteResult> {
  const result = buildResult({
    outcome: options.outcome,
    limits: options.limits,
    hintContext: options.hintContext,
    artifacts: options.outcome.artifacts.artifacts,
    artifactsNote: options.outcome.artifacts.note,
    durationMs: performance.now() - options.startedAt,
    stateLost: options.stateLost,
    redactSecrets: options.redactSecrets,
  });
  await recordRunSpans({
    result,
    runId: options.runId,
    cell: options.cell,
    startedAt: options.outcome.traceOrigin ?? options.startedAt,
    endedAt: performance.now(),
  });
  options.events?.end(result);
  if (options.outcome.reason === 'aborted' && options.signal?.aborted) {
    throw new CodecallAbortError(options.signal.reason, result);
  }
  return result;
}
