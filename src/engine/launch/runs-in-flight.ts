/**
 * Cold and pooled runs of this process, every codecall's together, from `execute` to its result: the cleanup of a run
 * that has ended keeps the host's thread free while another run is in flight, and the warm pool starts replacements
 * only once no run has started or ended for a while (see WarmPool).
 */
let runsInFlight = 0;
/** When a run last started or ended (`performance.now()`). */
let lastRunEvent = 0;

/** Counts a run as in flight until the returned function is called (once; later calls do nothing). */
export function countRunInFlight(): () => void {
  runsInFlight += 1;
  lastRunEvent = performance.now();
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    runsInFlight -= 1;
    lastRunEvent = performance.now();
  };
}

/** Whether a run of this process is in flight. */
export function isRunInFlight(): boolean {
  return runsInFlight > 0;
}

/** When a run of this process last started or ended (`performance.now()`; 0 before the first). */
export function lastRunEventAt(): number {
  return lastRunEvent;
}
