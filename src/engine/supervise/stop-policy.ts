import type { LimitReason } from '../../core/isolation.js';
import type { LaunchedInterpreter } from '../launch/interpreter-launch.js';

/** Time between SIGTERM and SIGKILL when a run is stopped. */
export const KILL_GRACE_MS = 200;
/** Time a cell has to end after its KeyboardInterrupt (timeout, abort, limit) before the interpreter is killed. */
export const CELL_INTERRUPT_GRACE_MS = 500;

/**
 * How the supervisor stops what it supervises before it ends by itself (timeout, output flood, tool-call abuse,
 * abort, close): the one thing that differs between a one-shot run and a session's cell.
 */
export interface StopPolicy {
  /**
   * Starts stopping, for `reason` (the supervisor calls it once, with the first reason). Returns a function that
   * cancels the steps still pending, which the supervisor calls once the run or cell has ended.
   */
  stop(reason: LimitReason): () => void;
}

/** What the stop policies act on. */
export type StoppableProcess = Pick<LaunchedInterpreter, 'signal' | 'killAll' | 'stdin'>;

/** A one-shot run: SIGTERM to the process group, SIGKILL to everything of the run {@link KILL_GRACE_MS} later. */
export function killPolicy(process: StoppableProcess): StopPolicy {
  return {
    stop() {
      process.signal('SIGTERM');
      const timer = setTimeout(() => void process.killAll(), KILL_GRACE_MS);
      return () => clearTimeout(timer);
    },
  };
}

/**
 * A session's cell: a KeyboardInterrupt first (the cell's id on the interrupt pipe), so the interpreter and its state
 * survive; the {@link killPolicy} when the cell has not ended {@link CELL_INTERRUPT_GRACE_MS} later.
 */
export function interruptThenKillPolicy(process: StoppableProcess, cellId: number): StopPolicy {
  const kill = killPolicy(process);
  return {
    stop(reason) {
      process.stdin?.write(`${cellId}\n`);
      let cancelKill: (() => void) | undefined;
      const timer = setTimeout(() => {
        cancelKill = kill.stop(reason);
      }, CELL_INTERRUPT_GRACE_MS);
      return () => {
        clearTimeout(timer);
        cancelKill?.();
      };
    },
  };
}
