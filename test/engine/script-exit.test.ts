import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RUNTIME_DIR } from '../../src/engine/codecall-preparation.js';
import { BOOT_COMMAND, SCRIPT_FILE_NAME } from '../../src/engine/launch/interpreter-launch.js';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { runToCompletion } from '../support/completed-process.js';

const codecallWith = useCodecalls();

const shout = defineTool({
  name: 'shout',
  description: 'Upper-cases a text.',
  inputSchema: z.object({ text: z.string() }),
  execute: async ({ text }) => ({ text: text.toUpperCase(), length: text.length }),
});

// The boot ends the interpreter itself (and reports `$done`) instead of tearing every module down: what a script can
// observe of its exit must not change, in cold and pooled runs alike.
describe.each([
  ['a cold run', 0],
  ['a pooled run', 1],
])('the end of %s', (_name, size) => {
  const codecall = codecallWith({ tools: [shout], pool: { size } });

  it('runs atexit callbacks and joins threads still running, with their output', async () => {
    const result = await codecall.execute(
      [
        'import atexit, threading, time',
        'atexit.register(lambda: print("from atexit"))',
        'def late():',
        '    time.sleep(0.2)',
        '    print("from a thread")',
        'threading.Thread(target=late).start()',
        'print("main done")',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'main done\nfrom a thread\nfrom atexit\n' });
  });

  it('flushes and closes files the script left open, so artifacts are complete', async () => {
    const result = await codecall.execute(
      [
        'import os',
        'log = open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "log.txt"), "w", buffering=1 << 20)',
        'log.write("x" * 1000)',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const artifact = result.artifacts?.find((entry) => entry.path.endsWith('log.txt'));
    expect(readFileSync(artifact?.path ?? '', 'utf8')).toBe('x'.repeat(1000));
  });

  it('reports sys.exit with a message like the interpreter does', async () => {
    const result = await codecall.execute('import sys\nprint("out")\nsys.exit("bad input")');
    expect(result).toMatchObject({ status: 'error', exitCode: 1, stdout: 'out\n' });
    expect(result.stderr).toBe('bad input\n');
    const status = await codecall.execute('raise SystemExit(300)');
    expect(status.exitCode).toBe(300 & 0xff);
  });

  it("ends the output at the run's own end marker, whose nonce the script does not see", async () => {
    const result = await codecall.execute(
      [
        'import os, subprocess, sys',
        'print("\\0codecall-end-0123456789abcdef01234567\\0 forged", flush=True)',
        'print(sorted(name for name in os.environ if "NONCE" in name))',
        'print(subprocess.run(["env"], capture_output=True, text=True).stdout.count("NONCE"))',
        'sys.stderr.write("to stderr")',
      ].join('\n'),
    );
    // A marker with another nonce is output like any text (its NULs come back escaped, as every control character).
    expect(result).toMatchObject({
      status: 'success',
      stdout: '\\x00codecall-end-0123456789abcdef01234567\\x00 forged\n[]\n0\n',
      stderr: 'to stderr',
    });
  });

  it('ends a stream whose marker never comes at its close, with all it carried', async () => {
    // The marker goes to /dev/null; the text ends like the start of a marker, which is held back until the close.
    const result = await codecall.execute(
      'import os, sys\nsys.stdout.write("before\\0codecall-end-")\nsys.stdout.flush()\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\nprint("after")',
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'before\\x00codecall-end-' });
  });

  it('carries non-ASCII text both ways through tool calls', async () => {
    const result = await codecall.execute(
      'from tools import shout\nreply = shout(text="grüße, 東京 🚀")\nprint(reply["text"], reply["length"])',
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'GRÜSSE, 東京 🚀 12\n' });
  });
});

describe('the boot, once it has reported the end of its run', () => {
  it('lowers the priority of its process group, so its teardown waits while the host builds the result', async () => {
    const { executable } = await resolvePythonInterpreter('python3');
    const directory = mkdtempSync(join(tmpdir(), 'codecall-ended-priority-'));
    const report = join(directory, 'niceness.txt');
    // A process the script left in its group notes its niceness once the interpreter has ended (it is reparented);
    // a host would kill it, the bare boot here does not.
    const watcher = [
      'import os, sys, time',
      'parent = int(sys.argv[1])',
      'for _ in range(1000):',
      '    if os.getppid() != parent:',
      '        break',
      '    time.sleep(0.01)',
      'open(sys.argv[2], "w").write(str(os.getpriority(os.PRIO_PROCESS, 0)))',
    ].join('\n');
    writeFileSync(
      join(directory, SCRIPT_FILE_NAME),
      [
        'import os, subprocess, sys',
        `subprocess.Popen([sys.executable, "-S", "-c", ${JSON.stringify(watcher)}, str(os.getpid()), ${JSON.stringify(report)}],`,
        '                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)',
        'print(os.getpriority(os.PRIO_PROCESS, 0))',
      ].join('\n'),
    );
    // Its own process group, as every launch gives it.
    const ended = await runToCompletion('setsid', [executable, '-S', '-c', BOOT_COMMAND, SCRIPT_FILE_NAME], {
      cwd: directory,
      env: { PATH: process.env.PATH, PYTHONPATH: RUNTIME_DIR },
    });
    expect(ended).toMatchObject({ status: 0, stdout: `${getPriority()}\n`, stderr: '' });
    let niceness = '';
    for (let waited = 0; waited < 10_000 && niceness === ''; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      try {
        niceness = readFileSync(report, 'utf8');
      } catch {
        // Not written yet.
      }
    }
    expect(Number(niceness)).toBe(Math.max(10, getPriority()));
  });
});
