/**
 * Cold and pooled runs of this process whose script is being supervised now, every codecall's together: the cleanup
 * of a run that has ended keeps the host's thread free while another run is in flight.
 */
let supervisedRuns = 0;

/** Counts a run as in flight until the returned function is called (once; later calls do nothing). */
export function countRunInFlight(): () => void {
  supervisedRuns += 1;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    supervisedRuns -= 1;
  };
}

/** Whether a run of this process is in flight. */
export function isRunInFlight(): boolean {
  return supervisedRuns > 0;
}
