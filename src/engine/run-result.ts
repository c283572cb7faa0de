import type { LimitReason } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import type { ExecuteResult, ExecuteStatus, ScriptError } from '../core/result.js';
import type { ScriptExceptionReport } from '../rpc/protocol.js';
import { failureHint, formatSeconds, type HintContext } from './failure-hints.js';
import { decodeUtf8, sanitizeForModel } from './model-text.js';
import { type CapturedOutput, utf8PrefixEnd, utf8SuffixStart } from './output-capture.js';

/** What a finished run (or session cell) left for its result: exit, captured output, tool calls, limit reason. */
export interface ProcessOutcome {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly reason?: LimitReason | undefined;
  readonly stdout: CapturedOutput;
  readonly stderr: CapturedOutput;
  readonly exception?: ScriptExceptionReport | undefined;
  readonly toolCalls: number;
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
  readonly durationMs: number;
  /** Sessions: the interpreter was replaced (variables of earlier cells are gone). */
  readonly stateLost?: boolean | undefined;
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
    ...(outcome.isolationWarning !== undefined ? { isolationWarning: outcome.isolationWarning } : {}),
    ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}),
    ...(artifacts !== undefined && artifacts.length > 0 ? { artifacts } : {}),
    ...(options.stateLost ? { stateLost: true } : {}),
  };
  const hint = status === 'success' ? undefined : failureHint(base, { ...options.hintContext, limits });
  return hint === undefined ? base : { ...base, hint };
}
