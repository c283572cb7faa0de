import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  bubblewrapUsable,
  eventually,
  PRINT_PID_NAMESPACE,
  printedPidNamespace,
  processesInPidNamespace,
  useSandboxedCodecalls,
} from './support/sandbox-fixture.js';

/** Host faults (H6, H9), daemons (E16), links (E7) and closed output (O4) under `sandbox: "bubblewrap"`. */

const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
const HOST_PROCESS = join(REPOSITORY, 'test/fixtures/sandbox/host-process.ts');
const VITE_NODE = join(REPOSITORY, 'node_modules/.bin/vite-node');

const codecallWith = useSandboxedCodecalls();

function waitForLine(stream: NodeJS.ReadableStream, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(
      () => reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms: ${text}`)),
      timeoutMs,
    );
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = pattern.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
  });
}

describe.skipIf(!bubblewrapUsable)('host faults and leftovers under bubblewrap', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'codecall-host-faults-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('E16: a setsid, double-forked daemon is gone when its run ends', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      `${PRINT_PID_NAMESPACE}import time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n            time.sleep(0.1)\n    os._exit(0)\ntime.sleep(0.3)\nprint("parent done")`,
    );
    expect(result.status).toBe('success');
    const namespace = printedPidNamespace(result.stdout);
    expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
  });

  it('H6: SIGKILL of the host process mid-run leaves no script process alive (--die-with-parent)', async () => {
    const stateDir = join(scratch, 'killed-host');
    mkdirSync(stateDir);
    const host = spawn(VITE_NODE, [HOST_PROCESS, stateDir], { cwd: REPOSITORY, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    host.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    try {
      const match = await waitForLine(host.stdout as NodeJS.ReadableStream, /pidns (pid:\[\d+\])/, 30_000).catch(
        (error: Error) => {
          throw new Error(`${error.message}\nhost stderr: ${stderr}`);
        },
      );
      const namespace = match[1] as string;
      // The script and its daemon are running.
      expect(processesInPidNamespace(namespace).length).toBeGreaterThanOrEqual(2);
      host.kill('SIGKILL');
      expect(await eventually(() => processesInPidNamespace(namespace).length === 0, 10_000)).toBe(true);
    } finally {
      host.kill('SIGKILL');
    }
  }, 60_000);

  it('H9, E7: links to host paths in the run directory are neither followed on cleanup nor returned', async () => {
    const canary = join(scratch, 'canary');
    mkdirSync(canary);
    writeFileSync(join(canary, 'keep.txt'), 'still here');
    const codecall = codecallWith();
    const result = await codecall.execute(
      [
        'import os',
        'print(os.getcwd(), flush=True)',
        `os.symlink(${JSON.stringify(canary)}, "canary-link")`,
        'os.symlink("/etc", "etc-link")',
        'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
        'os.symlink("/etc/passwd", os.path.join(artifacts, "passwd.txt"))',
        'open(os.path.join(artifacts, "real.txt"), "w").write("mine")',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const workDir = result.stdout.split('\n')[0] ?? '';
    expect(await eventually(() => !existsSync(workDir))).toBe(true);
    expect(readFileSync(join(canary, 'keep.txt'), 'utf8')).toBe('still here');
    expect(existsSync('/etc/passwd')).toBe(true);
    const names = (result.artifacts ?? []).map((artifact) => artifact.path.split('/').at(-1));
    expect(names).toEqual(['real.txt']);
  });

  it('O4: a script that closes stdout and stderr completes when it exits, not at the timeout', async () => {
    const codecall = codecallWith({ limits: { timeoutMs: 20_000 } });
    // The file is the script's last act, after its output closed: a run that ended at EOF would not collect it, and one
    // that waited for the timeout would be reported as one.
    const result = await codecall.execute(
      [
        'import os, time',
        'os.close(1)',
        'os.close(2)',
        'time.sleep(1)',
        'open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "last-act.txt"), "w").write("after EOF")',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const artifact = result.artifacts?.find((entry) => entry.path.endsWith('last-act.txt'));
    expect(readFileSync(artifact?.path ?? '', 'utf8')).toBe('after EOF');
  });
});

describe.skipIf(!bubblewrapUsable)('how a sandboxed interpreter ended', () => {
  it('reports a signal death as the signal, not as bwrap exit status 128 + N', async () => {
    const codecall = codecallWith();
    const killed = await codecall.execute('import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)');
    expect(killed).toMatchObject({ status: 'error', exitCode: null, signal: 'SIGSEGV', isolation: 'bubblewrap' });
    expect(killed.error?.message).toBe('the interpreter was killed by SIGSEGV');
  });

  it('keeps a script exit status above 128 as the status', async () => {
    const codecall = codecallWith();
    const exited = await codecall.execute('import sys\nsys.exit(137)');
    expect(exited).toMatchObject({ status: 'error', exitCode: 137 });
    expect(exited.signal).toBeUndefined();
  });
});
