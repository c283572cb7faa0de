import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRunCgroups, detectCgroupSupport, parseCgroupLayout } from '../../src/sandbox/cgroups.js';
import { eventually } from './support/sandbox-fixture.js';

/** cgroup layout detection (v1, v2, hybrid, cgroup namespaces) and the life cycle of a run's cgroups. */

const V1_MOUNTINFO = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');
const V1_OWN = [
  '9:name=systemd:/',
  '8:pids:/',
  '6:freezer:/',
  '4:memory:/machine.slice/runner-7.scope',
  '2:cpuacct:/',
  '1:cpu:/',
  '0::/',
].join('\n');

describe('parseCgroupLayout', () => {
  it('reads cgroup v1 hierarchies (a hybrid unified mount aside) and nests memory under our own cgroup', () => {
    const layout = parseCgroupLayout(V1_MOUNTINFO, V1_OWN);
    expect(layout?.version).toBe(1);
    if (layout?.version !== 1) return;
    const byController = Object.fromEntries(
      layout.hierarchies.flatMap((hierarchy) => hierarchy.controllers.map((c) => [c, hierarchy.ownDirectory])),
    );
    expect(byController).toEqual({
      cpu: '/sys/fs/cgroup/cpu',
      cpuacct: '/sys/fs/cgroup/cpuacct',
      memory: '/sys/fs/cgroup/memory/machine.slice/runner-7.scope',
      freezer: '/sys/fs/cgroup/freezer',
      pids: '/sys/fs/cgroup/pids',
    });
  });

  it('keeps one hierarchy for co-mounted controllers (cpu,cpuacct)', () => {
    const layout = parseCgroupLayout(
      [
        '30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct',
        '31 25 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids',
      ].join('\n'),
      '4:cpu,cpuacct:/user.slice\n3:pids:/user.slice/user-1000.slice\n',
    );
    expect(layout).toEqual({
      version: 1,
      hierarchies: [
        { controllers: ['cpu', 'cpuacct'], ownDirectory: '/sys/fs/cgroup/cpu,cpuacct/user.slice' },
        { controllers: ['pids'], ownDirectory: '/sys/fs/cgroup/pids/user.slice/user-1000.slice' },
      ],
    });
  });

  it('reads the unified hierarchy of cgroup v2', () => {
    expect(
      parseCgroupLayout(
        '35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot',
        '0::/user.slice/user-1000.slice/session-3.scope\n',
      ),
    ).toEqual({
      version: 2,
      mountPoint: '/sys/fs/cgroup',
      ownDirectory: '/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope',
    });
  });

  it('maps our cgroup path through a mount of a subtree (containers)', () => {
    expect(
      parseCgroupLayout(
        '600 590 0:30 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw',
        '0::/docker/abc/app\n',
      ),
    ).toMatchObject({ version: 2, ownDirectory: '/sys/fs/cgroup/app' });
  });

  it('returns undefined when nothing is mounted', () => {
    expect(parseCgroupLayout('22 1 0:21 / /proc rw - proc proc rw', '0::/\n')).toBeUndefined();
  });
});

const support = detectCgroupSupport();
if (!support.writable) console.warn(`[cgroup tests] live cgroup tests skipped: ${support.reason}`);

describe.skipIf(!support.writable)('a run’s cgroups on this machine', () => {
  it('are created with the limits, hold what joins them, kill everything in them and go away', async () => {
    const cgroups = createRunCgroups(`test${process.pid}`, {
      memoryBytes: 64 * 1024 * 1024,
      maxTasks: 7,
      cpuSeconds: 30,
    });
    expect(cgroups).toBeDefined();
    if (cgroups === undefined) return;
    try {
      const pidsDirectory = cgroups.directories.find((directory) => existsSync(join(directory, 'pids.max')));
      if (pidsDirectory !== undefined) {
        expect(readFileSync(join(pidsDirectory, 'pids.max'), 'utf8').trim()).toBe('7');
      }
      const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
      const exited = new Promise((resolve) => sleeper.once('exit', resolve));
      cgroups.join([sleeper.pid as number]);
      for (const directory of cgroups.directories) {
        expect(readFileSync(join(directory, 'cgroup.procs'), 'utf8')).toContain(String(sleeper.pid));
      }
      expect(cgroups.limitReason()).toBeUndefined();
      await cgroups.killAll();
      await exited;
      expect(sleeper.signalCode).toBe('SIGKILL');
    } finally {
      await cgroups.dispose();
    }
    expect(await eventually(() => cgroups.directories.every((directory) => !existsSync(directory)))).toBe(true);
  });
});
