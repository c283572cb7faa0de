import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Without a sandbox nothing ties a run's processes to the host: a SIGKILLed host would leave them running, reparented
 * to pid 1. As root every run has a uid of its own (see `run-uids.ts`), so one small root process per host can end
 * them all: the watchdog, a Python process of the standard library started once, outside the host's process group.
 * The host tells it, before each spawn, which uids its runs hold. When the host dies its end of the pipe closes, and
 * the watchdog kills every process of every uid still held (daemons and children included, which a parent-death
 * signal would miss), then exits. It also does the kill at the end of each run, so the host need not fork for it.
 */

/**
 * The watchdog: reads `hold UID`, `kill UID ID` (kill, keep holding), `release UID ID` (kill, stop holding) and
 * `forget UID ID` (stop holding, nothing of it is left) lines; answers `released ID STATUS`; kills all held at EOF.
 */
const WATCHDOG_SCRIPT = `
import os
held = set()
def kill_all_of(uid):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, 9)
        except ProcessLookupError:
            pass
        except BaseException:
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0
pending = b""
while True:
    try:
        chunk = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        chunk = b""
    if not chunk:
        break
    pending += chunk
    while b"\\n" in pending:
        line, _, pending = pending.partition(b"\\n")
        words = line.split()
        if len(words) == 2 and words[0] == b"hold":
            held.add(int(words[1]))
        elif len(words) == 3 and words[0] in (b"release", b"kill", b"forget"):
            uid = int(words[1])
            done = words[0] == b"forget" or kill_all_of(uid)
            if words[0] != b"kill":
                held.discard(uid)
            os.write(1, b"released %s %d\\n" % (words[2], 0 if done else 1))
for uid in held:
    kill_all_of(uid)
`;

/** The host side of the watchdog of this process. */
export class HostWatchdog {
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, (killed: boolean) => void>();
  private nextId = 1;
  private alive = true;

  /** Starts a watchdog with the given Python interpreter (run as this process's user, root). */
  constructor(pythonExecutable: string) {
    this.child = spawn(pythonExecutable, ['-S', '-I', '-c', WATCHDOG_SCRIPT], {
      stdio: ['pipe', 'pipe', 'ignore'],
      // Out of the host's process group: a signal to the host's group must not take the watchdog first.
      detached: true,
      env: {},
      cwd: '/',
    });
    const gone = () => {
      this.alive = false;
      for (const resolve of this.waiting.values()) resolve(false);
      this.waiting.clear();
    };
    this.child.once('error', gone);
    this.child.once('exit', gone);
    this.child.stdin?.on('error', gone);
    let pending = '';
    this.child.stdout?.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
        const match = /^released (\d+) ([01])$/.exec(pending.slice(0, end));
        pending = pending.slice(end + 1);
        if (match === null) continue;
        const id = Number(match[1]);
        this.waiting.get(id)?.(match[2] === '0');
        this.waiting.delete(id);
      }
    });
    // The host may exit with the watchdog still running: it is what ends the runs then.
    this.child.unref();
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    (this.child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
  }

  /** Whether the watchdog runs and takes orders. */
  get running(): boolean {
    return this.alive;
  }

  /**
   * Tells the watchdog that a run of this host holds `uid`; the write reaches the pipe before this returns (libuv
   * writes at once to an idle pipe), so a host killed right after still has the uid's processes killed.
   */
  hold(uid: number): void {
    this.child.stdin?.write(`hold ${uid}\n`);
  }

  /** Kills every process of `uid` and forgets it; resolves false when that could not be done. */
  release(uid: number): Promise<boolean> {
    return this.#order('release', uid);
  }

  /** Forgets `uid` without a kill (everything of it was killed already); resolves false when not told. */
  forget(uid: number): Promise<boolean> {
    return this.#order('forget', uid);
  }

  /** Kills every process of `uid` and keeps watching it (the run still holds it); false when that could not be done. */
  kill(uid: number): Promise<boolean> {
    return this.#order('kill', uid);
  }

  #order(command: 'release' | 'kill' | 'forget', uid: number): Promise<boolean> {
    if (!this.alive) return Promise.resolve(false);
    const id = this.nextId;
    this.nextId += 1;
    // Waiting for an answer keeps the host alive (a `close()` awaits it); an idle watchdog does not.
    (this.child.stdout as unknown as { ref?: () => void } | null)?.ref?.();
    return new Promise<boolean>((resolve) => {
      this.waiting.set(id, resolve);
      this.child.stdin?.write(`${command} ${uid} ${id}\n`);
    }).finally(() => {
      if (this.waiting.size === 0) (this.child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    });
  }
}

let watchdog: HostWatchdog | undefined;
/** Uids runs of this host hold now, told again to a watchdog started after the previous one died. */
const heldUids = new Set<number>();

/** The watchdog of this process, started on first use, and again (told every held uid) if it died. */
function currentWatchdog(pythonExecutable: string): HostWatchdog {
  if (watchdog === undefined || !watchdog.running) {
    watchdog = new HostWatchdog(pythonExecutable);
    for (const uid of heldUids) watchdog.hold(uid);
  }
  return watchdog;
}

/** Has the watchdog of this process kill everything of `uid` if the host dies; call before anything runs as it. */
export function holdRunUid(pythonExecutable: string, uid: number): void {
  heldUids.add(uid);
  currentWatchdog(pythonExecutable).hold(uid);
}

/**
 * Kills every process of `uid` through the watchdog and stops watching it; resolves false when the watchdog could not
 * do it (the caller kills another way).
 */
export async function releaseRunUid(pythonExecutable: string, uid: number): Promise<boolean> {
  heldUids.delete(uid);
  return currentWatchdog(pythonExecutable).release(uid);
}

/**
 * Stops watching `uid` without killing (its processes were all killed since the last one could start); resolves false
 * when the watchdog could not be told (the caller kills another way, as after a failed release).
 */
export async function forgetRunUid(pythonExecutable: string, uid: number): Promise<boolean> {
  heldUids.delete(uid);
  return currentWatchdog(pythonExecutable).forget(uid);
}

/**
 * Kills every process of `uid` through the watchdog while the run still holds it (a daemon the script left, before
 * the host deletes the run's directory); resolves false when the watchdog could not do it (the caller kills another
 * way).
 */
export async function killRunUidProcesses(pythonExecutable: string, uid: number): Promise<boolean> {
  return currentWatchdog(pythonExecutable).kill(uid);
}
