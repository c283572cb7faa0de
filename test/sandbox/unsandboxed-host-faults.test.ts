import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { RUN_UID_RANGE_VARIABLE, runUidAllocator } from '../../src/sandbox/run-uids.js';
import { processAlive } from '../support/codecall-fixture.js';
import { eventually } from './support/sandbox-fixture.js';

/**
 * Isolation `none` and a host SIGKILLed mid-run (item 3 of issue 10): the interpreters of runs, sessions and the
 * warm pool die with it (PR_SET_PDEATHSIG), and one that undid that for itself dies when its uid is claimed again.
 */

const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
const HOST_PROCESS = join(REPOSITORY, 'test/fixtures/sandbox/unsandboxed-host-process.ts');
const VITE_NODE = join(REPOSITORY, 'node_modules/.bin/vite-node');
/** A range of this file's own, so the uid the dead host left is the first one a claim here meets. */
const FIRST = 2_110_000_000 + (process.pid % 10_000) * 8;

const scratch = mkdtempSync(join(tmpdir(), 'codecall-unsandboxed-host-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Pids of the processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return children;
}

/** Starts the host; resolves once it printed the lines matching `expected`, with the pids they name. */
async function startHost(
  argumentsList: readonly string[],
  expected: readonly string[],
  environment: NodeJS.ProcessEnv = process.env,
): Promise<{ host: ChildProcess; pids: Map<string, number> }> {
  const host = spawn(VITE_NODE, [HOST_PROCESS, ...argumentsList], {
    cwd: REPOSITORY,
    env: environment,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  host.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const pids = new Map<string, number>();
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not report: ${stdout}\n${stderr}`)), 45_000);
    host.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const match of stdout.matchAll(/^([\w-]+) (\d+)$/gm)) pids.set(match[1] as string, Number(match[2]));
      if (expected.every((kind) => pids.has(kind))) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return { host, pids };
}

describe.skipIf(process.platform !== 'linux')('a SIGKILLed host without a sandbox', () => {
  it('leaves no interpreter alive: a run, a busy and an idle session, the pooled one', async () => {
    const { host, pids } = await startHost([join(scratch, 'state')], ['run', 'busy-session', 'idle-session']);
    try {
      const hostPid = host.pid as number;
      // The pool refills after the run took its interpreter: four interpreters are children of the host.
      expect(await eventually(() => childrenOf(hostPid).length >= 4, 20_000)).toBe(true);
      const interpreters = childrenOf(hostPid);
      for (const pid of pids.values()) expect(interpreters).toContain(pid);
      host.kill('SIGKILL');
      for (const pid of interpreters) expect(await eventually(() => !processAlive(pid), 10_000)).toBe(true);
    } finally {
      host.kill('SIGKILL');
    }
  }, 90_000);

  it.skipIf(process.getuid?.() !== 0)(
    'kills an interpreter that cleared its own parent-death signal when its uid is claimed again',
    async () => {
      const range = `${FIRST}-${FIRST + 3}`;
      const { host, pids } = await startHost([join(scratch, 'state-unkillable'), 'unkillable'], ['unkillable'], {
        ...process.env,
        [RUN_UID_RANGE_VARIABLE]: range,
      });
      const survivor = pids.get('unkillable') as number;
      try {
        host.kill('SIGKILL');
        await new Promise((resolve) => host.once('exit', resolve));
        // What a hostile script can do for itself: it outlives the host, as an unprivileged uid of its own...
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(processAlive(survivor)).toBe(true);
        const status = readFileSync(`/proc/${survivor}/status`, 'utf8');
        expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(FIRST));
        // ...until the next host claims that uid: the dead host's lock is taken over and its processes killed.
        const lease = await runUidAllocator({ range: { first: FIRST, count: 4 } }).claim();
        expect(lease.uid).toBe(FIRST);
        expect(await eventually(() => !processAlive(survivor))).toBe(true);
        await lease.release();
      } finally {
        host.kill('SIGKILL');
        if (processAlive(survivor)) process.kill(survivor, 'SIGKILL');
      }
    },
    90_000,
  );
});
