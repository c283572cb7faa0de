/**
 * Sends `signal` to a process (`pid` > 0) or a whole process group (`-pgid`); one that is gone already is not an
 * error. Says whether the signal was sent.
 */
export function signalProcess(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    // ESRCH: gone already.
    return false;
  }
}

/** Whether a process with this pid exists (one of another user, which may not be signalled, counts). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
