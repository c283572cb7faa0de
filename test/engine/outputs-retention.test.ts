import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_OUTPUTS_RETENTION,
  OUTPUTS_PRUNE_STAMP,
  OutputsPruner,
  PRUNE_FILES_PER_TURN,
  pruneOutputs,
  resolveOutputsRetention,
} from '../../src/engine/result/outputs-retention.js';
import { captureError } from '../support/capture-error.js';

const HOUR_MS = 60 * 60 * 1000;
let outputs: string;
let keep: string;
let cache: string;

function save(name: string, bytes: number, ageMs: number, now: number): void {
  const path = join(outputs, name);
  writeFileSync(path, Buffer.alloc(bytes));
  const time = new Date(now - ageMs);
  utimesSync(path, time, time);
}

beforeEach(() => {
  outputs = mkdtempSync(join(tmpdir(), 'codecall-outputs-'));
  keep = mkdtempSync(join(tmpdir(), 'codecall-keep-'));
  cache = mkdtempSync(join(tmpdir(), 'codecall-cache-'));
});
afterEach(() => {
  for (const directory of [outputs, keep, cache]) rmSync(directory, { recursive: true, force: true });
});

/** Saves `count` entries (a file, or a folder of two files, in turn), the last one the newest. */
function saveMany(count: number, prefix: string, now: number): string[] {
  const names: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const name = `${prefix}${String(index).padStart(4, '0')}`;
    const time = new Date(now - (count - index) * 1000);
    if (index % 2 === 0) {
      save(name, 10, now - time.getTime(), now);
    } else {
      const folder = join(outputs, name);
      mkdirSync(folder);
      for (const file of ['a.png', 'b.csv']) {
        writeFileSync(join(folder, file), Buffer.alloc(5));
        utimesSync(join(folder, file), time, time);
      }
      utimesSync(folder, time, time);
    }
    names.push(name);
  }
  return names;
}

/** A pruner of the test's outputs folder sharing the test's stamp folder, as another process would. */
function pruner(maxRuns: number): OutputsPruner {
  return new OutputsPruner(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns }, { stampDirectory: cache });
}

/** Rewrites the recorded time of the last prune, as a forger with access to the cache folder would. */
function forgeStamp(value: unknown): void {
  const path = join(cache, `${OUTPUTS_PRUNE_STAMP}.json`);
  const entry = JSON.parse(readFileSync(path, 'utf8')) as { facts: { value: unknown }[] };
  for (const fact of entry.facts) fact.value = value;
  writeFileSync(path, JSON.stringify(entry), { mode: 0o600 });
}

