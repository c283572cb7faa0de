import { spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { randomHex } from '../core/random-bytes.js';
import type { LaunchRequest } from './runner.js';

/**
 * One unprivileged uid per run. When the host is root, every run, pooled interpreter and session gets a uid (and the
 * gid of the same number) of its own from a reserved range, so no other process on the machine — not another run,
 * not a host process running as `nobody` — shares it: none can ptrace the script, open `/proc/<pid>/fd/3` or take its
 * tool channel with `pidfd_getfd`, all of which the kernel allows between processes of one uid.
 *
 * Claims are kept as lock directories in a root-only folder shared by every codecall host of the machine, so
 * concurrent hosts never hand out the same uid. A lock is a directory holding one empty file named after its owner
 * (`<pid>-<start time>`); it is made under a temporary name and renamed into place, which fails while the lock
 * exists and holds its owner file. A lock whose owner died is taken over by renaming that owner file to one's own (only
 * one claimant can), and every process left with the uid is killed before the uid is used again.
 */

/** First uid of the default range: above the ranges the systemd conventions assign (containers end at 1879048191). */
export const DEFAULT_RUN_UID_FIRST = 2_000_000_000;
/** Number of uids in the default range: the most runs, pooled interpreters and sessions alive at once, machine-wide. */
export const DEFAULT_RUN_UID_COUNT = 65_536;
/** Highest uid a range may reach: uid_t is unsigned, but many tools read it as a signed 32-bit number. */
export const MAX_RUN_UID = 2_147_483_646;
/** Environment variable setting the range for the whole process, as `FIRST-LAST` (inclusive). */
export const RUN_UID_RANGE_VARIABLE = 'CODECALL_RUN_UIDS';
/** Where the locks live when the host has `/run` (a tmpfs emptied at boot, like the claims it holds). */
export const DEFAULT_RUN_UID_LOCK_DIRECTORY = '/run/codecall/run-uids';
/** The uids no range may include: root, and the system-wide `nobody` (65534) and `(uint16_t) -1`. */
const RESERVED_UIDS: readonly number[] = [0, 65_534, 65_535];
/** Prefix of a lock being made, before its rename into place. */
const CLAIM_PREFIX = '.claim-';

/** A range of uids: `first` to `first + count - 1`. */
export interface RunUidRange {
  readonly first: number;
  readonly count: number;
}

/** Options of {@link runUidAllocator}. */
export interface RunUidOptions {
  /** The range (default: {@link RUN_UID_RANGE_VARIABLE} when set, else {@link DEFAULT_RUN_UID_FIRST} + 65,536). */
  readonly range?: RunUidRange | undefined;
  /** The lock folder (default {@link DEFAULT_RUN_UID_LOCK_DIRECTORY}, or `<tmpdir>/codecall-0/run-uids` without /run). */
  readonly lockDirectory?: string | undefined;
}

/** A uid held for one run; release it once every process of the run is dead. */
export interface RunUidLease {
  readonly uid: number;
  readonly gid: number;
  /**
   * Gives the uid back. With `killRemaining`, first kills every process still running as the uid (e.g. a daemon a
   * script left behind without a sandbox). When they cannot be killed, the uid stays claimed until this host exits.
   * Safe to call twice.
   */
  release(options?: { readonly killRemaining?: boolean }): Promise<void>;
}

/**
 * Parses `FIRST-LAST` (inclusive), as in {@link RUN_UID_RANGE_VARIABLE}, and checks its bounds (the accounts it may
 * hold are checked by {@link checkRunUidRange}, once, when an allocator is made for it).
 * @throws CodecallError `INVALID_CONFIG` naming the bad text.
 */
export function parseRunUidRange(text: string): RunUidRange {
  const match = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  if (!match) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${RUN_UID_RANGE_VARIABLE} takes a range of uids as FIRST-LAST (e.g. 2000000000-2000065535), got "${text}"`,
      { text },
    );
  }
  const first = Number(match[1]);
  return checkRunUidBounds({ first, count: Number(match[2]) - first + 1 });
}

/**
 * Checks the bounds of a range: whole numbers, at least one uid, above 0 and at most {@link MAX_RUN_UID}, without
 * root or `nobody`.
 * @throws CodecallError `INVALID_CONFIG` naming the range and what is wrong.
 */
export function checkRunUidBounds(range: RunUidRange): RunUidRange {
  const { first, count } = range;
  const last = first + count - 1;
  const describe = `run uid range ${first}–${last}`;
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || count < 1 || first < 1 || last > MAX_RUN_UID) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${describe} is not a range of uids from 1 to ${MAX_RUN_UID} with at least one uid`,
      { first, count },
    );
  }
  const reserved = RESERVED_UIDS.find((uid) => uid >= first && uid <= last);
  if (reserved !== undefined) {
    throw new CodecallError('INVALID_CONFIG', `${describe} includes the reserved uid ${reserved}; choose another`, {
      first,
      count,
    });
  }
  return { first, count };
}

