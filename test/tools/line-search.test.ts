import { describe, expect, it } from 'vitest';
import { lowerCasePattern, regExpEngineFor, startLineSearch } from '../../src/tools/line-search.js';

describe('startLineSearch', () => {
  it('matches line by line with 1-based numbers, without line endings', async () => {
    const search = startLineSearch({ pattern: /b/, maxLineChars: 100 });
    try {
      const outcome = await search.search('a\r\nb1\n\nb2\nc\n', 10, Date.now() + 10_000);
      expect(outcome).toEqual({
        timedOut: false,
        matches: [
          { line: 2, text: 'b1' },
          { line: 4, text: 'b2' },
        ],
      });
      expect(await search.search('bbb\nb', 1, Date.now() + 10_000)).toEqual({
        timedOut: false,
        matches: [{ line: 1, text: 'bbb' }],
      });
    } finally {
      await search.close();
    }
  });

  it('cuts long lines', async () => {
    const search = startLineSearch({ pattern: /x/, maxLineChars: 5 });
    try {
      expect(await search.search('x'.repeat(20), 10, Date.now() + 10_000)).toEqual({
        timedOut: false,
        matches: [{ line: 1, text: 'xxxxx…' }],
      });
    } finally {
      await search.close();
    }
  });

  // 2^40 steps: without the deadline the search would never end (and the test would time out). A host timer due before
  // the deadline fires before the search ends, which a search blocking the host's thread would not allow.
  it('stops a catastrophically backtracking pattern at the deadline while the host stays responsive', async () => {
    // The lookahead keeps it off the linear engine.
    const search = startLineSearch({ pattern: /^(?=a)(a+)+$/, maxLineChars: 100 });
    expect(search.engine).toBe('backtracking');
    const events: string[] = [];
    const timer = setTimeout(() => events.push('host timer'), 20);
    try {
      const outcome = await search.search(`${'a'.repeat(40)}b`, 10, Date.now() + 500);
      events.push('search ended');
      expect(outcome).toEqual({ timedOut: true });
      expect(events).toEqual(['host timer', 'search ended']);
    } finally {
      clearTimeout(timer);
      await search.close();
    }
  });
});

describe('the linear engine', () => {
  it.each([
    [/^(a+)+$/, 'linear'],
    [/(x+x+)+y/, 'linear'],
    [/todo/i, 'linear'],
    [/[A-Z]+\d/i, 'linear'],
    [/(a)\1/, 'backtracking'],
    [/(?<=a)b/, 'backtracking'],
    [/a(?=b)/, 'backtracking'],
    [/\p{L}/u, 'backtracking'],
    [/\x41/i, 'backtracking'],
    [/[A-z]/i, 'backtracking'],
  ])('runs %s on the %s engine', (pattern, engine) => {
    expect(regExpEngineFor(pattern)).toBe(engine);
  });

  it.each([
    ['TODO', 'todo'],
    ['[A-Z]+\\d', '[a-z]+\\d'],
    ['\\bError\\b: \\D\\W\\S', '\\berror\\b: \\D\\W\\S'],
    ['[^A-F]x', '[^a-f]x'],
    ['ÉTÉ', 'été'],
  ])('lower-cases %j to %j for case-insensitive linear matching', (source, lowered) => {
    expect(lowerCasePattern(source)).toBe(lowered);
  });

  it.each(['\\x41', '\\u0041', '\\cJ', '(?<N>a)\\k<N>', '[A-z]', '[0-Z]', '\u{1D49C}', 'İ'])(
    'keeps %j on the backtracking engine rather than change its meaning',
    (source) => {
      expect(lowerCasePattern(source)).toBeUndefined();
    },
  );

  it('finds the same lines as the backtracking engine', async () => {
    const lines = [
      'TODO: write tests',
      'todo later',
      'Error: disk full',
      'errors: none',
      'ÉTÉ 2024',
      'été',
      'ABC123',
      'abc',
      // Short enough for the backtracking engine that computes the expected lines.
      'x'.repeat(12),
      'xxxy',
      '  # comment',
      'key = VALUE_1',
      'FFFF',
      '0x1f2e',
      '[brackets]',
      '',
    ];
    const patterns: Array<[string, string]> = [
      ['todo', 'i'],
      ['^todo', 'i'],
      ['\\berror\\b', 'i'],
      ['ÉTÉ', 'i'],
      ['[a-z]+\\d', 'i'],
      ['[^A-F0-9]', 'i'],
      ['^[A-F0-9]{4}$', 'i'],
      ['(x+x+)+y', ''],
      ['^\\s*#', ''],
      ['VALUE_\\d', ''],
      ['\\[\\w+\\]', 'i'],
      ['^$', ''],
      ['a|b|c', 'i'],
      ['(?:ab|abc)+\\d*', 'i'],
    ];
    const text = `${lines.join('\n')}\n`;
    for (const [source, flags] of patterns) {
      const pattern = new RegExp(source, flags);
      const expected = lines.flatMap((line, index) => (pattern.test(line) ? [index + 1] : []));
      const search = startLineSearch({ pattern, maxLineChars: 100 });
      try {
        expect(search.engine).toBe('linear');
        const outcome = await search.search(text, 100, Date.now() + 10_000);
        expect(outcome.timedOut ? 'timed out' : outcome.matches.map((match) => match.line)).toEqual(expected);
      } finally {
        await search.close();
      }
    }
  });

  it('stops the worker when its signal fires, mid-search', async () => {
    const controller = new AbortController();
    const search = startLineSearch({ pattern: /^(?=a)(a+)+$/, maxLineChars: 100, signal: controller.signal });
    const pending = search.search(`${'a'.repeat(40)}!`, 10, Date.now() + 60_000);
    setTimeout(() => controller.abort(), 100);
    await expect(pending).rejects.toThrow('the search was cancelled');
    await search.close();
  });
});
