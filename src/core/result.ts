import type { IsolationLevel, LimitReason } from './isolation.js';

/**
 * Why a run sent to a worker fleet ended without the worker's result: `worker_lost` (the worker died or was cut off
 * mid-run), `queue_unavailable` (Redis could not be reached long enough to learn how the run ended).
 */
export type RemoteFailureReason = 'worker_lost' | 'queue_unavailable';

/** How a run ended. */
export type ExecuteStatus = 'success' | 'error' | 'timeout' | 'aborted' | 'limit';

/** The script's uncaught exception (or what ended it). */
export interface ScriptError {
  /** Python exception type (`KeyError`, `ToolError`...), or `Timeout`, `Killed`, `Exit` for ends without one. */
  readonly type: string;
  readonly message: string;
  /** Python traceback of the script's own frames. */
  readonly traceback?: string | undefined;
}

/**
 * A file the script sent (`save_artifact`, its artifacts folder, a chart) or a tool returned, written by the host into
 * a folder of its own: `path` is on the host.
 */
export interface Artifact {
  readonly path: string;
  readonly mimeType: string;
  readonly bytes: number;
}

/** Set when stdout outgrew `maxStdoutBytes`: what was kept and where the whole of it is. */
export interface StdoutTruncation {
  readonly keptBytes: number;
  readonly totalBytes: number;
  /** The complete stdout (capped at `maxOutputBytes`), on this host. */
  readonly fullOutputPath?: string | undefined;
  /**
   * Remote runs: why the full output saved on the worker is not at `fullOutputPath` here (over the bound of what a
   * run sends home, unreadable, or its message lost). Absent when it is, or when none was saved.
   */
  readonly fullOutputNote?: string | undefined;
}

/** How a traced tool call ended: `cut_off` when the run or cell ended under it. */
export type TraceCallStatus = 'ok' | 'error' | 'denied' | 'timeout' | 'cut_off';

/** One tool call in a run's {@link RunTrace}. */
export interface TracedCall {
  /** The script's id of the call. */
  readonly id: number;
  readonly tool: string;
  /** Start and end, in ms from the start of the run (of the cell, in a session). */
  readonly startMs: number;
  readonly endMs: number;
  readonly status: TraceCallStatus;
  /** UTF-8 bytes of the result sent back (0 when it failed). */
  readonly bytes: number;
  /** The error message the script got, when it failed (it may quote values the script sent). */
  readonly error?: string | undefined;
}

/** The compact timeline of a run's tool calls, in the order they ended (at most 1000; the rest counted). */
export interface RunTrace {
  readonly calls: readonly TracedCall[];
  /** Calls past the first 1000, not listed. */
  readonly droppedCalls?: number | undefined;
}

/** Result of one `execute`. Failures of the script are values here; only host misconfiguration throws. */
export interface ExecuteResult {
  readonly status: ExecuteStatus;
  /** What the script printed, sanitised for the model (escape sequences removed), head and tail when truncated. */
  readonly stdout: string;
  /** What the script wrote to stderr, sanitised and capped. */
  readonly stderr: string;
  /** Exit status of the interpreter, or null when it was killed by a signal. */
  readonly exitCode: number | null;
  /** The signal that ended the interpreter, if any. */
  readonly signal?: string | undefined;
  readonly error?: ScriptError | undefined;
  /** One actionable sentence for the model when the failure is a common mistake. */
  readonly hint?: string | undefined;
  /** Tool calls the script made. */
  readonly toolCalls: number;
  /** Of those, the calls approval denied (the tool's `needsApproval` and the `approveToolCall` hook); absent when none. */
  readonly deniedToolCalls?: number | undefined;
  readonly durationMs: number;
  readonly stdoutTruncated?: StdoutTruncation | undefined;
  /** Isolation the run actually had. */
  readonly isolation: IsolationLevel;
  /**
   * Set when the run had less isolation than was asked for: `sandbox: "auto"` found bubblewrap unusable and ran the
   * script without a sandbox. Says why and what the script could reach.
   */
  readonly isolationWarning?: string | undefined;
  /** Which limit stopped the run, from codecall's own bookkeeping; or, for a remote run, why it was lost. */
  readonly reason?: LimitReason | RemoteFailureReason | undefined;
  /** Remote runs: the id of the worker that ran it (the last one, when a run was retried). */
  readonly worker?: string | undefined;
  readonly artifacts?: readonly Artifact[] | undefined;
  /** Set when artifacts the script sent were dropped (bad name, count or size limit, incomplete): says which. */
  readonly artifactsNote?: string | undefined;
  /** Sessions only: the interpreter was replaced and the variables of earlier cells are gone. */
  readonly stateLost?: boolean | undefined;
  /** Timeline of the tool calls (start and end offsets, tool, status, bytes); absent when no call started. */
  readonly trace?: RunTrace | undefined;
}
