import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, rmdirSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { filePromises } from '../../core/file-promises.js';
import { randomHex } from '../../core/random-bytes.js';

/** File name of the script inside its run directory (what tracebacks show). */
export const SCRIPT_FILE_NAME = 'script.py';

/** A run id: 16 hex characters, safe as a file name. */
export function createRunId(): string {
  return randomHex(8);
}

/** Directories of one run. */
export interface RunDirectory {
  readonly root: string;
  readonly tmp: string;
  readonly artifacts: string;
}

/**
 * Creates the private working directory of a run (mode 0700) with its `tmp/` and `artifacts/`. Synchronous on
 * purpose: three mkdir calls take microseconds, three trips through the thread pool take a millisecond under load.
 */
export function createRunDirectory(runsRoot: string, runId: string): RunDirectory {
  const root = join(runsRoot, runId);
  mkdirSync(root, { mode: 0o700 });
  const tmp = join(root, 'tmp');
  const artifacts = join(root, 'artifacts');
  mkdirSync(tmp, { mode: 0o700 });
  mkdirSync(artifacts, { mode: 0o700 });
  return { root, tmp, artifacts };
}

/** Prefix of a run directory renamed out of the way, waiting for its removal. */
export const REMOVED_RUN_PREFIX = '.removed-';

/**
 * Takes a run directory out of its place at once (one rename to a hidden sibling, on the same file system), so the
 * run's path is gone before its contents are deleted; returns the path to delete with {@link removeRunDirectory}.
 * When the rename fails the directory stays where it is and that path is returned.
 */
export function detachRunDirectory(root: string): string {
  const detached = join(dirname(root), `${REMOVED_RUN_PREFIX}${basename(root)}`);
  try {
    renameSync(root, detached);
    return detached;
  } catch {
    return root;
  }
}

/** Entries a run directory may hold to be removed in place, synchronously; a bigger tree goes through the thread pool. */
export const SYNC_REMOVAL_MAX_ENTRIES = 64;
/** Depth of folders below the run directory removed synchronously; a deeper tree goes through the thread pool. */
const SYNC_REMOVAL_MAX_DEPTH = 8;

/**
 * Removes a run directory without following symbolic links. A small tree (most runs: the script, `tmp/`,
 * `artifacts/`) is removed at once with a few synchronous calls, cheaper than the thread pool's round trips and short
 * enough not to hold a server's event loop; a larger one, or what a failure leaves, is removed asynchronously. Trees
 * too deep for path-based removal (the script can nest directories past PATH_MAX) fall back to `rm -rf`, which walks
 * them relative to open directories.
 */
export async function removeRunDirectory(root: string): Promise<void> {
  if (removeSmallTree(root)) return;
  try {
    await filePromises().rm(root, { recursive: true, force: true, maxRetries: 2 });
    return;
  } catch {
    // Fall through to rm(1).
  }
  await new Promise<void>((resolve) => {
    const child = spawn('rm', ['-rf', '--one-file-system', '--', root], { stdio: 'ignore' });
    child.once('error', () => resolve());
    child.once('exit', () => resolve());
  });
}

/**
 * Removes a run directory taken out of its place ({@link detachRunDirectory}) through the thread pool, links
 * unfollowed; says whether it is gone (what is left goes to {@link removeRunDirectory}). For a host whose thread has
 * other work: removing a folder may wait on the disk for milliseconds, which the synchronous removal takes from it.
 */
export function removeDetachedOffThread(root: string): Promise<boolean> {
  return filePromises()
    .rm(root, { recursive: true, force: true })
    .then(
      () => true,
      () => false,
    );
}

/**
 * Removes `root` and what it holds when it is small (see {@link SYNC_REMOVAL_MAX_ENTRIES}), at once; says whether it
 * is gone. A tree found larger or deeper, or a removal that failed, is left, partly removed, to
 * {@link removeRunDirectory}. Types come from the directory entries (Node lstats where the file system gives none): a
 * link is unlinked as the entry it is, never followed.
 */
export function removeSmallTree(root: string): boolean {
  let budget = SYNC_REMOVAL_MAX_ENTRIES;
  const remove = (directory: string, depth: number): boolean => {
    const entries = readdirSync(directory, { withFileTypes: true });
    budget -= entries.length;
    if (budget < 0) return false;
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (!entry.isDirectory()) unlinkSync(path);
      else if (depth >= SYNC_REMOVAL_MAX_DEPTH || !remove(path, depth + 1)) return false;
    }
    rmdirSync(directory);
    return true;
  };
  try {
    return remove(root, 0);
  } catch {
    // Whatever failed (a name too long, an entry that changed type), the asynchronous removal retries as before.
    return false;
  }
}
