import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fingerprint } from '../core/fingerprint.js';
import { hostCacheDirectory } from '../core/host-cache.js';
import { sha256Hex } from '../core/node-crypto.js';
import { readExactly, readOwnedFile } from '../core/owned-file.js';
import { randomHex } from '../core/random-bytes.js';
import { defaultStateRoot, makeOwnedDirectory } from '../core/state-folders.js';

/**
 * The V8 code cache of the bundled command, one file per installed bundle and command in the host cache folder of the
 * default state folder (private to this user: V8 runs what the cache holds, so nobody else may write it). The file
 * starts with the key it was made for, because V8 checks its own version and flags but of the source only the length.
 * The key is taken from the bundle file's identity (device, inode, size, times), written out as it is, rather than a
 * hash of its 700 KB on every start. One file per bundle path and command, named by a fingerprint of the two: two
 * installs of the command started in turn would otherwise replace each other's cache on every start, and a cache
 * holds only what the command that made it compiled; two names sharing a fingerprint only miss each other's cache (the
 * key inside is checked). Nothing here loads `node:crypto` on a start whose bundle has settled (see
 * src/core/node-crypto.ts).
 */

/** Prefix of the code cache files in the host cache folder. */
export const CODE_CACHE_FILE = 'cli-code-cache';
/** Age after which another bundle's code cache file, not written since, is removed when a cache is written. */
export const STALE_CODE_CACHE_MS = 7 * 24 * 60 * 60 * 1000;
/** Largest code cache read; a bigger file is not one this code wrote. */
export const MAX_CODE_CACHE_BYTES = 32 * 1024 * 1024;
/** Bytes of the key at the head of the file: a key shorter than this is padded with spaces. */
export const CODE_CACHE_KEY_BYTES = 128;

/** `text` as a key of {@link CODE_CACHE_KEY_BYTES} characters: padded, or its SHA-256 when it is longer. */
function fixedLengthKey(text: string): string {
  return (text.length <= CODE_CACHE_KEY_BYTES ? text : sha256Hex([text])).padEnd(CODE_CACHE_KEY_BYTES, ' ');
}

/**
 * What a cache is valid for: the bundle's text, and the Node.js (so V8) that compiled it. Hashed with SHA-256: only a
 * bundle changed moments ago is keyed by its text, and a fingerprint of a text could be made to match another's.
 */
export function codeCacheKey(source: string): string {
  return fixedLengthKey(sha256Hex([`${process.version}\0${process.arch}`, source]));
}

/**
 * How long after its last change a file's identity may still hide a second change: timestamps are taken from a coarse
 * clock (one tick, a few milliseconds, on Linux; up to two seconds on some file systems), so two writes close together can
 * leave the same ctime.
 */
export const SETTLED_FILE_AGE_NS = 5_000_000_000n;

