import { spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostCacheDirectory, writeHostCache } from '../../src/core/host-cache.js';
import {
  isLeftoverStage,
  LEFTOVER_SWEEP_INTERVAL_MS,
  LEFTOVER_SWEEP_STAMP,
  MAX_SWEEP_STAMPS,
  pidNamespaceOf,
  STAGE_PREFIX,
  stageDirectoryName,
  sweepLeftoverStages,
  sweepLeftoverStagesOnce,
  sweepLeftoverStagesWhenDue,
  UNNAMESPACED_STAGE_MIN_AGE_MS,
} from '../../src/sandbox/stage-leftovers.js';

/**
 * Stage directories of the inline staging are removed when their process exits; a process killed outright leaves its
 * stage behind. The next process that stages removes those of processes that are gone, and never one that may still
 * be in use: its maker alive, or in another pid namespace, where its pid says nothing.
 */

const parent = mkdtempSync(join(tmpdir(), 'codecall-stage-leftovers-'));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

/** A pid no process has any more: that of a child that has exited and been reaped. */
function deadPid(): number {
  const pid = spawnSync('true').pid;
  if (pid === undefined) throw new Error('could not start true');
  return pid;
}

/** A stage as the staging makes it: mount points and a 0600 mount table. */
function makeStage(directory: string, name: string): string {
  const stage = join(directory, name);
  mkdirSync(join(stage, '0'), { recursive: true });
  mkdirSync(join(stage, '1'));
  writeFileSync(join(stage, 'mounts'), '/x /y none bind,ro 0 0\n', { mode: 0o600 });
  return stage;
}

