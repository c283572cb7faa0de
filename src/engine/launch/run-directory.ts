import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** File name of the script inside its run directory (what tracebacks show). */
export const SCRIPT_FILE_NAME = 'script.py';

/** A run id: 16 hex characters, safe as a file name. */
export function createRunId(): string {
  return randomBytes(8).toString('hex');
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

/**
 * Removes a run directory without following symbolic links. Trees too deep for path-based removal (the script can
 * nest directories past PATH_MAX) fall back to `rm -rf`, which walks them relative to open directories.
 */
export async function removeRunDirectory(root: string): Promise<void> {
  try {
    await rm(root, { recursive: true, force: true, maxRetries: 2 });
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
