import { describe, expect, it } from 'vitest';
import { startLineSearch } from '../../src/tools/line-search.js';

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

  it('stops a catastrophically backtracking pattern at the deadline while the host stays responsive', async () => {
    // The lookahead keeps it off the linear engine.
    const search = startLineSearch({ pattern: /^(?=a)(a+)+$/, maxLineChars: 100 });
    expect(search.engine).toBe('backtracking');
    let ticks = 0;
    const ticker = setInterval(() => {
      ticks += 1;
    }, 20);
    const started = Date.now();
    try {
      const outcome = await search.search(`${'a'.repeat(40)}b`, 10, Date.now() + 500);
      expect(outcome).toEqual({ timedOut: true });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(ticks).toBeGreaterThan(5);
    } finally {
      clearInterval(ticker);
      await search.close();
    }
  });
});
