import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  bubblewrapUsable,
  cgroupsActive,
  eventually,
  lastJson,
  PRINT_PID_NAMESPACE,
  printedPidNamespace,
  processesInPidNamespace,
  sandboxProbe,
  useSandboxedCodecalls,
} from './support/sandbox-fixture.js';

/** Catalogue section R (resource exhaustion) under `sandbox: "bubblewrap"`. */

const MEBIBYTE = 1024 * 1024;
const codecallWith = useSandboxedCodecalls();

const FORK_BOMB = `${PRINT_PID_NAMESPACE}while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n`;

describe.skipIf(!bubblewrapUsable)('resource exhaustion (catalogue R) under bubblewrap', () => {
  it.skipIf(!cgroupsActive)(
    'R1, R18: two concurrent fork bombs are capped and killed while a third, normal run succeeds',
    async () => {
      const bombs = codecallWith({ limits: { maxProcesses: 24, timeoutMs: 4_000, cpuSeconds: 120 } });
      const normal = codecallWith();
      const first = bombs.execute(FORK_BOMB);
      const second = bombs.execute(FORK_BOMB);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const peer = await normal.execute('import os\nprint(sum(range(10)), len(os.listdir("/proc")) > 0)');
      expect(peer).toMatchObject({ status: 'success', stdout: '45 True\n' });
      for (const bomb of await Promise.all([first, second])) {
        expect(bomb.status).toBe('timeout');
        expect(['timeout', 'pids']).toContain(bomb.reason);
        const namespace = printedPidNamespace(bomb.stdout);
        expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
      }
    },
    30_000,
  );

  it('R2: forks past the limit fail with EAGAIN, which the script can catch; N is the configured limit', async () => {
    const maxProcesses = 10;
    const codecall = codecallWith({ limits: { maxProcesses } });
    const result = await codecall.execute(
      [
        'import os, time, json, errno',
        'children = 0',
        'failure = None',
        'for _ in range(300):',
        '    try:',
        '        if os.fork() == 0:',
        '            time.sleep(9)',
        '            os._exit(0)',
        '        children += 1',
        '    except OSError as error:',
        '        failure = errno.errorcode[error.errno]',
        '        break',
        'print(json.dumps({"children": children, "failure": failure}))',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const { children, failure } = lastJson<{ children: number; failure: string }>(result.stdout);
    expect(failure).toBe('EAGAIN');
    // The script itself is one of the N processes (and the runtime may hold a thread).
    expect(children).toBeGreaterThanOrEqual(maxProcesses - 2);
    expect(children).toBeLessThanOrEqual(maxProcesses - 1);
  });

  it('R3: a memory bomb in one process ends with reason "memory"', async () => {
    const codecall = codecallWith({ limits: { memoryBytes: 256 * MEBIBYTE } });
    const result = await codecall.execute('a = [bytearray(50 << 20) for _ in range(999)]');
    expect(result.status).toBe('limit');
    expect(result.reason).toBe('memory');
  });

  it.skipIf(!cgroupsActive)(
    'R4: memory spread over several processes is bounded by the run memory cgroup (reason "memory")',
    async () => {
      const codecall = codecallWith({ limits: { memoryBytes: 256 * MEBIBYTE, timeoutMs: 20_000 } });
      const result = await codecall.execute(
        [
          'import os, time',
          'for _ in range(6):',
          '    if os.fork() == 0:',
          '        block = bytearray(b"x") * (100 << 20)',
          '        time.sleep(30)',
          '        os._exit(0)',
          'for _ in range(6):',
          '    os.wait()',
          'print("all children survived")',
        ].join('\n'),
      );
      expect(result.status).toBe('limit');
      expect(result.reason).toBe('memory');
      expect(result.stdout).not.toContain('survived');
    },
    30_000,
  );

  it.skipIf(!cgroupsActive)('R5: a busy loop is stopped at its CPU limit with reason "cpu"', async () => {
    const codecall = codecallWith({ limits: { cpuSeconds: 1, timeoutMs: 20_000 } });
    const result = await codecall.execute('while True:\n    pass');
    expect(result.status, JSON.stringify(result)).toBe('limit');
    expect(result.reason).toBe('cpu');
  });

  it.skipIf(!cgroupsActive)(
    'R5: CPU time is counted for the whole run, not per process (two busy processes share the limit)',
    async () => {
      const codecall = codecallWith({ limits: { cpuSeconds: 2, timeoutMs: 30_000 } });
      const result = await codecall.execute('import os, resource\nos.fork()\nwhile True:\n    pass');
      expect(result.status).toBe('limit');
      expect(result.reason).toBe('cpu');
    },
    40_000,
  );

  it('R6: sleeping forever is stopped by the wall clock and nothing of the run is left', async () => {
    const codecall = codecallWith({ limits: { timeoutMs: 1_500 } });
    const result = await codecall.execute(`${PRINT_PID_NAMESPACE}import time\ntime.sleep(1e9)`);
    expect(result).toMatchObject({ status: 'timeout', reason: 'timeout' });
    const namespace = printedPidNamespace(result.stdout);
    expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
  });

  it('R7: a file larger than maxFileBytes fails with EFBIG', async () => {
    const codecall = codecallWith({ limits: { maxFileBytes: 10 * MEBIBYTE } });
    const result = await codecall.execute(
      [
        'import errno',
        'written = 0',
        'try:',
        '    with open("big", "wb") as handle:',
        '        while True:',
        '            handle.write(b"\\0" * (1 << 20))',
        '            handle.flush()',
        '            written += 1 << 20',
        'except OSError as error:',
        '    print(errno.errorcode[error.errno], written)',
      ].join('\n'),
    );
    expect(result.stdout).toBe(`EFBIG ${10 * MEBIBYTE}\n`);
  });

  it('R8, R9: TMPDIR and /tmp share the disk tmpfs, /dev/shm has its own: filling them ends in ENOSPC, not host RAM', async () => {
    const maxFileBytes = 8 * MEBIBYTE;
    const maxDiskBytes = 16 * MEBIBYTE;
    const codecall = codecallWith({ limits: { maxFileBytes, maxDiskBytes } });
    const result = await codecall.execute(
      [
        'import os, errno, json',
        'outcome = {}',
        'for directory in (os.environ["TMPDIR"], "/tmp", "/dev/shm"):',
        '    total = 0',
        '    try:',
        '        for index in range(1000):',
        '            with open(os.path.join(directory, "fill%d" % index), "wb") as handle:',
        '                handle.write(b"\\1" * (1 << 20))',
        '            total += 1 << 20',
        '        outcome[directory] = ["no error", total]',
        '    except OSError as error:',
        '        outcome[directory] = [errno.errorcode[error.errno], total]',
        'print(json.dumps(outcome))',
      ].join('\n'),
    );
    const outcome = lastJson<Record<string, [string, number]>>(result.stdout);
    const [tmpDirectory, tmp, sharedMemory] = Object.values(outcome);
    expect(Object.keys(outcome)).toHaveLength(3);
    for (const [error] of Object.values(outcome)) expect(error).toBe('ENOSPC');
    // One tmpfs for TMPDIR and /tmp: what the first took, the second does not get.
    expect((tmpDirectory?.[1] ?? 0) + (tmp?.[1] ?? 0)).toBeLessThanOrEqual(maxDiskBytes);
    expect(sharedMemory?.[1]).toBeLessThanOrEqual(maxFileBytes);
  });

  it('R13: opening files past maxOpenFiles fails with EMFILE', async () => {
    const codecall = codecallWith({ limits: { maxOpenFiles: 64 } });
    const result = await codecall.execute(
      'import errno\nfiles = []\ntry:\n    while True:\n        files.append(open("/dev/null"))\nexcept OSError as error:\n    print(errno.errorcode[error.errno], len(files) < 64)',
    );
    expect(result.stdout).toBe('EMFILE True\n');
  });

  it('R14: threads count against the process limit and fail with RuntimeError past it', async () => {
    const maxProcesses = 20;
    const codecall = codecallWith({ limits: { maxProcesses } });
    const result = await codecall.execute(
      [
        'import threading, time, json',
        'started = 0',
        'failure = None',
        'for _ in range(10 ** 4):',
        '    try:',
        '        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()',
        '        started += 1',
        '    except RuntimeError as error:',
        '        failure = str(error)',
        '        break',
        'print(json.dumps({"started": started, "failure": failure}))',
      ].join('\n'),
    );
    const { started, failure } = lastJson<{ started: number; failure: string }>(result.stdout);
    expect(failure).toContain("can't start new thread");
    expect(started).toBeLessThan(maxProcesses);
    expect(started).toBeGreaterThanOrEqual(maxProcesses - 3);
  });

  it('R16: children never waited for leave no zombies behind once the run ends', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      `${PRINT_PID_NAMESPACE}import time\nfor _ in range(20):\n    if os.fork() == 0:\n        os._exit(0)\ntime.sleep(0.2)\nprint(sum(1 for p in os.listdir("/proc") if p.isdigit()))`,
    );
    expect(result.status).toBe('success');
    const namespace = printedPidNamespace(result.stdout);
    expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
  });

  it('R17: a directory tree nested past PATH_MAX is removed after the run', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      'import os\nprint(os.getcwd(), flush=True)\nfor _ in range(3000):\n    os.mkdir("a")\n    os.chdir("a")\nprint("deep")',
    );
    expect(result.stdout).toContain('deep');
    const workDir = result.stdout.split('\n')[0] ?? '';
    expect(workDir).not.toBe('');
    expect(await eventually(() => !existsSync(workDir))).toBe(true);
  });

  it('drops RLIMIT_NPROC when the pids cgroup caps the run (it would count every run of the uid together)', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute('import os\nprint(os.environ["CODECALL_RLIMITS"])');
    if (cgroupsActive && sandboxProbe.cgroups.controllers.includes('pids')) {
      expect(result.stdout).not.toContain('nproc=');
    } else {
      expect(result.stdout).toContain('nproc=');
    }
  });
});