/**
 * Checks a range: its bounds ({@link checkRunUidBounds}), and no account or group of the local `/etc/passwd` and `/etc/group` inside (their processes would share the uid; the
 * check cannot see accounts of a directory service: choose a range nobody uses).
 * @throws CodecallError `INVALID_CONFIG` naming the range and what is wrong.
 */
export function checkRunUidRange(range: RunUidRange): RunUidRange {
  const { first, count } = checkRunUidBounds(range);
  const last = first + count - 1;
  const describe = `run uid range ${first}–${last}`;
  for (const file of ['/etc/passwd', '/etc/group']) {
    const taken = localIds(file).find((entry) => entry.id >= first && entry.id <= last);
    if (taken !== undefined) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `${describe} includes "${taken.name}" (id ${taken.id}) of ${file}; choose a range no account or group uses`,
        { first, count, name: taken.name },
      );
    }
  }
  return { first, count };
}

/** Names and ids of a local account or group file (`name:x:id:...`); empty when it cannot be read. */
function localIds(file: string): { readonly name: string; readonly id: number }[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((line) => line.split(':'))
    .filter((fields) => fields.length >= 3 && /^\d+$/.test(fields[2] ?? ''))
    .map((fields) => ({ name: fields[0] ?? '', id: Number(fields[2]) }));
}

/** The range of this process: {@link RUN_UID_RANGE_VARIABLE} when set, else the default one. */
export function configuredRunUidRange(): RunUidRange {
  const text = process.env[RUN_UID_RANGE_VARIABLE];
  if (text !== undefined && text !== '') return parseRunUidRange(text);
  return { first: DEFAULT_RUN_UID_FIRST, count: DEFAULT_RUN_UID_COUNT };
}

/** The default lock folder: under /run where there is one, else under the temporary directory. */
export function defaultRunUidLockDirectory(): string {
  return existsSync('/run') ? DEFAULT_RUN_UID_LOCK_DIRECTORY : join(tmpdir(), 'codecall-0', 'run-uids');
}

/** Whether runs get uids of their own here: only a root host can start processes as other users. */
export function runUidsAvailable(): boolean {
  return process.getuid?.() === 0;
}

/** One line for `codecall doctor`: which uid scripts run as. */
export function describeRunUids(options: RunUidOptions = {}): string {
  if (!runUidsAvailable()) {
    return `the host's own (uid ${process.getuid?.() ?? 'unknown'}); a uid per run needs a root host`;
  }
  const range = options.range ?? configuredRunUidRange();
  return (
    `one per run, from ${range.first}–${range.first + range.count - 1} (${RUN_UID_RANGE_VARIABLE}), ` +
    `claimed in ${options.lockDirectory ?? defaultRunUidLockDirectory()}`
  );
}

const allocators = new Map<string, RunUidAllocator>();

/**
 * The allocator of a range and lock folder, one per process (runners of one process share it).
 * @throws CodecallError `INVALID_CONFIG` for a bad range, `SANDBOX_UNAVAILABLE` when the host is not root or the
 * lock folder is not a private folder of root's.
 */
