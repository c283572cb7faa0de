import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hostCacheDirectory } from '../core/host-cache.js';
import { defaultStateRoot, makeOwnedDirectory } from '../core/state-folders.js';

/**
 * The V8 code cache of the bundled command, one file in the host cache folder of the default state folder (private to
 * this user: V8 runs what the cache holds, so nobody else may write it). The file starts with the key it was made
 * for, because V8 checks its own version and flags but of the source only the length.
 */

/** Name of the code cache file in the host cache folder. */
export const CODE_CACHE_FILE = 'cli-code-cache';
/** Largest code cache read; a bigger file is not one this code wrote. */
export const MAX_CODE_CACHE_BYTES = 32 * 1024 * 1024;
/** Bytes of the key at the head of the file (a hex SHA-256). */
const KEY_BYTES = 64;

/** What a cache is valid for: the bundle's text, and the Node.js (so V8) that compiled it. */
export function codeCacheKey(source: string): string {
  return createHash('sha256').update(`${process.version}\0${process.arch}\0`).update(source).digest('hex');
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
 * The cached code for `key`, or undefined when there is none this user alone wrote for it (missing, another key, not
 * a regular file of this user, writable by others, too large).
 */
export function readCodeCache(key: string): Buffer | undefined {
  const directory = cacheDirectory();
  if (directory === undefined) return undefined;
  let descriptor: number | undefined;
  try {
    descriptor = openSync(join(directory, CODE_CACHE_FILE), constants.O_RDONLY | constants.O_NOFOLLOW);
    const stats = fstatSync(descriptor);
    const uid = process.getuid?.();
    if (!stats.isFile() || (uid !== undefined && stats.uid !== uid) || (stats.mode & 0o022) !== 0) return undefined;
    if (stats.size <= KEY_BYTES || stats.size > MAX_CODE_CACHE_BYTES) return undefined;
    const buffer = Buffer.allocUnsafe(stats.size);
    let filled = 0;
    while (filled < buffer.length) {
      const read = readSync(descriptor, buffer, filled, buffer.length - filled, filled);
      if (read === 0) return undefined;
      filled += read;
    }
    if (buffer.toString('latin1', 0, KEY_BYTES) !== key) return undefined;
    return buffer.subarray(KEY_BYTES);
  } catch {
    return undefined;
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
}

/** Stores the code for `key`, replacing the file whole (a new file renamed over it); a failure only loses the cache. */
export function writeCodeCache(key: string, data: Buffer): void {
  const directory = cacheDirectory();
  if (directory === undefined) return;
  const temporary = join(directory, `.${CODE_CACHE_FILE}-${randomBytes(6).toString('hex')}`);
  try {
    writeFileSync(temporary, Buffer.concat([Buffer.from(key, 'latin1'), data]), { mode: 0o600, flag: 'wx' });
    renameSync(temporary, join(directory, CODE_CACHE_FILE));
  } catch {
    rmSync(temporary, { force: true });
  }
}
