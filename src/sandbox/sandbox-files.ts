import { createHash, randomBytes } from 'node:crypto';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { defaultStateRoot, makeOwnedDirectory, stateFolderName } from '../core/state-folders.js';

/**
 * Files the bubblewrap sandbox is built from, generated at run time into one directory: the seccomp program, a
 * minimal /etc/passwd and /etc/group, the staging mount points. Nothing in it is secret, but it must be ours: the
 * sandbox mounts these files, so a directory someone else could write would let them shape the sandbox.
 */

/** Mode of the directory: traversable by the sandbox user (it reads the files bwrap binds), listable only by us. */
const DIRECTORY_MODE = 0o711;

/** Default directory: `<tmpdir>/codecall-<uid>/sandbox`. */
export function defaultSandboxFilesDirectory(): string {
  return join(defaultStateRoot(), 'sandbox');
}

/**
 * Where the sandbox files go: `explicit` when given, else the default when `reachable` says the sandbox user can
 * get to it, else `/tmp/codecall-<uid>/sandbox` (a TMPDIR inside a private folder is out of its reach, and the
 * staging mount points live here too).
 */
export function chooseSandboxFilesDirectory(
  explicit: string | undefined,
  reachable: (directory: string) => boolean,
): string {
  if (explicit !== undefined) return ensureSandboxFilesDirectory(explicit);
  const preferred = ensureSandboxFilesDirectory(defaultSandboxFilesDirectory());
  if (reachable(preferred)) return preferred;
  const fallback = join('/tmp', stateFolderName(), 'sandbox');
  return fallback === preferred ? preferred : ensureSandboxFilesDirectory(fallback);
}

/**
 * Creates the directory (and missing parents, mode 0711) and checks that it is a real directory owned by this user.
 * @throws CodecallError `SANDBOX_UNAVAILABLE` when it is a link or belongs to someone else.
 */
export function ensureSandboxFilesDirectory(directory: string): string {
  if (!makeOwnedDirectory(directory, DIRECTORY_MODE)) {
    throw new CodecallError(
      'SANDBOX_UNAVAILABLE',
      `sandbox files directory ${directory} is not a directory owned by this user; remove it and retry`,
      { path: directory },
    );
  }
  return directory;
}

/**
 * Writes `content` once to `<directory>/<name>-<hash>` (atomically, mode 0644) and returns the path; the hash in the
 * name makes concurrent hosts agree without locks and a changed content a new file.
 */
export function writeContentAddressedFile(directory: string, name: string, content: string | Buffer): string {
  const digest = createHash('sha256').update(content).digest('hex').slice(0, 16);
  const path = join(directory, `${name}-${digest}`);
  if (!existsSync(path)) {
    const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    writeFileSync(temporary, content, { mode: 0o644 });
    renameSync(temporary, path);
  }
  return path;
}
