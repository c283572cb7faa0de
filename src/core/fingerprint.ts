import * as zlib from 'node:zlib';
import { sha256Hex } from './node-crypto.js';

/**
 * A fingerprint of some texts or bytes, for names that need only be stable and distinct (a cache file named after a
 * path, a content-addressed folder): zlib's CRC-32 of the parts, computed natively, instead of a SHA-256, for which
 * `node:crypto` would have to be loaded (several milliseconds of a one-shot run; a hash loop in JavaScript costs as
 * much, most of a one-shot run being interpreted code). It is NOT a cryptographic hash: whoever chooses the input can
 * make two inputs share a fingerprint. So a name made from one may only be reused after checking that what it holds
 * is what would be written (the content, or a key inside), and a mismatch must lead to nothing worse than a slower path.
 */

/** Hex characters of a fingerprint. */
export const FINGERPRINT_LENGTH = 16;

type Crc32 = (data: string | Uint8Array, value?: number) => number;

/** zlib's CRC-32 (Node.js 20.15 and later; on earlier ones fingerprints are taken from a SHA-256). */
const nativeCrc32 = (zlib as { readonly crc32?: Crc32 }).crc32;

function hex32(value: number): string {
  return (value >>> 0).toString(16).padStart(8, '0');
}

/**
 * The fingerprint of the parts in order (strings as UTF-8), as {@link FINGERPRINT_LENGTH} hex characters: their
 * CRC-32, each part preceded by its length in bytes (so the boundaries count: `['ab', 'c']` and `['a', 'bc']` differ),
 * then their total length. `crc32` is for tests: null stands for a Node.js without one.
 */
export function fingerprint(
  parts: readonly (string | Uint8Array)[],
  crc32: Crc32 | null = nativeCrc32 ?? null,
): string {
  if (crc32 === null) return sha256Hex(parts).slice(0, FINGERPRINT_LENGTH);
  let checksum = 0;
  let total = 0;
  for (const part of parts) {
    const size = typeof part === 'string' ? Buffer.byteLength(part, 'utf8') : part.byteLength;
    checksum = crc32(part, crc32(`${size}:`, checksum));
    total = (total + size) >>> 0;
  }
  return hex32(checksum) + hex32(total);
}