export function runUidAllocator(options: RunUidOptions = {}): RunUidAllocator {
  if (!runUidsAvailable()) {
    throw new CodecallError('SANDBOX_UNAVAILABLE', 'a uid per run needs a host running as root', {});
  }
  const range = options.range ?? configuredRunUidRange();
  const lockDirectory = options.lockDirectory ?? defaultRunUidLockDirectory();
  const key = `${range.first}:${range.count}:${lockDirectory}`;
  let allocator = allocators.get(key);
  if (allocator === undefined) {
    // Checked once per process: the check reads the account files, and runs claim uids often.
    allocator = new RunUidAllocator(checkRunUidRange(range), lockDirectory);
    allocators.set(key, allocator);
  }
  return allocator;
}

/** Hands out the uids of one range, machine-wide exclusive through the lock folder. */
export class RunUidAllocator {
  readonly range: RunUidRange;
  readonly lockDirectory: string;
  private readonly held = new Set<number>();
  private readonly owner = ownerName();
  private prepared = false;

  /** Use {@link runUidAllocator}, which checks the range and shares one allocator per process. */
  constructor(range: RunUidRange, lockDirectory: string) {
    this.range = range;
    this.lockDirectory = lockDirectory;
  }

  /** Uids this process holds now. */
  get heldUids(): readonly number[] {
    return [...this.held];
  }

  /**
   * Claims the lowest free uid of the range. A uid whose last holder died (a host killed mid-run) is taken over, and
   * every process still running as it is killed first.
   * @throws CodecallError `SANDBOX_UNAVAILABLE` when every uid of the range is held.
   */
  async claim(): Promise<RunUidLease> {
    this.prepare();
    const claim = join(this.lockDirectory, `${CLAIM_PREFIX}${this.owner}-${randomHex(6)}`);
    mkdirSync(claim, { mode: 0o700 });
    closeSync(openSync(join(claim, this.owner), 'wx', 0o600));
    try {
      for (let offset = 0; offset < this.range.count; offset += 1) {
        const uid = this.range.first + offset;
        if (this.held.has(uid)) continue;
        const lock = this.lockPath(uid);
        try {
          renameSync(claim, lock);
          return this.lease(uid);
        } catch (error) {
          if (!isHeldError(error)) throw error;
        }
        if (await this.takeOverStale(uid)) return this.lease(uid);
      }
    } finally {
      removeClaim(claim, this.owner);
    }
    throw new CodecallError(
      'SANDBOX_UNAVAILABLE',
      `every uid of ${this.range.first}–${this.range.first + this.range.count - 1} is held by a run; ` +
        `wait for runs to end or set a larger range in ${RUN_UID_RANGE_VARIABLE}`,
      { range: this.range },
    );
  }

  private lockPath(uid: number): string {
    return join(this.lockDirectory, String(uid));
  }

  /** Makes the lock folder (root's, 0700) once, and refuses one that anybody else could write. */
  private prepare(): void {
    if (this.prepared) return;
    mkdirSync(this.lockDirectory, { recursive: true, mode: 0o700 });
    const stats = lstatSync(this.lockDirectory);
    if (!stats.isDirectory() || stats.uid !== 0 || (stats.mode & 0o022) !== 0) {
      throw new CodecallError(
        'SANDBOX_UNAVAILABLE',
        `the run uid lock folder ${this.lockDirectory} must be a directory of root's that only root can write; ` +
          'remove it and retry',
        { path: this.lockDirectory },
      );
    }
    this.removeDeadClaims();
    this.prepared = true;
  }

  /** Removes half-made locks (`.claim-*`) of hosts that died while claiming. */
  private removeDeadClaims(): void {
    for (const entry of readdirSync(this.lockDirectory)) {
      if (!entry.startsWith(CLAIM_PREFIX)) continue;
      const owner = /^\.claim-(\d+-\d+)-/.exec(entry)?.[1];
      if (owner !== undefined && !ownerAlive(owner)) {
        rmSync(join(this.lockDirectory, entry), { recursive: true, force: true });
      }
    }
  }

