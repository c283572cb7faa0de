import { lstatSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { filePromises } from '../core/file-promises.js';
import { fingerprint } from '../core/fingerprint.js';
import { hostCacheDirectory, readHostCache, trimHostCacheEntries, writeHostCache } from '../core/host-cache.js';
import { isProcessAlive } from '../core/processes.js';
import { randomHex } from '../core/random-bytes.js';
import { defaultStateRoot } from '../core/state-folders.js';

/**
 * A stage directory (see staging-namespace.ts) goes when the process that made it exits; a process killed outright
 * leaves it behind: its empty mount points and its 0600 mount table. Removing another process's stage while it
 * lives would break its held mount namespace (an rmdir of a mount point in another namespace detaches the mounts
 * there), and its pid alone proves nothing across pid namespaces (another container sharing the folder has its own
 * pids). So a stage is named after its maker's pid and pid namespace, and one is removed only when it comes from this
 * process's pid namespace and its maker is gone.
 */

/** Prefix of every stage directory's name. */
export const STAGE_PREFIX = 'stage-';
/**
 * Least age of a stage named the older way (pid and nonce, no pid namespace) before it may be removed when its pid is
 * not alive here: it may come from another pid namespace, where that pid can still live, but not for a day.
 */
export const UNNAMESPACED_STAGE_MIN_AGE_MS = 24 * 60 * 60 * 1000;

/** `stage-<pid>-<pid namespace>-<nonce>`. */
const STAGE_NAME = /^stage-(\d+)-(\d+)-[0-9a-f]+$/;
/** `stage-<pid>-<nonce>`, as stages were named before the pid namespace was part of the name. */
const UNNAMESPACED_STAGE_NAME = /^stage-(\d+)-[0-9a-f]{8}$/;

let ownPidNamespace: string | null | undefined;

/** The inode number of this process's pid namespace (`/proc/self/ns/pid`), or null when it cannot be read. */
export function pidNamespaceOf(link = '/proc/self/ns/pid'): string | null {
  try {
    return /^pid:\[(\d+)\]$/.exec(readlinkSync(link))?.[1] ?? null;
  } catch {
    return null;
  }
}

function ownNamespace(): string | null {
  if (ownPidNamespace === undefined) ownPidNamespace = pidNamespaceOf();
  return ownPidNamespace;
}

/** A new stage directory's name: this process's pid and pid namespace (0 when unknown) and a random nonce. */
export function stageDirectoryName(): string {
  return `${STAGE_PREFIX}${process.pid}-${ownNamespace() ?? '0'}-${randomHex(4)}`;
}

/**
 * Whether the entry `name` of a files directory is a stage left by a process that is gone (see the module's note);
 * `modifiedAt` (ms) is asked only for a stage named the older way.
 */
export function isLeftoverStage(
  name: string,
  modifiedAt: () => number,
  now: number,
  namespace: string | null,
): boolean {
  const named = STAGE_NAME.exec(name);
  if (named !== null) {
    return namespace !== null && named[2] === namespace && !isProcessAlive(Number(named[1]));
  }
  const unnamespaced = UNNAMESPACED_STAGE_NAME.exec(name);
  if (unnamespaced === null) return false;
  return now - modifiedAt() >= UNNAMESPACED_STAGE_MIN_AGE_MS && !isProcessAlive(Number(unnamespaced[1]));
}

/**
 * Least time between two sweeps of one files directory by the processes sharing a host cache folder: stages are left
 * only by processes killed outright, so an hour's delay costs a few empty folders, while a sweep in every process
 * costs a one-shot `codecall run` a few milliseconds (a directory listing and a check of every stage in it).
 */
export const LEFTOVER_SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** Prefix of the host cache entry that records when a files directory was last swept (one entry per directory). */
export const LEFTOVER_SWEEP_STAMP = 'stage-sweep';
/** Stamp entries kept in a host cache folder (files directories swept from it); the least recently written go. */
export const MAX_SWEEP_STAMPS = 16;

/**
 * Removes the stage directories in `filesDirectory` that processes killed before their exit left behind (see
 * {@link isLeftoverStage}), one at a time through the thread pool. A link is removed as the link it is. Never rejects;
 * resolves how many were removed.
 */
export async function sweepLeftoverStages(filesDirectory: string): Promise<number> {
  const namespace = ownNamespace();
  let removed = 0;
  try {
    const now = Date.now();
    for (const name of await filePromises().readdir(filesDirectory)) {
      if (!name.startsWith(STAGE_PREFIX)) continue;
      const path = join(filesDirectory, name);
      try {
        if (!isLeftoverStage(name, () => lstatSync(path).mtimeMs, now, namespace)) continue;
        await filePromises().rm(path, { recursive: true, force: true });
        removed += 1;
      } catch {
        // Gone meanwhile, or not removable: the next process tries again.
      }
    }
  } catch {
    // No such folder (yet): nothing was left in it.
  }
  return removed;
}

/** Name of the stamp entry of `filesDirectory`: one per directory, the directory itself being the entry's key. */
function stampName(filesDirectory: string): string {
  return `${LEFTOVER_SWEEP_STAMP}-${fingerprint([filesDirectory])}`;
}

/**
 * Sweeps `filesDirectory` (see {@link sweepLeftoverStages}) unless the stamp in `stampDirectory` (a host cache folder)
 * says it was swept less than {@link LEFTOVER_SWEEP_INTERVAL_MS} before `now`, and stamps it when it did. A stamp that
 * is not this user's own, or not for this directory, or from the future (a clock set back) counts as none. Resolves
 * how many stages were removed, or undefined when the sweep was not due. Without a stamp directory it always sweeps.
 */
export async function sweepLeftoverStagesWhenDue(
  filesDirectory: string,
  stampDirectory: string | undefined,
  now: number = Date.now(),
): Promise<number | undefined> {
  if (stampDirectory !== undefined) {
    const sweptAt = readHostCache<unknown>(stampDirectory, stampName(filesDirectory), filesDirectory);
    if (typeof sweptAt === 'number' && sweptAt <= now && now - sweptAt < LEFTOVER_SWEEP_INTERVAL_MS) return undefined;
  }
  const removed = await sweepLeftoverStages(filesDirectory);
  // Stamped once the sweep is over: a process that ends in the middle of one leaves the next process to finish it.
  if (stampDirectory !== undefined) {
    writeHostCache(stampDirectory, stampName(filesDirectory), filesDirectory, now);
    trimHostCacheEntries(stampDirectory, LEFTOVER_SWEEP_STAMP, MAX_SWEEP_STAMPS);
  }
  return removed;
}

/** Files directories this process has swept, or found swept: once each is enough, later leftovers are another's. */
const sweptDirectories = new Set<string>();

/** The host cache folder of the default state folder, where sweeps are stamped; undefined when it cannot be used. */
function defaultStampDirectory(): string | undefined {
  try {
    return hostCacheDirectory(defaultStateRoot());
  } catch {
    return undefined;
  }
}

/**
 * {@link sweepLeftoverStagesWhenDue} for `filesDirectory`, stamped in the folder `stampDirectory` gives (the host
 * cache folder of the default state folder unless given), once per directory per process: resolves undefined at once
 * on a later call. Started once a launch has been spawned, so that no launch waits for it. Never rejects.
 */
export function sweepLeftoverStagesOnce(
  filesDirectory: string,
  stampDirectory: () => string | undefined = defaultStampDirectory,
): Promise<number | undefined> {
  if (sweptDirectories.has(filesDirectory)) return Promise.resolve(undefined);
  sweptDirectories.add(filesDirectory);
  return sweepLeftoverStagesWhenDue(filesDirectory, stampDirectory());
}
