import { setMaxListeners } from 'node:events';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileTools } from '../../src/tools/builtin-files.js';
import { regExpEngineFor } from '../../src/tools/line-search.js';
import { SearchBudget, SearchRefusedError } from '../../src/tools/search-budget.js';
import type { Tool, ToolContext } from '../../src/tools/types.js';
import { useCodecalls } from '../support/codecall-fixture.js';

/** Threads of this process: each search worker is one. */
function threadCount(): number {
  return readdirSync('/proc/self/task').length;
}

/** Samples the thread count every few milliseconds until stopped; returns the highest seen. */
function samplePeakThreads(): { stop(): number } {
  let peak = threadCount();
  const timer = setInterval(() => {
    peak = Math.max(peak, threadCount());
  }, 10);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, threadCount());
    },
  };
}

async function waitForThreads(atMost: number): Promise<number> {
  for (let attempt = 0; attempt < 200 && threadCount() > atMost; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return threadCount();
}

// Exponential backtracking on the line below, and a lookahead keeps the pattern off the linear engine.
const CATASTROPHIC_PATTERN = '^(?=a)(a+)+$';
const CATASTROPHIC_LINE = `${'a'.repeat(34)}!\n`;

const budgetOptions = {
  maxConcurrentPerRun: 1,
  timePerRunMs: 60_000,
  refillRatio: 0,
  callTimeoutMs: 15_000,
  maxRememberedRuns: 100,
};

describe('SearchBudget', () => {
  it('lets one search of a run work at a time, in order, and other runs independently', async () => {
    const budget = new SearchBudget(budgetOptions);
    const signal = new AbortController().signal;
    const order: string[] = [];
    const first = await budget.begin('run-a', signal);
    const second = budget.begin('run-a', signal).then((turn) => {
      order.push('second');
      return turn;
    });
    const third = budget.begin('run-a', signal).then((turn) => {
      order.push('third');
      return turn;
    });
    const otherRun = await budget.begin('run-b', signal);
    expect(budget.activity('run-a')).toEqual({ running: 1, waiting: 2 });
    expect(budget.activity('run-b')).toEqual({ running: 1, waiting: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual([]);
    first.end();
    first.end();
    (await second).end();
    (await third).end();
    otherRun.end();
    expect(order).toEqual(['second', 'third']);
    expect(budget.activity('run-a')).toEqual({ running: 0, waiting: 0 });
  });

  it('drops a waiting search when its call is cancelled', async () => {
    const budget = new SearchBudget(budgetOptions);
    const running = await budget.begin('run', new AbortController().signal);
    const controller = new AbortController();
    const waiting = budget.begin('run', controller.signal);
    expect(budget.activity('run').waiting).toBe(1);
    controller.abort();
    const error = await waiting.catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(SearchRefusedError);
    expect((error as SearchRefusedError).reason).toBe('cancelled');
    expect(budget.activity('run')).toEqual({ running: 1, waiting: 0 });
    running.end();
    await expect(budget.begin('run', controller.signal)).rejects.toThrow('cancelled');
  });

  it("charges each turn's time to its run, caps deadlines by what is left, and refuses a spent run", async () => {
    const budget = new SearchBudget({ ...budgetOptions, timePerRunMs: 100, callTimeoutMs: 1_000 });
    const signal = new AbortController().signal;
    const turn = await budget.begin('run', signal);
    expect(turn.limitedByRun).toBe(true);
    expect(turn.deadline).toBeLessThanOrEqual(Date.now() + 100);
    const queued = budget.begin('run', signal);
    await new Promise((resolve) => setTimeout(resolve, 120));
    turn.end();
    expect(budget.remainingMs('run')).toBe(0);
    const error = await queued.then(
      () => undefined,
      (thrown: unknown) => thrown as SearchRefusedError,
    );
    expect(error?.reason).toBe('exhausted');
    await expect(budget.begin('run', signal)).rejects.toThrow('this run has used its 0.1 s of search time');
    expect(budget.remainingMs('another-run')).toBe(100);
  });

  it('gives a spent run its time back as time passes', async () => {
    const budget = new SearchBudget({ ...budgetOptions, timePerRunMs: 50, refillRatio: 1, callTimeoutMs: 1_000 });
    const signal = new AbortController().signal;
    const turn = await budget.begin('run', signal);
    // A 120 ms turn overspends the 50 ms budget: refilling only gives back time already spent.
    const spin = performance.now();
    while (performance.now() - spin < 120) {
      // Busy, like a search.
    }
    turn.end();
    await expect(budget.begin('run', signal)).rejects.toThrow('it comes back at the rate time passes');
    while (budget.remainingMs('run') < 50) await new Promise((resolve) => setTimeout(resolve, 10));
    (await budget.begin('run', signal)).end();
  });

  it('forgets the least recently used idle runs past its memory', async () => {
    const budget = new SearchBudget({ ...budgetOptions, maxRememberedRuns: 2 });
    const signal = new AbortController().signal;
    for (const runId of ['one', 'two', 'three']) {
      const turn = await budget.begin(runId, signal);
      await new Promise((resolve) => setTimeout(resolve, 5));
      turn.end();
    }
    expect(budget.remainingMs('one')).toBe(60_000);
    expect(budget.remainingMs('three')).toBeLessThan(60_000);
  });
});

describe('search_files under a flood of catastrophic patterns', () => {
  let base: string;
  let searchFiles: Tool;

  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'codecall-search-flood-'));
    await writeFile(path.join(base, 'redos.txt'), CATASTROPHIC_LINE);
    searchFiles = createFileTools({ workspace: base }).find((tool) => tool.name === 'search_files') as Tool;
  });

  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('runs one worker at a time for a run, and stops them all when the run ends', async () => {
    expect(regExpEngineFor(new RegExp(CATASTROPHIC_PATTERN))).toBe('backtracking');
    const baseline = threadCount();
    const run = new AbortController();
    // The 32 calls share one signal here (in a run each call has its own): a waiting call listens to it.
    setMaxListeners(32, run.signal);
    const context: ToolContext = { signal: run.signal, runId: 'flood', toolName: 'search_files', artifactsDir: '' };
    const peak = samplePeakThreads();
    const calls = Array.from({ length: 32 }, () =>
      Promise.resolve(searchFiles.execute({ pattern: CATASTROPHIC_PATTERN, path: 'redos.txt' }, context)).then(
        (result) => (result as { note?: string }).note ?? 'no note',
        (error: Error) => error.message,
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    run.abort(new Error('the run has ended'));
    const outcomes = await Promise.all(calls);
    expect(peak.stop()).toBeLessThanOrEqual(baseline + 1);
    // Every call ended because its run did: none ran on to its own 15 s limit.
    for (const outcome of outcomes) expect(outcome).toContain('cancelled');
    expect(await waitForThreads(baseline)).toBeLessThanOrEqual(baseline);
  });

  it('runs the classic catastrophic pattern in linear time, with the right answer', async () => {
    await writeFile(path.join(base, 'long.txt'), `${'a'.repeat(100_000)}!\n${'a'.repeat(50)}\nb\n`);
    expect(regExpEngineFor(/^(a+)+$/)).toBe('linear');
    const context: ToolContext = {
      signal: new AbortController().signal,
      runId: 'linear',
      toolName: 'search_files',
      artifactsDir: '',
    };
    const result = (await searchFiles.execute({ pattern: '^(a+)+$', path: 'long.txt' }, context)) as {
      matches: unknown[];
      truncated: boolean;
    };
    expect(result).toMatchObject({ matches: [{ path: 'long.txt', line: 2, text: 'a'.repeat(50) }], truncated: false });
    const insensitive = (await searchFiles.execute({ pattern: '(?i)^(A+)+$', path: 'long.txt' }, context)) as {
      matches: Array<{ line: number }>;
    };
    expect(insensitive.matches.map((match) => match.line)).toEqual([2]);
  });
});

describe('a run flooding search_files with catastrophic patterns', () => {
  const codecallWith = useCodecalls();
  let workspace: string;

  beforeAll(async () => {
    workspace = await mkdtemp(path.join(tmpdir(), 'codecall-search-run-'));
    await writeFile(path.join(workspace, 'redos.txt'), CATASTROPHIC_LINE);
  });

  afterAll(async () => {
    await rm(workspace, { recursive: true, force: true });
  });

  it('costs the host one worker while it runs, and nothing once it is stopped', async () => {
    const codecall = codecallWith({ builtinTools: ['files'], workspace, limits: { timeoutMs: 3_000 } });
    await codecall.execute('print(1)');
    const baseline = threadCount();
    const peak = samplePeakThreads();
    const result = await codecall.execute(
      [
        'import asyncio, tools',
        'async def main():',
        `    calls = [tools.aio.search_files(pattern=${JSON.stringify(CATASTROPHIC_PATTERN)}, path="redos.txt") for _ in range(64)]`,
        '    await asyncio.gather(*calls, return_exceptions=True)',
        'asyncio.run(main())',
      ].join('\n'),
    );
    expect(result.status).toBe('timeout');
    expect(peak.stop()).toBeLessThanOrEqual(baseline + 1);
    expect(await waitForThreads(baseline)).toBeLessThanOrEqual(baseline);
  });
});
