import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_OUTPUTS_RETENTION,
  OutputsPruner,
  pruneOutputs,
  resolveOutputsRetention,
} from '../../src/engine/result/outputs-retention.js';
import { captureError } from '../support/capture-error.js';

const HOUR_MS = 60 * 60 * 1000;
let outputs: string;
let keep: string;

function save(name: string, bytes: number, ageMs: number, now: number): void {
  const path = join(outputs, name);
  writeFileSync(path, Buffer.alloc(bytes));
  const time = new Date(now - ageMs);
  utimesSync(path, time, time);
}

beforeEach(() => {
  outputs = mkdtempSync(join(tmpdir(), 'codecall-outputs-'));
  keep = mkdtempSync(join(tmpdir(), 'codecall-keep-'));
});
afterEach(() => {
  for (const directory of [outputs, keep]) rmSync(directory, { recursive: true, force: true });
});

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

  it('a pruner prunes in the background once per interval, and pruneNow waits for it', async () => {
    const now = Date.now();
    save('old', 1, 2 * HOUR_MS, now);
    const pruner = new OutputsPruner(outputs, { ...DEFAULT_OUTPUTS_RETENTION, maxAgeMs: HOUR_MS });
    pruner.schedule();
    pruner.schedule();
    await pruner.pruneNow();
    expect(readdirSync(outputs)).toEqual([]);
    await pruner.close();
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