/** The identity of a file as `fstat` gives it with `bigint: true`. */
export interface FileIdentity {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

/**
 * A cache key from the bundle file's identity instead of its text, so a start does not hash the whole bundle; or
 * undefined when the file changed too recently for its identity to be trusted (the caller hashes the text then).
 * Safe because the text of a file cannot change while all of these stay equal: a write sets mtime and ctime to the
 * current time, a replaced file is another inode (or a reused inode number with a new ctime), and nobody can set a
 * ctime back (only the clock). What timestamps cannot tell apart, two changes within one tick of their coarse clock,
 * is excluded by trusting only a file whose last change is older than {@link SETTLED_FILE_AGE_NS}.
 */
export function fileCodeCacheKey(identity: FileIdentity, nowNs: bigint): string | undefined {
  if (nowNs - identity.ctimeNs < SETTLED_FILE_AGE_NS) return undefined;
  const { dev, ino, size, mtimeNs, ctimeNs } = identity;
  // The identity itself, not a hash of it (about 110 characters at most): distinct identities are distinct keys, and
  // the `file` prefix keeps them apart from codeCacheKey's hex digests.
  return fixedLengthKey(`file\0${process.version}\0${process.arch}\0${dev}\0${ino}\0${size}\0${mtimeNs}\0${ctimeNs}`);
}

/** Largest bundle read; a bigger file is not one the build wrote. */
const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
/**
 * How many times its size the buffer the bundle is read into holds: the code cache is read into the same buffer once
 * the bundle is decoded (a cache is about the bundle's size, its size depending on what the run that made it
 * compiled). The part never written costs nothing: only a page written is faulted in.
 */
const BUNDLE_BUFFER_ROOM = 2;

/**
 * Reads the bundle once, from one descriptor, with the key of its code cache: from the file's identity when it is
 * settled and did not change while it was read, from its text otherwise. Undefined when there is no bundle to read,
 * or it could not be read whole (then the plain modules run). `spare` is the buffer the file was read into, no longer
 * needed once `source` is made, with room beyond it: the code cache is read into it (see {@link readCodeCache}), not
 * into as much fresh memory.
 */
export function readBundle(
  path: string,
): { readonly source: string; readonly key: string; readonly spare: Buffer } | undefined {
  let descriptor: number;
  try {
    descriptor = openSync(path, constants.O_RDONLY);
  } catch {
    return undefined;
  }
  try {
    const before = fstatSync(descriptor, { bigint: true });
    if (!before.isFile() || before.size > BigInt(MAX_BUNDLE_BYTES)) return undefined;
    const spare = Buffer.allocUnsafe(Number(before.size) * BUNDLE_BUFFER_ROOM);
    const bytes = readExactly(descriptor, Number(before.size), spare);
    if (bytes === undefined) return undefined;
    const source = bytes.toString('utf8');
    const after = fstatSync(descriptor, { bigint: true });
    const unchanged = after.size === before.size && after.ctimeNs === before.ctimeNs;
    // ctime is wall-clock time: compared with the wall clock.
    const now = BigInt(Date.now()) * 1_000_000n;
    const key = (unchanged ? fileCodeCacheKey(after, now) : undefined) ?? codeCacheKey(source);
    return { source, key, spare };
  } catch {
    return undefined;
  } finally {
    closeSync(descriptor);
  }
}

/** The host cache folder of the default state folder, made like the state folder itself when missing. */
function cacheDirectory(): string | undefined {
  try {
    const root = defaultStateRoot();
    // The state folder's own mode (see prepareStateDirectories): made here first, it must be what runs expect.
    if (!makeOwnedDirectory(root, 0o711)) return undefined;
    return hostCacheDirectory(root);
  } catch {
    return undefined;
  }
}

/**
 * Name of the code cache file of `owner`: the bundle's absolute path, and for the command's caches the command after
 * a `#` (one cache per command, see src/cli/main.ts).
 */
export function codeCacheFileName(owner: string): string {
  return `${CODE_CACHE_FILE}-${fingerprint([owner])}`;
}

/**
 * The cached code of `owner` (see {@link codeCacheFileName}) for `key`, or undefined when there is none this user
 * alone wrote for it (missing, another key, not a regular file of this user, writable by others, too large). Read into
 * `into` when it is large enough: memory the caller gives up (the bundle's bytes once decoded), whose pages are
 * already there.
 */
export function readCodeCache(key: string, owner: string, into?: Buffer): Buffer | undefined {
  const directory = cacheDirectory();
  if (directory === undefined) return undefined;
  const bytes = readOwnedFile(join(directory, codeCacheFileName(owner)), MAX_CODE_CACHE_BYTES, into);
  if (
    bytes === undefined ||
    bytes.length <= CODE_CACHE_KEY_BYTES ||
    bytes.toString('latin1', 0, CODE_CACHE_KEY_BYTES) !== key
  ) {
    return undefined;
  }
  return bytes.subarray(CODE_CACHE_KEY_BYTES);
}

/**
 * Stores the code of `owner` (see {@link codeCacheFileName}) for `key`, replacing its file whole (a new file renamed
 * over it), and removes the code cache files of other bundles not written for {@link STALE_CODE_CACHE_MS}; a failure
 * only loses the cache.
 */
export function writeCodeCache(key: string, data: Buffer, owner: string): void {
  const directory = cacheDirectory();
  if (directory === undefined) return;
  const name = codeCacheFileName(owner);
  const temporary = join(directory, `.${name}-${randomHex(6)}`);
  try {
    writeFileSync(temporary, Buffer.concat([Buffer.from(key, 'latin1'), data]), { mode: 0o600, flag: 'wx' });
    renameSync(temporary, join(directory, name));
  } catch {
    rmSync(temporary, { force: true });
  }
  removeStaleCodeCaches(directory, name);
}

/** Removes other bundles' code cache files (the single file of earlier versions too) not written for a while. */
function removeStaleCodeCaches(directory: string, kept: string): void {
  try {
    const now = Date.now();
    for (const entry of readdirSync(directory)) {
      if (entry === kept || !entry.startsWith(CODE_CACHE_FILE)) continue;
      const path = join(directory, entry);
      if (now - lstatSync(path).mtimeMs > STALE_CODE_CACHE_MS) rmSync(path, { force: true });
    }
  } catch {
    // Only tidying: what stays is removed by a later write.
  }
}
