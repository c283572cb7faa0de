import {
  existsSync,
  type FSWatcher,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmdirSync,
  rmSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { hostCacheDirectory } from '../../src/core/host-cache.js';
import { detectCgroupSupport, readCgroupLayout } from '../../src/sandbox/cgroups.js';

/**
 * The cgroup verdict kept in the host cache: a process that finds a valid one makes no trial cgroup; one kept under
 * another key (another kernel, mount table, cgroup of the process) is not used; one that a run's cgroups contradict is
 * detected again with a trial.
 */

const support = detectCgroupSupport();
if (!support.writable) console.warn(`[cgroup verdict tests] skipped: ${support.reason}`);

/** A fresh copy of the cgroup module, as a new host process would load it. */
async function freshCgroups() {
  vi.resetModules();
  return await import('../../src/sandbox/cgroups.js');
}

/** The folders trial cgroups of this process are made in: this process's own cgroup of each hierarchy (v1), or the v2 parents. */
function trialParents(): string[] {
  const layout = readCgroupLayout();
  if (layout === undefined) return [];
  if (layout.version === 1) return layout.hierarchies.map((hierarchy) => hierarchy.ownDirectory);
  return [join(layout.mountPoint, 'codecall'), dirname(layout.ownDirectory)].filter((parent) => existsSync(parent));
}

const TRIAL_NAME = `codecall-${process.pid}-probe`;

/** Counts the trial cgroups made (and removed) in the parents while `action` runs, through inotify. */
async function trialsDuring(action: () => unknown): Promise<number> {
  let seen = 0;
  const watchers: FSWatcher[] = trialParents().map((parent) =>
    watch(parent, (_event, name) => {
      if (name === TRIAL_NAME) seen += 1;
    }),
  );
  try {
    await action();
    // inotify events arrive on the event loop.
    await sleep(50);
  } finally {
    for (const watcher of watchers) watcher.close();
  }
  return seen;
}

describe.skipIf(!support.writable)('the cgroup verdict kept across processes', () => {
  let root: string;
  let cacheDirectory: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'codecall-cgroup-verdict-'));
    cacheDirectory = hostCacheDirectory(join(root, 'state')) ?? '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('makes trial cgroups once, then none while the verdict fits', async () => {
    let first: unknown;
    const firstTrials = await trialsDuring(async () => {
      first = (await freshCgroups()).detectCgroupSupport({ cacheDirectory });
    });
    expect(firstTrials).toBeGreaterThan(0);
    expect(first).toEqual(support);

    let second: unknown;
    const secondTrials = await trialsDuring(async () => {
      second = (await freshCgroups()).detectCgroupSupport({ cacheDirectory });
    });
    expect(secondTrials).toBe(0);
    expect(second).toEqual(support);
  });

  it('does not use a verdict kept under another key (another kernel)', async () => {
    (await freshCgroups()).detectCgroupSupport({ cacheDirectory });
    const file = join(cacheDirectory, 'cgroup-support.json');
    const entry = JSON.parse(readFileSync(file, 'utf8')) as { facts: { key: { kernel: string } }[] };
    for (const fact of entry.facts) fact.key.kernel = `${fact.key.kernel}-other`;
    writeFileSync(file, JSON.stringify(entry));
    const trials = await trialsDuring(async () => {
      expect((await freshCgroups()).detectCgroupSupport({ cacheDirectory })).toEqual(support);
    });
    expect(trials).toBeGreaterThan(0);
  });

  it('detects again with a trial when a run’s cgroups cannot be made under a kept verdict', async () => {
    (await freshCgroups()).detectCgroupSupport({ cacheDirectory });
    const cgroups = await freshCgroups();
    expect(cgroups.detectCgroupSupport({ cacheDirectory })).toEqual(support);
    // The run's cgroup exists already: making it fails, as a verdict that no longer holds would.
    const runId = `verdict${Date.now()}`;
    const parent = trialParents()[0] as string;
    const blocker = join(parent, `codecall-${process.pid}-${runId}`);
    mkdirSync(blocker);
    try {
      const trials = await trialsDuring(() => {
        expect(() => cgroups.createRunCgroups(runId, { memoryBytes: 2 ** 26, maxTasks: 8, cpuSeconds: 10 })).toThrow();
      });
      expect(trials).toBeGreaterThan(0);
    } finally {
      rmdirSync(blocker);
    }
  });
});
