import { lstatSync, readlinkSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isProcessAlive } from '../core/processes.js';
import { randomHex } from '../core/random-bytes.js';

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

/** Files directories this process has swept: once each is enough, later leftovers are the next process's. */
const sweptDirectories = new Set<string>();

/**
 * Removes the stage directories in `filesDirectory` that processes killed before their exit left behind (see
 * {@link isLeftoverStage}), once per directory per process, one at a time through the thread pool, so a launch need
 * not wait for it. A link is removed as the link it is. Never rejects; resolves how many were removed.
 */
export async function sweepLeftoverStages(filesDirectory: string): Promise<number> {
  if (sweptDirectories.has(filesDirectory)) return 0;
  sweptDirectories.add(filesDirectory);
  const namespace = ownNamespace();
  let removed = 0;
  try {
    const now = Date.now();
    for (const name of await readdir(filesDirectory)) {
      if (!name.startsWith(STAGE_PREFIX)) continue;
      const path = join(filesDirectory, name);
      try {
        if (!isLeftoverStage(name, () => lstatSync(path).mtimeMs, now, namespace)) continue;
        await rm(path, { recursive: true, force: true });
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