describe('stage leftovers', () => {
  const namespace = pidNamespaceOf();

  it("names a stage after this process's pid and pid namespace", () => {
    expect(namespace).toMatch(/^\d+$/);
    const name = stageDirectoryName();
    expect(name.startsWith(`${STAGE_PREFIX}${process.pid}-${namespace}-`)).toBe(true);
    expect(stageDirectoryName()).not.toBe(name);
  });

  it("removes the stages of gone processes of this pid namespace, and keeps the living ones', other namespaces' and other entries", async () => {
    const directory = mkdtempSync(join(parent, 'files-'));
    const gone = deadPid();
    const leftover = makeStage(directory, `stage-${gone}-${namespace}-0a1b2c3d`);
    const living = makeStage(directory, `stage-${process.pid}-${namespace}-0a1b2c3d`);
    const otherNamespace = makeStage(directory, `stage-${gone}-1${namespace}-0a1b2c3d`);
    const recentUnnamespaced = makeStage(directory, `stage-${gone}-0a1b2c3d`);
    const oldUnnamespaced = makeStage(directory, `stage-${gone}-4e5f6a7b`);
    const dayAndMore = (Date.now() - UNNAMESPACED_STAGE_MIN_AGE_MS - 60_000) / 1000;
    utimesSync(oldUnnamespaced, dayAndMore, dayAndMore);
    const livingUnnamespaced = makeStage(directory, `stage-${process.pid}-8c9d0e1f`);
    utimesSync(livingUnnamespaced, dayAndMore, dayAndMore);
    writeFileSync(join(directory, `group-${gone}`), 'root:x:0:\n');

    expect(await sweepLeftoverStages(directory)).toBe(2);
    expect(existsSync(leftover)).toBe(false);
    expect(existsSync(oldUnnamespaced)).toBe(false);
    for (const kept of [living, otherNamespace, recentUnnamespaced, livingUnnamespaced]) {
      expect(readdirSync(kept).sort()).toEqual(['0', '1', 'mounts']);
    }
    expect(existsSync(join(directory, `group-${gone}`))).toBe(true);
  });

  it('sweeps a folder once per process', async () => {
    const directory = mkdtempSync(join(parent, 'files-'));
    const stamps = () => undefined;
    expect(await sweepLeftoverStagesOnce(directory, stamps)).toBe(0);
    const leftover = makeStage(directory, `stage-${deadPid()}-${namespace}-0a1b2c3d`);
    expect(await sweepLeftoverStagesOnce(directory, stamps)).toBeUndefined();
    expect(existsSync(leftover)).toBe(true);
  });

  it('sweeps a folder at most once an interval across processes sharing a host cache folder', async () => {
    const directory = mkdtempSync(join(parent, 'files-'));
    const cache = hostCacheDirectory(mkdtempSync(join(parent, 'state-'))) as string;
    const started = Date.now();
    expect(await sweepLeftoverStagesWhenDue(directory, cache, started)).toBe(0);
    // Another process within the interval: the stamp says the folder was swept.
    const leftover = makeStage(directory, `stage-${deadPid()}-${namespace}-0a1b2c3d`);
    expect(
      await sweepLeftoverStagesWhenDue(directory, cache, started + LEFTOVER_SWEEP_INTERVAL_MS - 1),
    ).toBeUndefined();
    expect(existsSync(leftover)).toBe(true);
    // Another folder has a stamp of its own.
    expect(await sweepLeftoverStagesWhenDue(mkdtempSync(join(parent, 'files-')), cache, started + 1)).toBe(0);
    // Once the interval is over, the next process sweeps, and stamps again.
    expect(await sweepLeftoverStagesWhenDue(directory, cache, started + LEFTOVER_SWEEP_INTERVAL_MS)).toBe(1);
    expect(existsSync(leftover)).toBe(false);
    const again = makeStage(directory, `stage-${deadPid()}-${namespace}-0a1b2c3d`);
    expect(
      await sweepLeftoverStagesWhenDue(directory, cache, started + LEFTOVER_SWEEP_INTERVAL_MS + 1),
    ).toBeUndefined();
    expect(existsSync(again)).toBe(true);
    // Without a host cache folder, every call sweeps.
    expect(await sweepLeftoverStagesWhenDue(directory, undefined, started)).toBe(1);
  });

  it("ignores a stamp that is another user's, invalid, for another folder or from the future", async () => {
    const directory = mkdtempSync(join(parent, 'files-'));
    const cache = hostCacheDirectory(mkdtempSync(join(parent, 'state-'))) as string;
    const now = Date.now();
    expect(await sweepLeftoverStagesWhenDue(directory, cache, now)).toBe(0);
    const [stamp] = readdirSync(cache).filter((name) => name.startsWith(LEFTOVER_SWEEP_STAMP));
    if (stamp === undefined) throw new Error('no stamp written');
    const stampPath = join(cache, stamp);
    const entry = stamp.slice(0, -'.json'.length);
    const sweptWith = async (change: () => void): Promise<boolean> => {
      const leftover = makeStage(directory, `stage-${deadPid()}-${namespace}-0a1b2c3d`);
      change();
      await sweepLeftoverStagesWhenDue(directory, cache, now + 1);
      const swept = !existsSync(leftover);
      rmSync(leftover, { recursive: true, force: true });
      // A fresh, valid stamp for the next case.
      rmSync(stampPath, { force: true });
      writeHostCache(cache, entry, directory, now);
      return swept;
    };
    expect(await sweptWith(() => {})).toBe(false);
    expect(await sweptWith(() => chownSync(stampPath, 12_345, 12_345))).toBe(true);
    expect(await sweptWith(() => writeFileSync(stampPath, 'not json'))).toBe(true);
    expect(await sweptWith(() => writeHostCache(cache, entry, directory, 'yesterday'))).toBe(true);
    expect(await sweptWith(() => writeHostCache(cache, entry, directory, now + LEFTOVER_SWEEP_INTERVAL_MS))).toBe(true);
    expect(
      await sweptWith(() => {
        rmSync(stampPath);
        writeHostCache(cache, entry, join(directory, 'other'), now);
      }),
    ).toBe(true);
  });

  it('keeps the stamps of the folders swept last only', async () => {
    const cache = hostCacheDirectory(mkdtempSync(join(parent, 'state-'))) as string;
    const now = Date.now();
    for (let folder = 0; folder < MAX_SWEEP_STAMPS + 3; folder += 1) {
      await sweepLeftoverStagesWhenDue(mkdtempSync(join(parent, 'files-')), cache, now);
    }
    expect(readdirSync(cache).filter((name) => name.startsWith(LEFTOVER_SWEEP_STAMP))).toHaveLength(MAX_SWEEP_STAMPS);
  });

  it('removes a link named like a leftover stage without following it', async () => {
    const directory = mkdtempSync(join(parent, 'files-'));
    const target = mkdtempSync(join(parent, 'target-'));
    writeFileSync(join(target, 'precious'), 'kept\n');
    const link = join(directory, `stage-${deadPid()}-${namespace}-0a1b2c3d`);
    symlinkSync(target, link);
    expect(await sweepLeftoverStages(directory)).toBe(1);
    expect(existsSync(link)).toBe(false);
    expect(readdirSync(target)).toEqual(['precious']);
  });

  it('keeps every stage when its own pid namespace is unknown', () => {
    const gone = deadPid();
    expect(isLeftoverStage(`stage-${gone}-4026531836-0a1b2c3d`, () => 0, Date.now(), null)).toBe(false);
    expect(isLeftoverStage(`stage-${gone}-4026531836-0a1b2c3d`, () => 0, Date.now(), '4026531836')).toBe(true);
    expect(pidNamespaceOf(join(parent, 'no-such-link'))).toBeNull();
  });

  it('sweeps nothing and does not fail where the folder does not exist', async () => {
    expect(await sweepLeftoverStages(join(parent, 'missing'))).toBe(0);
  });
});
