import type { ExecuteResult } from './result.js';

/** Stable machine-readable codes of every error codecall throws. */
export type CodecallErrorCode =
  | 'INVALID_CONFIG'
  | 'INVALID_TOOL'
  | 'DUPLICATE_TOOL'
  | 'INTERPRETER_NOT_FOUND'
  | 'SANDBOX_UNAVAILABLE'
  | 'CLOSED'
  | 'ABORTED'
  | 'SPAWN_FAILED'
  | 'MCP_SERVER_FAILED'
  | 'REMOTE_UNAVAILABLE'
  | 'DUPLICATE_RUN';

/**
 * The one base class of errors codecall throws for host-side problems (bad configuration, missing interpreter,
 * unavailable sandbox). Failures of the script itself are never thrown: they are values in the result.
 */
export class CodecallError extends Error {
  /** Stable code to branch on; the message is for people. */
  readonly code: CodecallErrorCode;
  /** Structured facts about the failure (the bad value, the path, the cause). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: CodecallErrorCode, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CodecallError';
    this.code = code;
    this.details = details;
  }
}

/** Thrown by `execute` when its `AbortSignal` fires; the run was killed and cleaned up. */
export class CodecallAbortError extends CodecallError {
  /**
   * The aborted run's result (status `aborted`, with what it printed, its tool calls and artifacts up to the abort),
   * when the run had started; absent when the signal had fired before it did.
   */
  readonly result: ExecuteResult | undefined;

  constructor(reason?: unknown, result?: ExecuteResult) {
    super('ABORTED', 'the run was aborted by its AbortSignal', { reason }, { cause: reason });
    this.name = 'AbortError';
    this.result = result;
  }
}

/** The message of a thrown value: an Error's `message`, anything else as text. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
