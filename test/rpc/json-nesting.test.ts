import { describe, expect, it } from 'vitest';
import { exceedsJsonNesting, MAX_JSON_NESTING_DEPTH } from '../../src/core/json-nesting.js';
import { seededRandom } from '../support/seeded-random.js';

const bytes = (text: string) => Buffer.from(text, 'utf8');
const exceeds = (text: string, maxDepth = MAX_JSON_NESTING_DEPTH) => exceedsJsonNesting(bytes(text), maxDepth);
const nested = (depth: number, inner = '1') => '['.repeat(depth) + inner + ']'.repeat(depth);

/** Depth of a parsed JSON value, for comparison with the scan. */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce<number>((deepest, child) => Math.max(deepest, depthOf(child)), 0);
}

/** A random JSON value whose strings are full of brackets, quotes and escapes, up to `depth` levels deep. */
function randomJson(random: () => number, depth: number): unknown {
  if (depth === 0 || random() < 0.1) {
    const pieces = ['[', ']', '{', '}', '"', '\\', '\\"', '\\\\', 'é', '😀', 'x', ' ', '\n'];
    let text = '';
    // Short strings and long ones: the scan steps through the first bytes and searches through the rest.
    const length = random() < 0.3 ? 20 + Math.floor(random() * 60) : Math.floor(random() * 8);
    for (let index = length; index > 0; index -= 1) {
      text += pieces[Math.floor(random() * pieces.length)];
    }
    return random() < 0.5 ? text : Math.floor(random() * 1000);
  }
  const children = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, index) =>
    index === 0 ? randomJson(random, depth - 1) : randomJson(random, Math.floor(random() * depth)),
  );
  if (random() < 0.5) return children;
  return Object.fromEntries(children.map((child, index) => [`k[${index}"{`, child]));
}

describe('exceedsJsonNesting', () => {
  it('accepts nesting up to the limit and refuses one level more, of arrays, objects and both', () => {
    expect(exceeds(nested(MAX_JSON_NESTING_DEPTH))).toBe(false);
    expect(exceeds(nested(MAX_JSON_NESTING_DEPTH + 1))).toBe(true);
    const objects = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
    expect(exceeds(objects(MAX_JSON_NESTING_DEPTH))).toBe(false);
    expect(exceeds(objects(MAX_JSON_NESTING_DEPTH + 1))).toBe(true);
    const mixed = (depth: number) => `${'[{"a":'.repeat(depth / 2)}0${'}]'.repeat(depth / 2)}`;
    expect(exceeds(mixed(MAX_JSON_NESTING_DEPTH))).toBe(false);
    expect(exceeds(mixed(MAX_JSON_NESTING_DEPTH + 2))).toBe(true);
  });

  it('refuses unterminated nesting (no closers at all), however long', () => {
    expect(exceeds('['.repeat(MAX_JSON_NESTING_DEPTH + 1))).toBe(true);
    expect(exceeds('{"a":['.repeat(200))).toBe(true);
    expect(exceedsJsonNesting(Buffer.alloc(8 << 20, '['))).toBe(true);
  });

  it('does not count brackets inside strings, whatever the escapes', () => {
    const inString = (content: string) => `{"value":"${content}"}`;
    expect(exceeds(inString('['.repeat(10_000)))).toBe(false);
    expect(exceeds(inString(`\\"${'{'.repeat(10_000)}`))).toBe(false);
    expect(exceeds(inString(`${'\\\\'.repeat(50)}\\"${'['.repeat(10_000)}`))).toBe(false);
    expect(exceeds(`["${'\\"['.repeat(5_000)}"]`)).toBe(false);
  });

  it('counts brackets after a string that an escaped backslash closes', () => {
    // "\\" is a string holding one backslash: the quote after the pair ends it.
    expect(exceeds(`["\\\\",${nested(MAX_JSON_NESTING_DEPTH)}]`)).toBe(true);
    expect(exceeds(`["${'\\\\'.repeat(99)}",${nested(MAX_JSON_NESTING_DEPTH)}]`)).toBe(true);
    expect(exceeds(`["\\\\",${nested(MAX_JSON_NESTING_DEPTH - 1)}]`)).toBe(false);
  });

  it('finds the end of long strings whatever the escapes around where the byte-by-byte part stops', () => {
    for (let padding = 0; padding < 70; padding += 1) {
      for (const escapes of ['\\"', '\\\\', '\\\\\\"', '\\n']) {
        const string = `"${'x'.repeat(padding)}${escapes}${'['.repeat(300)}${escapes}${'{'.repeat(padding)}"`;
        expect(exceeds(`[${string},${nested(MAX_JSON_NESTING_DEPTH - 1)}]`), string).toBe(false);
        expect(exceeds(`[${string},${nested(MAX_JSON_NESTING_DEPTH)}]`), string).toBe(true);
      }
    }
  });

  it('does not let stray closers lend depth to the openers after them', () => {
    expect(exceeds(']'.repeat(1_000) + '['.repeat(MAX_JSON_NESTING_DEPTH + 1))).toBe(true);
    expect(exceeds('}'.repeat(1_000) + nested(MAX_JSON_NESTING_DEPTH + 1))).toBe(true);
  });

  it('measures depth, not the number of brackets: many shallow siblings pass', () => {
    const siblings = `[${Array.from({ length: 10_000 }, () => nested(3)).join(',')}]`;
    expect(exceeds(siblings)).toBe(false);
    expect(exceeds(`{"a":${nested(100)},"b":${nested(200)},"c":${nested(MAX_JSON_NESTING_DEPTH - 1)}}`)).toBe(false);
  });

  it('treats multi-byte characters as plain bytes', () => {
    const text = `["${'😀é€'.repeat(1_000)}",${nested(MAX_JSON_NESTING_DEPTH)}]`;
    expect(exceeds(text)).toBe(true);
    expect(exceeds(`["${'😀é€'.repeat(1_000)}",${nested(MAX_JSON_NESTING_DEPTH - 1)}]`)).toBe(false);
  });

  it('looks only at the given range of the bytes', () => {
    const frame = bytes(`xx${nested(MAX_JSON_NESTING_DEPTH + 1)}\n{"id":1}`);
    const newline = frame.indexOf(10);
    expect(exceedsJsonNesting(frame, MAX_JSON_NESTING_DEPTH, 2, newline)).toBe(true);
    expect(exceedsJsonNesting(frame, MAX_JSON_NESTING_DEPTH, newline + 1)).toBe(false);
    // The cut falls inside the nesting: only what is in range counts.
    expect(exceedsJsonNesting(frame, MAX_JSON_NESTING_DEPTH, 2 + 10)).toBe(false);
  });

  it('agrees with the depth JSON.parse finds, on random values with hostile strings', () => {
    const random = seededRandom(12_345);
    const outcomes = { deeper: 0, within: 0 };
    for (let round = 0; round < 300; round += 1) {
      const limit = 1 + Math.floor(random() * 12);
      const value = randomJson(random, 1 + Math.floor(random() * 16));
      const text = JSON.stringify(value);
      const deeper = depthOf(JSON.parse(text)) > limit;
      expect(exceedsJsonNesting(bytes(text), limit), text).toBe(deeper);
      outcomes[deeper ? 'deeper' : 'within'] += 1;
    }
    // Both answers are exercised, each many times.
    expect(outcomes.deeper).toBeGreaterThan(50);
    expect(outcomes.within).toBeGreaterThan(50);
  });
});
