import { closeSync, constants, fstatSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { fingerprint } from '../core/fingerprint.js';
import { sha256Hex } from '../core/node-crypto.js';
import { readExactly } from '../core/owned-file.js';
import { randomHex } from '../core/random-bytes.js';
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

/** Hex characters of the SHA-256 in a fallback name. */
const HASHED_NAME_LENGTH = 16;

/** The bytes of the file at `path`, or undefined when there is none (or it cannot be read). */
function readIfPresent(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
}

/** Writes `bytes` to `path` atomically (a temporary file renamed over it), mode 0644. */
function writeAtomically(path: string, bytes: Buffer): void {
  const temporary = `${path}.${randomHex(6)}.tmp`;
  writeFileSync(temporary, bytes, { mode: 0o644 });
  renameSync(temporary, path);
}

/**
 * Writes `content` once to `<directory>/<name>-<fingerprint>` (atomically, mode 0644) and returns the path; the
 * fingerprint in the name makes concurrent hosts agree without locks and a changed content a new file. A file found
 * there is used only when it holds `content` byte for byte: a fingerprint is no cryptographic hash, so another content
 * may share it; then the file goes under `<name>-<SHA-256>`, reused on sight as before the fingerprints.
 */
export function writeContentAddressedFile(directory: string, name: string, content: string | Buffer): string {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const path = join(directory, `${name}-${fingerprint([bytes])}`);
  const found = readIfPresent(path);
  if (found === undefined) writeAtomically(path, bytes);
  // A concurrent host may have written it first: what counts is what the file holds now.
  if ((found ?? readIfPresent(path))?.equals(bytes)) return path;
  const hashed = join(directory, `${name}-${sha256Hex([bytes]).slice(0, HASHED_NAME_LENGTH)}`);
  if (readIfPresent(hashed) === undefined) writeAtomically(hashed, bytes);
  return hashed;
}

/**
 * A descriptor of a file in `directory` that holds `content`, at its start, and the file's path: the file
 * {@link writeContentAddressedFile} names for it when one is there, checked through the descriptor returned (a regular
 * file of that content, read at positions, which leaves the descriptor's offset at the start for its reader), so the
 * bytes checked are the bytes read; the file that function writes or finds otherwise. One open where a found file was
 * opened twice (once to check it, once for its reader).
 */
export function openContentAddressedFile(
  directory: string,
  name: string,
  content: string | Buffer,
): { readonly descriptor: number; readonly path: string } {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const path = join(directory, `${name}-${fingerprint([bytes])}`);
  const descriptor = openHolding(path, bytes);
  if (descriptor !== undefined) return { descriptor, path };
  const written = writeContentAddressedFile(directory, name, bytes);
  return { descriptor: openSync(written, 'r'), path: written };
}

/** A descriptor of the regular file at `path` (not a link), when it holds exactly `bytes`; undefined otherwise. */
function openHolding(path: string, bytes: Buffer): number | undefined {
  let descriptor: number | undefined;
  try {
    descriptor = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    const stats = fstatSync(descriptor);
    if (!stats.isFile() || stats.size !== bytes.length || !readExactly(descriptor, bytes.length)?.equals(bytes)) {
      return undefined;
    }
    const holding = descriptor;
    descriptor = undefined;
    return holding;
  } catch {
    return undefined;
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
}
