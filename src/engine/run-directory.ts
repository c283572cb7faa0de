import { spawn } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** Directories of one run. */
export interface RunDirectory {
  readonly root: string;
  readonly tmp: string;
  readonly artifacts: string;
}

/** Creates the private working directory of a run (mode 0700) with its `tmp/` and `artifacts/`. */
export async function createRunDirectory(runsRoot: string, runId: string): Promise<RunDirectory> {
  const root = join(runsRoot, runId);
  await mkdir(root, { mode: 0o700 });
  const tmp = join(root, 'tmp');
  const artifacts = join(root, 'artifacts');
  await Promise.all([mkdir(tmp, { mode: 0o700 }), mkdir(artifacts, { mode: 0o700 })]);
  return { root, tmp, artifacts };
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
