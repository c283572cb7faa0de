import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SEARCH_TIME_PER_RUN_MS, SEARCH_TIME_REFILL_RATIO, SEARCH_TIMEOUT_MS } from '../../src/tools/builtin-files.js';

/** The search budget's figures as the README and docs/sandbox.md state them, from the constants the code uses. */
const seconds = (milliseconds: number) => milliseconds / 1000;
const documents = ['README.md', 'docs/sandbox.md'].map((path) => ({
  path,
  text: readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8').replace(/\s+/g, ' '),
}));

describe("the search budget's figures in the docs", () => {
  it.each(documents)('$path states the call limit, the run budget and its refill the code uses', ({ path, text }) => {
    const perCall = seconds(SEARCH_TIMEOUT_MS);
    const perRun = seconds(SEARCH_TIME_PER_RUN_MS);
    const refill = `1 s every ${1 / SEARCH_TIME_REFILL_RATIO} s`;
    const limits = new RegExp(`\\b${perCall} s\\b[^.]*\\b${perRun} s\\b`);
    expect(limits.test(text), `${path} states ${perCall} s per call and ${perRun} s per run`).toBe(true);
    expect(text.includes(refill), `${path} states "${refill}"`).toBe(true);
  });
});
