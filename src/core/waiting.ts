/**
 * Waiting on the event loop, as `node:timers/promises` does it, without that module: a one-shot `codecall run`
 * would load it (and its own dependencies) before its launch only to wait later, if at all.
 */

/** Resolves on the event loop's next turn, after the I/O callbacks due (as `setImmediate` of `node:timers/promises`). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Resolves after `milliseconds` (as `setTimeout` of `node:timers/promises`). */
export function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
