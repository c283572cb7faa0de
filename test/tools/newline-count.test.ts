import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import wabtModule from 'wabt';
import {
  countNewlines,
  countNewlinesInJavaScript,
  countNewlinesWithSimd,
  NEWLINE_COUNTER_WASM,
  newlineCounterReady,
} from '../../src/tools/newline-count.js';
import { seededRandom } from '../support/seeded-random.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The count done the plainest way: every byte looked at. */
function newlinesOneByOne(bytes: Buffer): number {
  let count = 0;
  for (const byte of bytes) if (byte === 0x0a) count += 1;
  return count;
}

/** Bytes of `length` from a seeded generator: a newline at `density`, else any byte (a newline too, now and then). */
function randomBytes(length: number, density: number, seed: number): Buffer {
  const next = seededRandom(seed);
  const bytes = Buffer.alloc(length);
  for (let index = 0; index < length; index += 1) bytes[index] = next() < density ? 0x0a : Math.floor(next() * 256);
  return bytes;
}

describe('countNewlines', () => {
  it('embeds newline-count.wat compiled', async () => {
    const wabt = await wabtModule();
    const source = readFileSync(join(root, 'src/tools/newline-count.wat'), 'utf8');
    const parsed = wabt.parseWat('newline-count.wat', source, { simd: true });
    try {
      expect(Buffer.from(parsed.toBinary({}).buffer).toString('base64')).toBe(NEWLINE_COUNTER_WASM);
    } finally {
      parsed.destroy();
    }
  });

  it('counts what a byte-by-byte count finds, at every length around its vectors, blocks and chunks', async () => {
    expect(await newlineCounterReady()).toBe(true);
    // Lengths around 16-byte vectors, 255-vector blocks (4,080 bytes), the 4 KiB threshold and 256 KiB chunks.
    const lengths = [0, 1, 15, 16, 17, 31, 4_079, 4_080, 4_081, 4_095, 4_096, 4_097, 8_161, 65_536, 262_143, 262_144];
    lengths.push(262_145, 524_288 + 17, 1_048_576 + 3);
    for (const [index, length] of lengths.entries()) {
      for (const density of [0, 0.01, 0.1, 0.5, 1]) {
        // Views that start at every offset of a word, as the chunks read into a buffer do.
        const whole = randomBytes(length + 3, density, index * 31 + Math.round(density * 100));
        for (const offset of [0, 1, 3]) {
          const bytes = whole.subarray(offset, offset + length);
          const expected = newlinesOneByOne(bytes);
          const where = `length ${length}, density ${density}, offset ${offset}`;
          expect(countNewlinesWithSimd(bytes), where).toBe(expected);
          expect(countNewlinesInJavaScript(bytes), where).toBe(expected);
          expect(countNewlines(bytes), where).toBe(expected);
        }
      }
    }
  });

  it('counts with JavaScript until the counter is ready, which its first count from 4 KiB on starts once', async () => {
    vi.resetModules();
    const api = (globalThis as unknown as { WebAssembly: { instantiate: (...args: never[]) => unknown } }).WebAssembly;
    const instantiate = vi.spyOn(api, 'instantiate');
    try {
      const fresh = await import('../../src/tools/newline-count.js');
      expect(fresh.countNewlines(Buffer.alloc(4_095, 0x0a))).toBe(4_095);
      expect(instantiate).not.toHaveBeenCalled();
      expect(fresh.countNewlines(Buffer.alloc(4_096, 0x0a))).toBe(4_096);
      expect(instantiate).toHaveBeenCalledTimes(1);
      expect(fresh.countNewlinesWithSimd(Buffer.alloc(4_096, 0x0a))).toBeUndefined();
      const text = Buffer.from('a line of text\n'.repeat(40_000));
      // The JavaScript count finds the newlines with indexOf, the counter never calls it.
      const indexOf = vi.spyOn(Buffer.prototype, 'indexOf');
      try {
        expect(fresh.countNewlines(text)).toBe(40_000);
        expect(indexOf).toHaveBeenCalled();
        expect(await fresh.newlineCounterReady()).toBe(true);
        indexOf.mockClear();
        expect(fresh.countNewlines(text)).toBe(40_000);
        expect(indexOf).not.toHaveBeenCalled();
      } finally {
        indexOf.mockRestore();
      }
      expect(instantiate).toHaveBeenCalledTimes(1);
    } finally {
      instantiate.mockRestore();
    }
  });

  it('counts a text of lines, a file of short lines and one long line alike', async () => {
    await newlineCounterReady();
    const text = Buffer.from('const value = compute(input, { label: "étiquette" }); // état\n'.repeat(2_000));
    let csv = '';
    for (let row = 0; csv.length < 200_000; row += 1) csv += `${row},${row % 97}\n`;
    for (const bytes of [text, Buffer.from(csv), Buffer.alloc(300_000, 0x61), Buffer.alloc(300_000, 0x0a)]) {
      expect(countNewlines(bytes)).toBe(newlinesOneByOne(bytes));
    }
  });

  it('counts without WebAssembly (node --jitless)', () => {
    const counted = execFileSync(
      process.execPath,
      [
        '--jitless',
        '--input-type=module',
        '-e',
        `const { countNewlines, newlineCounterReady } = await import(${JSON.stringify(join(root, 'dist/tools/newline-count.js'))});
         const bytes = Buffer.from('a\\nb\\n'.repeat(50_000));
         console.log(typeof WebAssembly, countNewlines(bytes), await newlineCounterReady(), countNewlines(bytes));`,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    expect(counted.trim()).toBe('undefined 100000 false 100000');
  });
});
