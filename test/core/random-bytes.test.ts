import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RANDOM_POOL_BYTES, randomBytes, randomHex, readRandomDevice } from '../../src/core/random-bytes.js';

/**
 * Run ids, the output nonce and temporary names come from the kernel's random device, read without `node:crypto`;
 * where that device cannot be read, or is a regular file (whose bytes anyone could know), from `node:crypto`.
 */

const folder = mkdtempSync(join(tmpdir(), 'codecall-random-bytes-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe('randomHex', () => {
  it('gives twice as many lowercase hex characters as bytes asked for, different on every call', () => {
    for (const size of [1, 6, 8, 12, 32]) expect(randomHex(size)).toMatch(new RegExp(`^[0-9a-f]{${2 * size}}$`));
    const drawn = new Set(Array.from({ length: 100 }, () => randomHex(8)));
    expect(drawn.size).toBe(100);
    expect(randomBytes(4096).length).toBe(4096);
  });

  it('hands each byte of its pool out once, and reads a new pool when one is used up', () => {
    // Three pools' worth in pieces of 8 bytes (6 a time, so pieces also end where a pool ends).
    const count = Math.ceil((3 * RANDOM_POOL_BYTES) / 8);
    const drawn = Array.from({ length: count }, (_, index) => randomHex(index % 2 === 0 ? 8 : 6));
    expect(new Set(drawn).size).toBe(count);
  });

  it('reads the random device, a character device', () => {
    const first = readRandomDevice(16);
    expect(first?.length).toBe(16);
    expect(first?.equals(readRandomDevice(16) ?? Buffer.alloc(16))).toBe(false);
  });

  it('takes nothing from a regular file in the device’s place or a missing device, and falls back to node:crypto', () => {
    const regular = join(folder, 'urandom');
    writeFileSync(regular, Buffer.alloc(64, 7));
    expect(readRandomDevice(16, regular)).toBeUndefined();
    expect(readRandomDevice(16, join(folder, 'missing'))).toBeUndefined();
    const fallback = [randomHex(16, regular), randomHex(16, regular), randomHex(16, join(folder, 'missing'))];
    for (const value of fallback) expect(value).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(fallback).size).toBe(3);
    expect(fallback).not.toContain('07'.repeat(16));
  });
});
