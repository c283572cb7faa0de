import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CodecallOptions } from '../../src/engine/codecall.js';
import { runUidAllocator } from '../../src/sandbox/run-uids.js';
import { defineTool } from '../../src/tools/define-tool.js';
import type { Tool } from '../../src/tools/types.js';
import { processAlive, useCodecalls } from '../support/codecall-fixture.js';
import {
  bubblewrapUsable,
  eventually,
  isRunUid,
  lastJson,
  processesInPidNamespace,
} from './support/sandbox-fixture.js';

/**
 * One uid per run (item 4 of issue 10), tried with real processes: a host process of the uid every sandbox shared
 * before (`nobody`), and a concurrent run, try to take a live run's tool channel (fd 3) through /proc and
 * `pidfd_getfd`; concurrent runs, pooled interpreters and sessions never share a uid.
 */

const asRoot = process.getuid?.() === 0;
/** Debian's interpreter: the attacker runs as `nobody`, which cannot reach a pyenv interpreter under /root. */
const SYSTEM_PYTHON = '/usr/bin/python3';
const EACCES = 13;
const EPERM = 1;
const codecallWith = useCodecalls();

/** Python that tries to reach fd 3 of each pid given: read its link in /proc, and take it with pidfd_getfd. */
const ATTACK = [
  'import ctypes, json, os, sys',
  'libc = ctypes.CDLL(None, use_errno=True)',
  'libc.syscall.restype = ctypes.c_long',
  'found = {}',
  'for pid in map(int, sys.argv[1:]):',
  '    entry = {}',
  '    try:',
  '        entry["fd3"] = os.readlink("/proc/%d/fd/3" % pid)',
  '    except OSError as error:',
  '        entry["fd3"] = error.errno',
  '    try:',
  '        pidfd = os.pidfd_open(pid)',
  '    except OSError as error:',
  '        entry["getfd"] = error.errno',
  '    else:',
  '        taken = libc.syscall(438, pidfd, 3, 0)',
  '        entry["getfd"] = "took fd %d" % taken if taken >= 0 else ctypes.get_errno()',
  '    found[str(pid)] = entry',
  'print(json.dumps(found))',
].join('\n');

type AttackOutcome = Record<string, { fd3: string | number; getfd: string | number }>;

