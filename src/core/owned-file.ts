import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * Reads the first `size` bytes of an open file; undefined when the file ends before them (it shrank meanwhile), so a
 * caller never takes part of a file for the whole of it. Into the start of `into` when it is large enough (memory the
 * caller no longer needs: fresh memory costs a page fault per page), else into a new buffer.
 */
export function readExactly(descriptor: number, size: number, into?: Buffer): Buffer | undefined {
  const buffer = into !== undefined && into.length >= size ? into.subarray(0, size) : Buffer.allocUnsafe(size);
  let filled = 0;
  while (filled < size) {
    const read = readSync(descriptor, buffer, filled, size - filled, filled);
    if (read === 0) return undefined;
    filled += read;
  }
  return buffer;
}

/**
 * The bytes of a file that only this user may have written: opened without following a link, a regular file of this
 * user that nobody else may write, at most `maxBytes`. Undefined when it is missing, not such a file, too large, or
 * cannot be read whole. What the host's caches read back (code the host runs, facts it trusts) goes through here.
 * Read into `into` when it is large enough (see {@link readExactly}).
 */
export function readOwnedFile(path: string, maxBytes: number, into?: Buffer): Buffer | undefined {
  let descriptor: number | undefined;
  try {
    descriptor = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    const stats = fstatSync(descriptor);
    const uid = process.getuid?.();
    if (!stats.isFile() || (uid !== undefined && stats.uid !== uid) || (stats.mode & 0o022) !== 0) return undefined;
    if (stats.size > maxBytes) return undefined;
    return readExactly(descriptor, stats.size, into);
  } catch {
    return undefined;
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
}
