import { signalProcess } from '../../core/processes.js';

/** Process groups of live runs, killed synchronously if the host process exits while they run. */
const liveProcessGroups = new Set<number>();
let exitHandlerInstalled = false;

function killLiveGroups(): void {
  for (const processGroup of liveProcessGroups) signalProcessGroup(processGroup, 'SIGKILL');
  liveProcessGroups.clear();
}

/** Sends a signal to a whole process group; a group that is already gone is not an error. */
export function signalProcessGroup(processGroup: number, signal: NodeJS.Signals): void {
  signalProcess(-processGroup, signal);
}

/** Tracks a run's process group until {@link forgetProcessGroup}; all are killed when the host exits. */
export function trackProcessGroup(processGroup: number): void {
  if (!exitHandlerInstalled) {
    exitHandlerInstalled = true;
    process.once('exit', killLiveGroups);
  }
  liveProcessGroups.add(processGroup);
}

/** Stops tracking a finished run's process group. */
export function forgetProcessGroup(processGroup: number): void {
  liveProcessGroups.delete(processGroup);
}