/** Runs the attack as `uid` against `pids`; resolves what it got. */
function attackAs(uid: number, pids: readonly number[]): Promise<AttackOutcome> {
  return new Promise((resolve, reject) => {
    const attacker = spawn(SYSTEM_PYTHON, ['-c', ATTACK, ...pids.map(String)], {
      uid,
      gid: uid,
      cwd: '/',
      env: {},
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    attacker.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    attacker.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    attacker.once('close', (code) =>
      code === 0 ? resolve(JSON.parse(stdout) as AttackOutcome) : reject(new Error(`attacker failed: ${stderr}`)),
    );
  });
}

/** A tool that runs the attack as `nobody` against the processes the script names, while the script waits. */
function attackByNobody(): Tool {
  return defineTool({
    name: 'attack_me',
    description: 'Attacks the given processes from a host process running as nobody.',
    inputSchema: {
      type: 'object',
      properties: { pids: { type: 'array', items: { type: 'integer' } }, namespace: { type: 'string' } },
    },
    execute: async ({ pids, namespace }: { pids?: number[]; namespace?: string }) => {
      const targets = namespace !== undefined ? processesInPidNamespace(namespace) : (pids ?? []);
      return { targets, outcome: await attackAs(65_534, targets) };
    },
  }) as unknown as Tool;
}

/** Every attempt failed, and on the script's own process with the permission errors (not a missing descriptor). */
function expectRefused(outcome: AttackOutcome, scriptPid: number | undefined): void {
  expect(Object.keys(outcome).length).toBeGreaterThan(0);
  for (const entry of Object.values(outcome)) {
    expect(typeof entry.fd3).toBe('number');
    expect(typeof entry.getfd).toBe('number');
  }
  if (scriptPid !== undefined) expect(outcome[String(scriptPid)]).toEqual({ fd3: EACCES, getfd: EPERM });
}

describe.skipIf(!asRoot || !existsSync(SYSTEM_PYTHON))(
  'a host process of nobody cannot take a live run’s channel',
  () => {
    it.skipIf(!bubblewrapUsable)('under bubblewrap (every process of the sandbox)', async () => {
      const codecall = codecallWith({ sandbox: 'bubblewrap', tools: [attackByNobody()] });
      const result = await codecall.execute(
        [
          'import json, os',
          'from tools import attack_me',
          'print(json.dumps(attack_me(namespace=os.readlink("/proc/self/ns/pid"))))',
        ].join('\n'),
      );
      expect(result.status).toBe('success');
      const { targets, outcome } = lastJson<{ targets: number[]; outcome: AttackOutcome }>(result.stdout);
      // bwrap's init and the interpreter at least.
      expect(targets.length).toBeGreaterThanOrEqual(2);
      expectRefused(outcome, undefined);
      for (const entry of Object.values(outcome)) expect([EACCES, EPERM]).toContain(entry.getfd);
    });

    it('without a sandbox', async () => {
      const codecall = codecallWith({ sandbox: 'none', tools: [attackByNobody()] });
      const result = await codecall.execute(
        'import json, os\nfrom tools import attack_me\nprint(json.dumps(attack_me(pids=[os.getpid()])))',
      );
      expect(result.status).toBe('success');
      const { targets, outcome } = lastJson<{ targets: number[]; outcome: AttackOutcome }>(result.stdout);
      expectRefused(outcome, targets[0]);
    });
  },
);

describe.skipIf(!asRoot)('a run without a sandbox cannot take a concurrent run’s channel', () => {
  it('through /proc or pidfd_getfd, while the victim waits in a tool call', async () => {
    let registerVictim!: (pid: number) => void;
    const victimPid = new Promise<number>((resolve) => {
      registerVictim = resolve;
    });
    let finishAttack!: () => void;
    const attackFinished = new Promise<void>((resolve) => {
      finishAttack = resolve;
    });
    const tools = [
      defineTool({
        name: 'wait_as_victim',
        description: 'Registers the caller as the victim and waits until the attack is over.',
        inputSchema: { type: 'object', properties: { pid: { type: 'integer' } }, required: ['pid'] },
        execute: async ({ pid }: { pid: number }) => {
          registerVictim(pid);
          await attackFinished;
          return 'over';
        },
      }),
      defineTool({
        name: 'victim_pid',
        description: 'The pid of the waiting victim.',
        inputSchema: { type: 'object', properties: {} },
        execute: async () => victimPid,
      }),
      defineTool({
        name: 'attack_over',
        description: 'Lets the victim go.',
        inputSchema: { type: 'object', properties: {} },
        execute: async () => {
          finishAttack();
          return 'ok';
        },
      }),
    ] as unknown as Tool[];
    const codecall = codecallWith({ sandbox: 'none', tools });
    const victim = codecall.execute(
      'import os\nfrom tools import wait_as_victim\nprint(wait_as_victim(pid=os.getpid()))',
    );
    const attacker = codecall.execute(
      [
        'import json',
        'from tools import attack_over, victim_pid',
        'try:',
        ATTACK.replace('for pid in map(int, sys.argv[1:]):', 'for pid in [victim_pid()]:')
          .split('\n')
          .map((line) => `    ${line}`)
          .join('\n'),
        'finally:',
        '    attack_over()',
      ].join('\n'),
    );
    const [victimResult, attackerResult] = await Promise.all([victim, attacker]);
    expect(victimResult.stdout).toBe('over\n');
    expect(attackerResult.status).toBe('success');
    const outcome = lastJson<AttackOutcome>(attackerResult.stdout);
    expectRefused(outcome, await victimPid);
  });
});

/** A tool every caller waits in until `count` callers arrived: the runs are alive at the same time. */
function barrier(count: number): Tool {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return defineTool({
    name: 'arrive',
    description: 'Waits until every caller arrived.',
    inputSchema: { type: 'object', properties: {} },
    execute: async () => {
      arrived += 1;
      if (arrived >= count) open();
      await opened;
      return arrived;
    },
  }) as unknown as Tool;
}

describe.each([
  ['without a sandbox', { sandbox: 'none' }, true],
  ['under bubblewrap', { sandbox: 'bubblewrap' }, bubblewrapUsable],
] as const)('concurrent runs %s', (_, options: CodecallOptions, usable) => {
  it.skipIf(!usable || !asRoot)(
    'cold runs, a pooled run and a session cell alive at once have distinct uids of the range',
    async () => {
      const script = 'import os\nfrom tools import arrive\narrive()\nprint(os.getuid(), os.getgid())';
      const codecall = codecallWith({ ...options, tools: [barrier(4)], pool: { size: 1 } });
      // The pooled interpreter is started ahead; the first execute takes it, the others start cold.
      await codecall.describe();
      const session = codecall.session();
      const results = await Promise.all([
        codecall.execute(script),
        codecall.execute(script),
        codecall.execute(script),
        session.execute(script),
      ]);
      const uids = results.map((result) => {
        expect(result.status).toBe('success');
        const [uid, gid] = result.stdout.trim().split(' ').map(Number);
        expect(gid).toBe(uid);
        return uid as number;
      });
      expect(new Set(uids).size).toBe(4);
      for (const uid of uids) expect(isRunUid(uid)).toBe(true);
      await session.close();
      await codecall.close();
      // Every uid is given back once its run is over.
      for (const uid of uids) expect(runUidAllocator().heldUids).not.toContain(uid);
    },
  );
});

/**
 * A script that leaves a daemon (setsid, double-forked) running `daemon` after `prepare`; the daemon writes its pid to
 * `reader` first, and the script then runs `then`.
 */
function daemonScript(daemon: readonly string[], then: readonly string[], prepare = 'pass'): string {
  return [
    'import os, time',
    'reader, writer = os.pipe()',
    'if os.fork() == 0:',
    '    os.setsid()',
    '    if os.fork() == 0:',
    `        ${prepare}`,
    '        os.write(writer, b"%d" % os.getpid())',
    ...daemon.map((line) => `        ${line}`),
    '    os._exit(0)',
    ...then,
  ].join('\n');
}

describe.skipIf(!asRoot)('a run without a sandbox is fully dead before its uid is given again', () => {
  it('its setsid, double-forked daemon is killed when the run ends', async () => {
    const codecall = codecallWith({ sandbox: 'none' });
    const result = await codecall.execute(
      daemonScript(['while True:', '    time.sleep(0.1)'], ['print(os.read(reader, 32).decode(), os.getuid())']),
    );
    expect(result.status).toBe('success');
    const [daemon, uid] = result.stdout.trim().split(' ').map(Number) as [number, number];
    expect(isRunUid(uid)).toBe(true);
    expect(await eventually(() => !processAlive(daemon))).toBe(true);
    expect(await eventually(() => !runUidAllocator().heldUids.includes(uid))).toBe(true);
  });

  it('its daemon is dead before the host deletes the run directory (it could swap a folder there for a link)', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'codecall-daemon-'));
    try {
      const codecall = codecallWith({ sandbox: 'none', stateDir });
      // The daemon fills a folder of the run directory as fast as it can: alive while the host removes that directory,
      // it makes the removal fail (a folder never empty) and the directory stays behind.
      const result = await codecall.execute(
        daemonScript(
          [
            'count = 0',
            'while True:',
            '    try:',
            '        open("busy/%d" % (count % 64), "w").close()',
            '    except OSError:',
            '        pass',
            '    count += 1',
          ],
          ['print(os.read(reader, 32).decode())', 'time.sleep(0.2)'],
          'os.makedirs("busy", exist_ok=True)',
        ),
      );
      expect(result.status).toBe('success');
      const daemon = Number(result.stdout.trim());
      await codecall.close();
      expect(processAlive(daemon)).toBe(false);
      expect(readdirSync(join(stateDir, 'runs'))).toEqual([]);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
