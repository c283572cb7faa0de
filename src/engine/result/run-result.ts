import type { LimitReason } from '../../core/isolation.js';
import type { Limits } from '../../core/limits.js';
import type { ExecuteResult, ExecuteStatus, ScriptError } from '../../core/result.js';
import { cleanScriptError, cleanScriptText } from '../../core/script-text.js';
import { decodeUtf8 } from '../../core/text-sanitizer.js';
import { omissionNotice, utf8PrefixEnd, utf8SuffixStart } from '../../core/text-truncation.js';
import { formatSeconds } from '../../core/wording.js';
import type { ScriptExceptionReport } from '../../rpc/protocol.js';
import type { CapturedOutput } from '../supervise/output-capture.js';
import { failureHint, type HintContext } from './failure-hints.js';

/** What a finished run (or session cell) left for its result: exit, captured output, tool calls, limit reason. */
export interface ProcessOutcome {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly reason?: LimitReason | undefined;
  readonly stdout: CapturedOutput;
  readonly stderr: CapturedOutput;
  readonly exception?: ScriptExceptionReport | undefined;
  readonly toolCalls: number;
  /** Of those, the calls approval denied. */
  readonly deniedToolCalls?: number | undefined;
  /** Timeline of the tool calls. */
  readonly trace?: ExecuteResult['trace'];
  /** `performance.now()` when the supervision started: the origin of the trace's offsets. */
  readonly traceOrigin?: number | undefined;
  readonly toolCallLimitReached: boolean;
  readonly isolation: ExecuteResult['isolation'];
  readonly isolationWarning?: string | undefined;
}

/** Options of {@link buildResult}. */
export interface BuildResultOptions {
  readonly outcome: ProcessOutcome;
  readonly limits: Limits;
  readonly hintContext: Omit<HintContext, 'limits'>;
  readonly artifacts: ExecuteResult['artifacts'];
  /** What was dropped of the artifacts the script sent, if anything. */
  readonly artifactsNote?: string | undefined;
  readonly durationMs: number;
  /** Sessions: the interpreter was replaced (variables of earlier cells are gone). */
  readonly stateLost?: boolean | undefined;
  /** Mask secret-shaped tokens in stdout, stderr and the error (default true). */
  readonly redactSecrets?: boolean | undefined;
}

/** Decodes, sanitises and (when asked) redacts a capture; a truncated one gets `notice` between its head and tail. */
function renderCapture(
  capture: CapturedOutput,
  redactSecrets: boolean,
  notice: (head: number, tail: number) => string,
): string {
  // Most cells print nothing on one stream or both: no buffers to join, no text to clean.
  if (capture.totalBytes === 0) return '';
  if (!capture.truncated) {
    return cleanScriptText(decodeUtf8(Buffer.concat([capture.head, capture.tail])), { redactSecrets });
  }
  const head = capture.head.subarray(0, utf8PrefixEnd(capture.head));
  const tail = capture.tail.subarray(utf8SuffixStart(capture.tail));
  return (
    cleanScriptText(decodeUtf8(head), { redactSecrets, cutAfter: true }) +
    notice(head.length, tail.length) +
    cleanScriptText(decodeUtf8(tail), { redactSecrets, cutBefore: true })
  );
}

/** Whether the saved stdout file holds all the script printed or only its start (it stopped at `maxOutputBytes`). */
export type FullOutputExtent = 'complete' | 'first part of the';

/**
 * The clause of a truncated stdout's omission notice that names where the full output is. A remote run's agent
 * rewrites it once the file is on its own disk (or was not sent home), so its form lives here only.
 */
export function fullOutputClause(extent: FullOutputExtent, where: string): string {
  return `; the ${extent} output ${where}`;
}

function renderStdout(capture: CapturedOutput, redactSecrets: boolean): string {
  const where = capture.fullOutputPath
    ? fullOutputClause(capture.fullOutputComplete ? 'complete' : 'first part of the', `is in ${capture.fullOutputPath}`)
    : '';
  return renderCapture(capture, redactSecrets, (headBytes, tailBytes) =>
    omissionNotice({ headBytes, tailBytes, totalBytes: capture.totalBytes, where }),
  );
}

function renderStderr(capture: CapturedOutput, redactSecrets: boolean): string {
  return renderCapture(
    capture,
    redactSecrets,
    (headBytes, tailBytes) => `\n[… ${capture.totalBytes - headBytes - tailBytes} bytes of stderr omitted …]\n`,
  );
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
      return {
        type: 'CpuLimit',
        message: `the script used more than ${formatSeconds(limits.cpuSeconds * 1000)} of CPU time`,
      };
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

/** Turns an outcome into the result the caller and the model see: status, sanitised output, error, hint. */
export function buildResult(options: BuildResultOptions): ExecuteResult {
  const { outcome, limits, artifacts, durationMs } = options;
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
  const redactSecrets = options.redactSecrets ?? true;
  const stderr = renderStderr(outcome.stderr, redactSecrets);
  const rawError = status === 'success' ? undefined : scriptError(outcome, limits, stderr);
  // The exception's type, message and traceback come from the script (a forged `$exception` frame included).
  const error =
    rawError === undefined ? undefined : cleanScriptError(rawError, { maxBytes: limits.maxErrorBytes, redactSecrets });
  const base = {
    status,
    stdout: renderStdout(outcome.stdout, redactSecrets),
    stderr,
    exitCode: outcome.exitCode,
    ...(outcome.signal !== null ? { signal: outcome.signal } : {}),
    ...(error !== undefined ? { error } : {}),
    toolCalls: outcome.toolCalls,
    ...(outcome.deniedToolCalls ? { deniedToolCalls: outcome.deniedToolCalls } : {}),
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
    ...(outcome.isolationWarning !== undefined ? { isolationWarning: outcome.isolationWarning } : {}),
    ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}),
    ...(artifacts !== undefined && artifacts.length > 0 ? { artifacts } : {}),
    ...(options.artifactsNote !== undefined ? { artifactsNote: options.artifactsNote } : {}),
    ...(options.stateLost ? { stateLost: true } : {}),
    ...(outcome.trace !== undefined ? { trace: outcome.trace } : {}),
  };
  const hint = status === 'success' ? undefined : failureHint(base, { ...options.hintContext, limits });
  return hint === undefined ? base : { ...base, hint };
}
