import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { processAlive } from '../support/codecall-fixture.js';
import { eventually } from './support/sandbox-fixture.js';

/**
 * Isolation `none` and a host SIGKILLed mid-run (item 3 of issue 10): the interpreters of runs, sessions and the
 * warm pool die with it — as root through the host watchdog, which kills everything of the run uids a dead host held
 * (a script that undid its parent-death signal and its daemons too), otherwise through PR_SET_PDEATHSIG.
 */

const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
const HOST_PROCESS = join(REPOSITORY, 'test/fixtures/sandbox/unsandboxed-host-process.ts');
const VITE_NODE = join(REPOSITORY, 'node_modules/.bin/vite-node');

const scratch = mkdtempSync(join(tmpdir(), 'codecall-unsandboxed-host-'));
chmodSync(scratch, 0o711);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const asRoot = process.getuid?.() === 0;
/** A host that is not root: `nobody`, with a home and state folder of its own (only root can start one). */
const NOBODY = 65_534;

/** Whether a process is a Python interpreter (the host's other children are its watchdog and its tools). */
function isInterpreter(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('codecall_');
  } catch {
    return false;
  }
}

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
  options: { readonly environment?: NodeJS.ProcessEnv | undefined; readonly uid?: number } = {},
): Promise<{ host: ChildProcess; pids: Map<string, number> }> {
  const host = spawn(VITE_NODE, [HOST_PROCESS, ...argumentsList], {
    cwd: REPOSITORY,
    env: options.environment ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.uid !== undefined ? { uid: options.uid, gid: options.uid } : {}),
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

/** Where a host running as `nobody` keeps its files, and the environment it starts with. */
function nobodyHome(): NodeJS.ProcessEnv {
  const home = join(scratch, 'nobody');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  chownSync(home, NOBODY, NOBODY);
  return { HOME: home, TMPDIR: home, PATH: '/usr/bin:/bin' };
}

describe.skipIf(process.platform !== 'linux')('a SIGKILLed host without a sandbox', () => {
  it.each([
    ['as root (the watchdog kills its run uids)', 'root'],
    ['not root (PR_SET_PDEATHSIG)', 'nobody'],
  ] as const)(
    '%s leaves no interpreter alive: a run, a busy and an idle session, the pooled one',
    async (_, user) => {
      // Only root can start a host as nobody; a host that is not root tests the second case as itself.
      if (user === 'root' && !asRoot) return;
      const environment = user === 'nobody' && asRoot ? nobodyHome() : undefined;
      const { host, pids } = await startHost(
        [join(environment?.HOME ?? scratch, `state-${user}`)],
        ['run', 'busy-session', 'idle-session'],
        environment !== undefined ? { environment, uid: NOBODY } : {},
      );
      try {
        const hostPid = host.pid as number;
        // The pool refills after the run took its interpreter: four interpreters are children of the host.
        expect(await eventually(() => childrenOf(hostPid).filter(isInterpreter).length >= 4, 20_000)).toBe(true);
        const interpreters = childrenOf(hostPid).filter(isInterpreter);
        for (const pid of pids.values()) expect(interpreters).toContain(pid);
        host.kill('SIGKILL');
        for (const pid of interpreters) expect(await eventually(() => !processAlive(pid), 10_000)).toBe(true);
      } finally {
        host.kill('SIGKILL');
      }
    },
    90_000,
  );

  it.skipIf(!asRoot)(
    'as root, also kills a script that cleared its parent-death signal and the setsid daemon it left',
    async () => {
      const { host, pids } = await startHost([join(scratch, 'state-hostile'), 'hostile'], ['hostile', 'daemon']);
      const survivors = [pids.get('hostile') as number, pids.get('daemon') as number];
      try {
        for (const pid of survivors) expect(processAlive(pid)).toBe(true);
        host.kill('SIGKILL');
        for (const pid of survivors) expect(await eventually(() => !processAlive(pid), 10_000)).toBe(true);
      } finally {
        host.kill('SIGKILL');
        for (const pid of survivors) if (processAlive(pid)) process.kill(pid, 'SIGKILL');
      }
    },
    90_000,
  );
});
