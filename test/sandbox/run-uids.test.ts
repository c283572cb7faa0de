import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import {
  checkRunUidRange,
  DEFAULT_RUN_UID_FIRST,
  describeRunUids,
  MAX_RUN_UID,
  parseRunUidRange,
  runUidAllocator,
} from '../../src/sandbox/run-uids.js';
import { processAlive } from '../support/codecall-fixture.js';
import { eventually } from './support/sandbox-fixture.js';

/** The per-run uids: machine-wide exclusive claims, takeover from dead hosts, range checks (item 4 of issue 10). */

const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
const CLAIMER = join(REPOSITORY, 'test/fixtures/sandbox/uid-claimer.ts');
const VITE_NODE = join(REPOSITORY, 'node_modules/.bin/vite-node');
const asRoot = process.getuid?.() === 0;
/** A range of this file's own, away from the default one the other test files' runs use. */
const FIRST = 2_100_000_000 + (process.pid % 10_000) * 64;
const COUNT = 16;

const scratch = mkdtempSync(join(tmpdir(), 'codecall-run-uids-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let lockFolders = 0;

/** A fresh, private lock folder (root's, 0700), so each test starts from no claims. */
function lockFolder(): string {
  lockFolders += 1;
  return join(scratch, `locks-${lockFolders}`);
}

function configError(run: () => unknown): CodecallError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CodecallError);
    return error as CodecallError;
  }
  throw new Error('expected a CodecallError');
}

/** Another host claiming `claims` uids; resolves once it holds them, with the uids and its sleepers' pids. */
async function startClaimer(
  lockDirectory: string,
  claims: number,
): Promise<{ child: ChildProcess; uids: number[]; sleepers: number[] }> {
  const child = spawn(VITE_NODE, [CLAIMER, String(FIRST), String(COUNT), lockDirectory, String(claims)], {
    cwd: REPOSITORY,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const line = await new Promise<string>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`the claimer did not answer: ${stderr}`)), 30_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) {
        clearTimeout(timer);
        resolve(text.split('\n')[0] as string);
      }
    });
  });
  return { child, ...(JSON.parse(line) as { uids: number[]; sleepers: number[] }) };
}

describe('run uid ranges', () => {
  it('parses FIRST-LAST and refuses what is not a range of unprivileged uids', () => {
    expect(parseRunUidRange('2000000000-2000065535')).toEqual({ first: DEFAULT_RUN_UID_FIRST, count: 65_536 });
    for (const text of ['', '2000000000', '5-1', '-5-10', '2000000000-', 'a-b', '1e9-2e9']) {
      expect(configError(() => parseRunUidRange(text)).code).toBe('INVALID_CONFIG');
    }
    expect(configError(() => checkRunUidRange({ first: 0, count: 10 })).message).toContain('from 1 to');
    expect(configError(() => checkRunUidRange({ first: MAX_RUN_UID, count: 2 })).message).toContain('from 1 to');
    expect(configError(() => checkRunUidRange({ first: 2_000_000_000, count: 0 })).code).toBe('INVALID_CONFIG');
    expect(configError(() => checkRunUidRange({ first: 1.5, count: 3 })).code).toBe('INVALID_CONFIG');
  });

  it('refuses a range holding nobody or an account or group of this machine', () => {
    expect(configError(() => checkRunUidRange({ first: 65_000, count: 1_000 })).message).toContain('65534');
    // uid 1 is `daemon` on every Debian and Red Hat system; root's group 0 is in every /etc/group.
    expect(configError(() => checkRunUidRange(parseRunUidRange('1-100'))).message).toMatch(
      /includes "\w+" \(id \d+\) of \/etc\//,
    );
  });

  it('tells codecall doctor the scheme', () => {
    if (asRoot) expect(describeRunUids()).toMatch(/^one per run, from 2000000000–2000065535 \(CODECALL_RUN_UIDS\)/);
    else expect(describeRunUids()).toContain("the host's own");
  });
});