  /**
   * Takes over the lock of `uid` when its holder is dead: renames the dead holder's file to ours (one claimant
   * succeeds, and the lock is never empty meanwhile), then kills what still runs as the uid.
   */
  private async takeOverStale(uid: number): Promise<boolean> {
    const lock = this.lockPath(uid);
    let owners: string[];
    try {
      owners = readdirSync(lock);
    } catch {
      return false;
    }
    if (owners.length === 0 || owners.some((owner) => ownerAlive(owner))) return false;
    const [dead, ...others] = owners as [string, ...string[]];
    try {
      renameSync(join(lock, dead), join(lock, this.owner));
    } catch {
      return false;
    }
    this.held.add(uid);
    for (const other of others) rmSync(join(lock, other), { force: true });
    if (!(await killEveryProcessOf(uid))) {
      // Still held by this process: the lock goes stale when it exits and the next host tries again.
      return false;
    }
    this.held.delete(uid);
    return true;
  }

  private lease(uid: number): RunUidLease {
    this.held.add(uid);
    let released: Promise<void> | undefined;
    return {
      uid,
      gid: uid,
      release: (options = {}) => {
        released ??= (async () => {
          if (options.killRemaining && !(await killEveryProcessOf(uid))) return;
          try {
            unlinkSync(join(this.lockPath(uid), this.owner));
            rmdirSync(this.lockPath(uid));
          } catch {
            // Claimed again between the two steps (the lock was free), or removed by hand: either way not ours.
          }
          this.held.delete(uid);
        })();
        return released;
      },
    };
  }
}

/**
 * Removes a claim folder not renamed into a lock: its one file, then itself; nothing when it became the lock. Not
 * `rmSync`'s recursive walk, whose module a launch would otherwise load for a folder of one file.
 */
function removeClaim(claim: string, owner: string): void {
  for (const remove of [() => unlinkSync(join(claim, owner)), () => rmdirSync(claim)]) {
    try {
      remove();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/** A rename onto a lock that exists and holds its owner file. */
function isHeldError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR';
}

/** Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), or undefined when it is gone. */
function startTime(pid: number | 'self'): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing parenthesis.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** This process as a lock owner: its pid and start time (a later process with the same pid is another owner). */
function ownerName(): string {
  return `${process.pid}-${startTime('self') ?? '0'}`;
}

function ownerAlive(owner: string): boolean {
  const match = /^(\d+)-(\d+)$/.exec(owner);
  if (!match) return false;
  return startTime(Number(match[1])) === match[2];
}

/**
 * Kills every process running as `uid` with SIGKILL: `kill -9 -1` run as that uid signals exactly the processes the
 * uid may signal (its own), atomically with respect to their forks, in every pid namespace. Resolves false when the
 * killer could not run.
 */
export function killEveryProcessOf(uid: number): Promise<boolean> {
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('/bin/sh', ['-c', 'kill -9 -1 2>/dev/null; exit 0'], {
        uid,
        gid: uid,
        env: {},
        cwd: '/',
        stdio: 'ignore',
      });
    } catch {
      resolve(false);
      return;
    }
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/** Depth of the run directory handed to the run's uid (it holds script.py, tmp/, artifacts/). */
const RUN_DIRECTORY_OWNERSHIP_DEPTH = 2;
/** Depth of a workspace copy handed to the run's uid (the script must be able to change all of it). */
const WORKSPACE_COPY_OWNERSHIP_DEPTH = 256;

/**
 * Hands what a run may write to the run's uid before it starts: the run directory (script.py, tmp/, artifacts/) and,
 * in `workspaceMount: "copy"`, the whole throwaway copy of the workspace. Every runner that drops to a run uid calls
 * this one function, so no isolation level forgets a part. Links are never followed.
 */
export function handRunTo(
  request: Pick<LaunchRequest, 'workDir' | 'workspace'>,
  user: { readonly uid: number; readonly gid: number },
): void {
  handDirectoryTo(request.workDir, user, RUN_DIRECTORY_OWNERSHIP_DEPTH);
  if (request.workspace?.copied === true) {
    handDirectoryTo(request.workspace.source, user, WORKSPACE_COPY_OWNERSHIP_DEPTH);
  }
}

/** Gives a run directory (and what the engine put in it, `depth` levels down) to `user`, never following links. */
function handDirectoryTo(directory: string, user: { readonly uid: number; readonly gid: number }, depth: number): void {
  lchownSync(directory, user.uid, user.gid);
  if (depth === 0) return;
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) handDirectoryTo(path, user, depth - 1);
    else lchownSync(path, user.uid, user.gid);
  }
}
