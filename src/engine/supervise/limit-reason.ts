import { constants } from 'node:os';
import type { IsolationLevel, LimitReason } from '../../core/isolation.js';
import type { ScriptExceptionReport } from '../../rpc/protocol.js';

/** What tells which limit, if any, ended a run or a cell; see {@link limitReasonOf}. */
export interface LimitEvidence {
  /** Why the supervisor stopped it (the first reason), if it did. */
  readonly stoppedFor: LimitReason | undefined;
  /** What the runner's containment (e.g. cgroup counters) says, read once the process ended with a failure. */
  readonly containment: LimitReason | undefined;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The script's uncaught exception, as the boot reported it. */
  readonly exception: ScriptExceptionReport | undefined;
  readonly toolCallLimitReached: boolean;
}

/**
 * The limit that ended a run or a cell, first match wins: the supervisor's own stop (timeout, output, tool calls,
 * abort), the containment's verdict, SIGXCPU (`cpu`), then, for a failed exit only, a MemoryError (`memory`) and a
 * reached tool-call limit (`tool_calls`). Undefined when no limit did.
 */
export function limitReasonOf(evidence: LimitEvidence): LimitReason | undefined {
  if (evidence.stoppedFor !== undefined) return evidence.stoppedFor;
  if (evidence.containment !== undefined) return evidence.containment;
  if (evidence.signal === 'SIGXCPU') return 'cpu';
  if (evidence.exitCode === 0) return undefined;
  if (evidence.exception?.type === 'MemoryError') return 'memory';
  if (evidence.toolCallLimitReached) return 'tool_calls';
  return undefined;
}

/** How a process ended, as exit code and signal. */
export interface ExitStatus {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
}

/**
 * The exit status of an interpreter that ended without reporting it itself: bwrap reports a child killed by signal N
 * as exit status 128 + N, read back here as that signal (the boot's own `$done` never carries such a status).
 */
export function exitStatusOf(status: ExitStatus, isolation: IsolationLevel): ExitStatus {
  if (isolation !== 'bubblewrap' || status.signal !== null || status.exitCode === null) return status;
  const signal = signalNameOf(status.exitCode - 128);
  return signal === undefined ? status : { exitCode: null, signal };
}

/** The name of signal `number` (e.g. 9 → `SIGKILL`), or undefined when it is not a signal number. */
function signalNameOf(number: number): NodeJS.Signals | undefined {
  if (number <= 0) return undefined;
  for (const [name, value] of Object.entries(constants.signals)) {
    if (value === number) return name as NodeJS.Signals;
  }
  return undefined;
}
