/** Isolation a run actually had. */
export type IsolationLevel = 'none' | 'bubblewrap';

/** Isolation asked for: `auto` uses bubblewrap when it is usable here, else `none`. */
export type SandboxMode = 'auto' | IsolationLevel;

/** Why a run was stopped by a limit, from the engine's own bookkeeping. */
export type LimitReason = 'timeout' | 'cpu' | 'memory' | 'pids' | 'output' | 'tool_calls' | 'aborted';
