import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { nodeCrypto } from './node-crypto.js';
import { readExactly } from './owned-file.js';

/**
 * Random bytes for names and nonces the script must not be able to guess (run ids, the output nonce, temporary
 * names), read synchronously from the kernel's random device instead of `node:crypto`, whose loading costs a one-shot
 * run several milliseconds. The kernel's generator is where `randomBytes` gets its entropy too (OpenSSL seeds from
 * it); where the device cannot be read, or is not a character device, `node:crypto` is loaded and used instead.
 */

/** The kernel's non-blocking random device. */
export const RANDOM_DEVICE = '/dev/urandom';

/** `size` bytes from `device` (a character device), or undefined when it cannot be opened or read whole. */
export function readRandomDevice(size: number, device = RANDOM_DEVICE): Buffer | undefined {
  let descriptor: number | undefined;
  try {
    descriptor = openSync(device, constants.O_RDONLY);
    // A regular file in its place (a broken chroot or container image) would give the same bytes every time.
    if (!fstatSync(descriptor).isCharacterDevice()) return undefined;
    return readExactly(descriptor, size);
  } catch {
    return undefined;
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
}

/**
 * Bytes read from the random device at once and handed out in turn, each once: a run takes a few for its id and its
 * nonce, and opening, checking, reading and closing the device for each (four system calls, some 10 µs apiece on a VM)
 * sat on the path of every launch.
 */
export const RANDOM_POOL_BYTES = 4096;
let pool: Buffer | undefined;
let poolOffset = 0;

/** `size` unpredictable bytes: from the random device (`device`, for tests), else from `node:crypto`. */
export function randomBytes(size: number, device = RANDOM_DEVICE): Buffer {
  if (device !== RANDOM_DEVICE || size > RANDOM_POOL_BYTES) {
    return readRandomDevice(size, device) ?? nodeCrypto().randomBytes(size);
  }
  if (pool === undefined || poolOffset + size > pool.length) {
    pool = readRandomDevice(RANDOM_POOL_BYTES);
    poolOffset = 0;
    if (pool === undefined) return nodeCrypto().randomBytes(size);
  }
  // A view: the pool is never written after its read, and a new read replaces it rather than refilling it.
  const bytes = pool.subarray(poolOffset, poolOffset + size);
  poolOffset += size;
  return bytes;
}

/** `size` unpredictable bytes as `2 * size` lowercase hex characters (a file name, an id, a nonce). */
export function randomHex(size: number, device = RANDOM_DEVICE): string {
  return randomBytes(size, device).toString('hex');
}
