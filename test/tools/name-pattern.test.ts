import { describe, expect, it } from 'vitest';
import {
  compileNamePattern,
  compilePathPattern,
  isPathPattern,
  MAX_NAME_PATTERN_ALTERNATIVES,
  MAX_NAME_PATTERN_CHARS,
  NamePatternError,
} from '../../src/tools/name-pattern.js';

describe('compileNamePattern', () => {
  it.each([
    ['*.txt', ['a.txt', '.txt', 'notes.v2.txt'], ['a.txt.bak', 'a.md']],
    ['data?.csv', ['data1.csv', 'dataX.csv'], ['data.csv', 'data10.csv']],
    ['[abc]*', ['apple', 'cat'], ['dog']],
    ['[!abc]*', ['dog'], ['apple']],
    ['file[0-9].log', ['file3.log'], ['fileA.log']],
    ['*.{ts,js}', ['index.ts', 'index.js'], ['index.tsx', 'index.json']],
    ['{a,b{1,2}}.x', ['a.x', 'b1.x', 'b2.x'], ['b.x', 'b3.x']],
    ['a+b(c)$^.txt', ['a+b(c)$^.txt'], ['aab(c)$^.txt']],
    ['\\*.txt', ['*.txt'], ['a.txt']],
    ['[unclosed', ['[unclosed'], ['u']],
    ['{open', ['{open'], ['open']],
    ['[]]x', [']x'], ['x']],
    ['[z-a]', [], ['z', 'a', '[z-a]']],
    ['[a\\]]', ['a', ']'], ['b']],
    ['é*', ['été'], ['ete']],
    ['?', ['😀'], ['ab']],
  ])('%s', (pattern, matching, notMatching) => {
    const compiled = compileNamePattern(pattern);
    for (const name of matching) expect(compiled.test(name), `${pattern} should match ${name}`).toBe(true);
    for (const name of notMatching) expect(compiled.test(name), `${pattern} should not match ${name}`).toBe(false);
  });

  // A backtracking matcher would try the ways to place 30 stars among 255 characters (about 10^39) and never return.
  it('matches a pattern with many stars against a long name without stalling', () => {
    const pattern = compileNamePattern(`${'*a'.repeat(30)}*b`);
    expect(pattern.test('a'.repeat(255))).toBe(false);
    expect(pattern.test(`${'a'.repeat(254)}b`)).toBe(true);
  });

  it('refuses patterns that are too long or expand too far', () => {
    expect(() => compileNamePattern('x'.repeat(MAX_NAME_PATTERN_CHARS + 1))).toThrow(NamePatternError);
    expect(() => compileNamePattern('{a,b}'.repeat(9))).toThrow(
      `the pattern's {} groups expand to more than ${MAX_NAME_PATTERN_ALTERNATIVES} alternatives`,
    );
    expect(compileNamePattern('{a,b}'.repeat(8)).test('abababab')).toBe(true);
  });

  it('copes with deeply nested braces', () => {
    const pattern = compileNamePattern(`${'{'.repeat(400)}x${'}'.repeat(400)}`);
    expect(pattern.test('x')).toBe(true);
  });
});

describe('compilePathPattern', () => {
  it.each([
    ['**/*.md', ['a.md', 'docs/a.md', 'docs/deep/b.md'], ['a.txt', 'docs/a.md/x']],
    ['docs/*.md', ['docs/a.md'], ['a.md', 'docs/deep/b.md', 'other/a.md']],
    ['docs/**', ['docs', 'docs/a', 'docs/deep/b.md'], ['other', 'doc']],
    ['src/**/test/*.{ts,js}', ['src/test/a.ts', 'src/x/y/test/b.js'], ['src/test/a.py', 'test/a.ts']],
    ['**/**/x', ['x', 'a/x', 'a/b/x'], ['a/y']],
  ])('%s', (pattern, matching, notMatching) => {
    const compiled = compilePathPattern(pattern);
    for (const path of matching) expect([path, compiled.test(path.split('/'))]).toEqual([path, true]);
    for (const path of notMatching) expect([path, compiled.test(path.split('/'))]).toEqual([path, false]);
  });

  it('matches deep paths against many ** in linear-times-segments steps', () => {
    const compiled = compilePathPattern(`${'**/'.repeat(200)}z`);
    expect(compiled.test(Array.from({ length: 5_000 }, () => 'a'))).toBe(false);
  });

  it('treats a pattern with / or ** as a path pattern', () => {
    expect([isPathPattern('*.md'), isPathPattern('**.md'), isPathPattern('a/*')]).toEqual([false, true, true]);
  });
});
