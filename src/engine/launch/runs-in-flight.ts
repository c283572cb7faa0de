/**
 * Cold and pooled runs of this process, every codecall's together, from `execute` to its result: the cleanup of a run
 * that has ended keeps the host's thread free while another run is in flight, and the warm pool starts replacements
 * only once no run has started or ended for a while (see WarmPool).
 */
let runsInFlight = 0;
/** When a run last started or ended (see {@link nowMilliseconds}). */
let lastRunEvent = 0;

// A monotonic clock read without `performance`, whose first use loads perf_hooks: a one-shot run counts itself
// before its launch, which loads nothing it does not need (see test/cli/lean-start.test.ts).
function nowMilliseconds(): number {
  const [seconds, nanoseconds] = process.hrtime();
  return seconds * 1_000 + nanoseconds / 1_000_000;
}

/** Counts a run as in flight until the returned function is called (once; later calls do nothing). */
export function countRunInFlight(): () => void {
  runsInFlight += 1;
  lastRunEvent = nowMilliseconds();
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    runsInFlight -= 1;
    lastRunEvent = nowMilliseconds();
  };
}

/** Whether a run of this process is in flight. */
export function isRunInFlight(): boolean {
  return runsInFlight > 0;
}

/** Milliseconds since a run of this process last started or ended (since the clock's origin before the first). */
export function millisecondsSinceRunEvent(): number {
  return nowMilliseconds() - lastRunEvent;
}