describe.skipIf(!asRoot)('run uid claims (as root)', () => {
  it('never gives one uid to two concurrent claims, and reuses a uid once released', async () => {
    const allocator = runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory: lockFolder() });
    const leases = await Promise.all(Array.from({ length: COUNT }, () => allocator.claim()));
    const uids = leases.map((lease) => lease.uid);
    expect(new Set(uids).size).toBe(COUNT);
    expect(uids.every((uid) => uid >= FIRST && uid < FIRST + COUNT)).toBe(true);
    expect(leases.every((lease) => lease.gid === lease.uid)).toBe(true);
    // The range is exhausted: one more is a clear error, not a shared uid.
    const error = await allocator.claim().then(
      () => undefined,
      (failure: unknown) => failure as CodecallError,
    );
    expect(error?.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error?.message).toContain('every uid of');
    const freed = leases[5];
    await freed?.release();
    const again = await allocator.claim();
    expect(again.uid).toBe(freed?.uid);
    await Promise.all([again, ...leases].map((lease) => lease.release()));
    expect(allocator.heldUids).toEqual([]);
  });

  it('never gives a uid held by another live host, and leaves its processes alone', async () => {
    const lockDirectory = lockFolder();
    const other = await startClaimer(lockDirectory, 3);
    try {
      expect(other.uids).toEqual([FIRST, FIRST + 1, FIRST + 2]);
      const allocator = runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory });
      const leases = await Promise.all([allocator.claim(), allocator.claim()]);
      expect(leases.map((lease) => lease.uid).sort()).toEqual([FIRST + 3, FIRST + 4]);
      for (const pid of other.sleepers) expect(processAlive(pid)).toBe(true);
      await Promise.all(leases.map((lease) => lease.release({ killRemaining: true })));
      for (const pid of other.sleepers) expect(processAlive(pid)).toBe(true);
    } finally {
      other.child.stdin?.end();
      await new Promise((resolve) => other.child.once('exit', resolve));
    }
    // It released them, killing what ran as them.
    for (const pid of other.sleepers) expect(await eventually(() => !processAlive(pid))).toBe(true);
    expect(readdirSync(lockDirectory).filter((entry) => !entry.startsWith('.'))).toEqual([]);
  }, 60_000);

  it('takes over the uid of a host that was SIGKILLed, killing what still ran as it first', async () => {
    const lockDirectory = lockFolder();
    const dead = await startClaimer(lockDirectory, 2);
    dead.child.kill('SIGKILL');
    await new Promise((resolve) => dead.child.once('exit', resolve));
    // What the dead host's runs left behind still runs as their uids.
    for (const pid of dead.sleepers) expect(processAlive(pid)).toBe(true);
    const allocator = runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory });
    const lease = await allocator.claim();
    expect(lease.uid).toBe(FIRST);
    expect(await eventually(() => !processAlive(dead.sleepers[0] as number))).toBe(true);
    // The other stale uid is not touched until it is claimed.
    expect(processAlive(dead.sleepers[1] as number)).toBe(true);
    const next = await allocator.claim();
    expect(next.uid).toBe(FIRST + 1);
    expect(await eventually(() => !processAlive(dead.sleepers[1] as number))).toBe(true);
    await lease.release();
    await next.release();
  }, 60_000);

  it('release with killRemaining kills every process of the uid, a setsid daemon included', async () => {
    const allocator = runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory: lockFolder() });
    const lease = await allocator.claim();
    // A daemon in a session of its own, whose parent is gone: what a script without a sandbox can leave.
    const daemon = await new Promise<number>((resolve) => {
      const starter = spawn('/bin/sh', ['-c', 'setsid sleep 600 >/dev/null 2>&1 & echo $!'], {
        uid: lease.uid,
        gid: lease.gid,
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let text = '';
      starter.stdout?.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      starter.once('close', () => resolve(Number(text.trim())));
    });
    const bystander = spawn('sleep', ['600'], { uid: 65_534, gid: 65_534, stdio: 'ignore' });
    try {
      expect(processAlive(daemon)).toBe(true);
      await lease.release({ killRemaining: true });
      expect(await eventually(() => !processAlive(daemon))).toBe(true);
      expect(processAlive(bystander.pid as number)).toBe(true);
    } finally {
      if (processAlive(daemon)) process.kill(daemon, 'SIGKILL');
      bystander.kill('SIGKILL');
    }
  });

  it('refuses a lock folder that someone else could write', async () => {
    const lockDirectory = join(scratch, 'shared-locks');
    mkdirSync(lockDirectory);
    chmodSync(lockDirectory, 0o777);
    const error = await runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory })
      .claim()
      .then(
        () => undefined,
        (failure: unknown) => failure as CodecallError,
      );
    expect(error?.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error?.message).toContain('only root can write');
  });

  it('does not take over a lock whose owner is alive, even when its file names a recycled pid', async () => {
    const lockDirectory = lockFolder();
    const allocator = runUidAllocator({ range: { first: FIRST, count: COUNT }, lockDirectory });
    // A lock owned by this very process (alive), made by hand, and one naming pid 1 with a start time it never had.
    mkdirSync(join(lockDirectory, String(FIRST)), { recursive: true });
    const ownStart = (await import('node:fs')).readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ')[19];
    writeFileSync(join(lockDirectory, String(FIRST), `${process.pid}-${ownStart}`), '');
    mkdirSync(join(lockDirectory, String(FIRST + 1)));
    writeFileSync(join(lockDirectory, String(FIRST + 1), '1-999999999'), '');
    const lease = await allocator.claim();
    // FIRST is held by a live owner; FIRST + 1 names pid 1 with another start time: a dead owner, taken over.
    expect(lease.uid).toBe(FIRST + 1);
    await lease.release();
  });
});