describe('outputs retention', () => {
  it('removes entries older than maxAgeMs and keeps the newer ones', async () => {
    const now = Date.now();
    save('old-stdout.txt', 10, 3 * HOUR_MS, now);
    save('new-stdout.txt', 10, 0, now);
    const report = await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxAgeMs: HOUR_MS }, now);
    expect(readdirSync(outputs)).toEqual(['new-stdout.txt']);
    expect(report).toMatchObject({ removedEntries: 1, removedBytes: 10, keptEntries: 1 });
  });

  it('keeps the newest maxRuns entries, folders counted with their files', async () => {
    const now = Date.now();
    for (let index = 0; index < 5; index += 1) {
      const folder = join(outputs, `run${index}`);
      mkdirSync(folder);
      writeFileSync(join(folder, 'chart.png'), Buffer.alloc(100));
      const time = new Date(now - (5 - index) * 1000);
      utimesSync(join(folder, 'chart.png'), time, time);
      utimesSync(folder, time, time);
    }
    const report = await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 2 }, now);
    expect(readdirSync(outputs).sort()).toEqual(['run3', 'run4']);
    expect(report).toMatchObject({ removedEntries: 3, removedBytes: 300, keptBytes: 200 });
  });

  it('removes the oldest until the rest fits maxBytes', async () => {
    const now = Date.now();
    save('a', 400, 3000, now);
    save('b', 400, 2000, now);
    save('c', 400, 1000, now);
    await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxBytes: 900 }, now);
    expect(readdirSync(outputs).sort()).toEqual(['b', 'c']);
  });

  it('removes a link without touching what it points to', async () => {
    const now = Date.now();
    writeFileSync(join(keep, 'precious.txt'), 'keep me');
    symlinkSync(keep, join(outputs, 'link-to-folder'));
    await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 0 }, now);
    expect(readdirSync(outputs)).toEqual([]);
    expect(readdirSync(keep)).toEqual(['precious.txt']);
  });

  it('a pruner prunes in the background once per interval, and close waits for it', async () => {
    const now = Date.now();
    save('old', 1, 2 * HOUR_MS, now);
    const pruner = new OutputsPruner(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxAgeMs: HOUR_MS });
    pruner.schedule(false);
    pruner.schedule(false);
    await pruner.close();
    expect(readdirSync(outputs)).toEqual([]);
  });

  it('close prunes what a run saved after the last prune started', async () => {
    const now = Date.now();
    saveMany(3, 'first', now - 10_000);
    const closing = pruner(3);
    closing.schedule(true);
    // Saved while the first prune runs or after it: the next prune waits for the interval, close does it now.
    const last = saveMany(2, 'last', now);
    closing.schedule(true);
    await closing.close();
    expect(readdirSync(outputs).sort()).toEqual(['first0002', ...last]);
  });

  it('close does not list the folder again when no run saved anything since the last prune', async () => {
    const now = Date.now();
    const closing = new OutputsPruner(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 2 });
    closing.schedule(true);
    await closing.close();
    // Not pruned by a listing at close: these stay until the next prune.
    saveMany(4, 'later', now);
    closing.schedule(false);
    await closing.close();
    expect(readdirSync(outputs)).toHaveLength(4);
    await closing.close({ saved: true });
    expect(readdirSync(outputs)).toHaveLength(2);
  });

  it('skips a prune another process did within the interval unless this one saved something', async () => {
    const now = Date.now();
    const first = pruner(2);
    first.schedule(false);
    await first.close();
    saveMany(4, 'entry', now);
    const second = pruner(2);
    second.schedule(false);
    await second.close();
    expect(readdirSync(outputs)).toHaveLength(4);
    // A prune under another retention is not one under this one.
    const otherRetention = pruner(3);
    otherRetention.schedule(false);
    await otherRetention.close();
    expect(readdirSync(outputs)).toHaveLength(3);
    const saving = pruner(2);
    saving.schedule(true);
    await saving.close();
    expect(readdirSync(outputs).sort()).toEqual(['entry0002', 'entry0003']);
  });

  it('a stamp in the future or not a time does not skip a prune', async () => {
    const now = Date.now();
    const first = pruner(1);
    first.schedule(false);
    await first.close();
    for (const [index, forged] of [now + HOUR_MS, 'now', Number.NaN, null].entries()) {
      saveMany(2, `forged${index}-`, now);
      forgeStamp(forged);
      const next = pruner(1);
      next.schedule(false);
      await next.close();
      expect(readdirSync(outputs)).toHaveLength(1);
    }
    writeFileSync(join(cache, `${OUTPUTS_PRUNE_STAMP}.json`), '{"version": 2, "fa');
    saveMany(2, 'garbled', now);
    const afterGarbled = pruner(1);
    afterGarbled.schedule(false);
    await afterGarbled.close();
    expect(readdirSync(outputs)).toHaveLength(1);
  });

  it('prunes many entries in slices of the event loop and removes exactly the oldest', async () => {
    const now = Date.now();
    const names = saveMany(300, 'entry', now);
    let turns = 0;
    let pruning = true;
    const count = () => {
      turns += 1;
      if (pruning) setImmediate(count);
    };
    setImmediate(count);
    const report = await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 120 }, now);
    pruning = false;
    expect(readdirSync(outputs).sort()).toEqual(names.slice(180));
    expect(report).toMatchObject({ removedEntries: 180, keptEntries: 120, removedBytes: 90 * 10 + 90 * 10 });
    // 300 entries of 450 files measured, 180 of 270 removed: the loop turned between slices.
    expect(turns).toBeGreaterThanOrEqual(Math.floor((450 + 270) / PRUNE_FILES_PER_TURN) - 1);
  });

  it('measures and removes a folder without following the links inside it', async () => {
    const now = Date.now();
    writeFileSync(join(keep, 'precious.bin'), Buffer.alloc(4096));
    const folder = join(outputs, 'run');
    mkdirSync(folder);
    writeFileSync(join(folder, 'chart.png'), Buffer.alloc(10));
    symlinkSync(join(keep, 'precious.bin'), join(folder, 'link-to-file'));
    symlinkSync(keep, join(folder, 'link-to-folder'));
    symlinkSync(join(keep, 'precious.bin'), join(outputs, 'link-to-file'));
    const report = await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxBytes: 5 }, now);
    expect(report).toMatchObject({ removedEntries: 1, removedBytes: 10, keptEntries: 1, keptBytes: 0 });
    expect(readdirSync(outputs)).toEqual(['link-to-file']);
    await pruneOutputs(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 0 }, now);
    expect(readdirSync(outputs)).toEqual([]);
    expect(readdirSync(keep)).toEqual(['precious.bin']);
    expect(readFileSync(join(keep, 'precious.bin'))).toHaveLength(4096);
  });

  it('validates the option and names the bad key or value', async () => {
    expect(resolveOutputsRetention(undefined)).toBe(DEFAULT_OUTPUTS_RETENTION);
    expect(resolveOutputsRetention({ maxRuns: 3 })).toEqual({ ...DEFAULT_OUTPUTS_RETENTION, maxRuns: 3 });
    const unknown = captureError(() => resolveOutputsRetention({ maxFiles: 3 }));
    expect(unknown).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(String(unknown)).toContain('maxFiles');
    const negative = captureError(() => resolveOutputsRetention({ maxBytes: -1 }));
    expect(String(negative)).toContain('outputs.maxBytes');
    expect(captureError(() => resolveOutputsRetention('big'))).toMatchObject({ code: 'INVALID_CONFIG' });
  });
});
