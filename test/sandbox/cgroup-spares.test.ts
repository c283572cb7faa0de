import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRunCgroups, detectCgroupSupport, type RunCgroups } from '../../src/sandbox/cgroups.js';

/**
 * A process keeps a set of empty run cgroups ready for its next run (a rename instead of a mkdir per hierarchy), but
 * only from its second set on: a one-shot command's only run would make a set it never uses and remove it at exit.
 * A file of its own: what the module counts is per process, and each test file runs in a fresh one.
 */

const LIMITS = { memoryBytes: 64 * 1024 * 1024, maxTasks: 7, cpuSeconds: 30 };
const support = detectCgroupSupport();

/** Lets the work scheduled with setImmediate after a run's cgroups were made run. */
const nextTurns = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

function created(runId: string): RunCgroups {
  const cgroups = createRunCgroups(runId, LIMITS);
  if (cgroups === undefined) throw new Error('per-run cgroups are writable here but none were made');
  return cgroups;
}

describe.skipIf(!support.writable)('spare run cgroups', () => {
  it('are not made after a process’s first set, but from its second on, and the next run takes them', async () => {
    const first = created(`spare-first-${process.pid}`);
    const spares = [...new Set(first.directories.map((directory) => dirname(directory)))].map((parent) =>
      join(parent, `codecall-${process.pid}-spare`),
    );
    await nextTurns();
    expect(spares.filter((directory) => existsSync(directory))).toEqual([]);
    await first.dispose();

    const second = created(`spare-second-${process.pid}`);
    await nextTurns();
    expect(spares.filter((directory) => !existsSync(directory))).toEqual([]);
    await second.dispose();

    // Taken by renaming: the third run's directories exist and no spare is left until the next is made.
    const third = created(`spare-third-${process.pid}`);
    expect(spares.filter((directory) => existsSync(directory))).toEqual([]);
    expect(third.directories.filter((directory) => !existsSync(directory))).toEqual([]);
    await third.dispose();
    await nextTurns();
    expect(spares.filter((directory) => !existsSync(directory))).toEqual([]);
  });
});
