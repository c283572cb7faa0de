import { join } from 'node:path';
import { CodecallError } from '../../core/errors.js';
import { makeOwnedDirectory } from '../../core/state-folders.js';

/** Folders codecall keeps its working files in. */
export interface StateDirectories {
  /** Root (default `<tmpdir>/codecall-<uid>`). */
  readonly root: string;
  /** Private run directories, removed after each run. */
  readonly runs: string;
  /** Generated tool modules, one folder per content hash. */
  readonly modules: string;
  /** Full outputs and artifacts of finished runs. */
  readonly outputs: string;
}

function ensureOwnedDirectory(path: string, mode: number): void {
  if (!makeOwnedDirectory(path, mode)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `state directory ${path} is not a directory owned by this user; remove it or set "stateDir"`,
      { path },
    );
  }
}

/**
 * Creates (once) the state folders. They are traversable but not listable by others (0711), so a sandboxed script
 * running as another uid can reach its own bind-mounted run directory and nothing else.
 */
export function prepareStateDirectories(root: string): StateDirectories {
  ensureOwnedDirectory(root, 0o711);
  const directories = {
    root,
    runs: join(root, 'runs'),
    modules: join(root, 'modules'),
    outputs: join(root, 'outputs'),
  };
  ensureOwnedDirectory(directories.runs, 0o711);
  ensureOwnedDirectory(directories.modules, 0o755);
  ensureOwnedDirectory(directories.outputs, 0o700);
  return directories;
}
