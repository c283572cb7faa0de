import { beforeAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import type { Codecall } from '../../src/engine/codecall.js';
import { formatResultForModel } from '../../src/engine/result/format-result.js';
import { processAlive, useCodecalls } from '../support/codecall-fixture.js';
import { codecallModes, useCodecallsIn } from '../support/codecall-modes.js';
import { add, sleep } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

describe.each(codecallModes)('%s runs', (mode) => {
  const codecallWith = useCodecallsIn(mode);

  describe('session cells', () => {
    let codecall: Codecall;
    beforeAll(() => {
      codecall = codecallWith({ tools: [add] });
    });

    it('keeps variables and imports between cells', async () => {
      const session = codecall.session();
      expect(session.id).toMatch(/^[0-9a-f]{16}$/);
      await session.execute('import json\nx = 41');
      const result = await session.execute('print(json.dumps({"x": x + 1}))');
      expect(result).toMatchObject({ status: 'success', stdout: '{"x": 42}\n', exitCode: 0, isolation: 'none' });
      expect(result.stateLost).toBeUndefined();
      await session.close();
    });

    it('keeps the state after an exception, and reports it with the cell lines', async () => {
      const session = codecall.session();
      await session.execute('items = [1, 2]');
      const failed = await session.execute('print("before")\nitems[5]');
      expect(failed.status).toBe('error');
      expect(failed.stdout).toBe('before\n');
      expect(failed.error?.type).toBe('IndexError');
      expect(failed.error?.traceback).toContain('line 2');
      expect(failed.error?.traceback).toContain('items[5]');
      expect(failed.error?.traceback).not.toContain('codecall_boot');
      const syntax = await session.execute('def broken(:\n');
      expect(syntax.error?.type).toBe('SyntaxError');
      const after = await session.execute('print(len(items))');
      expect(after).toMatchObject({ status: 'success', stdout: '2\n' });
      await session.close();
    });

    it('treats sys.exit as the end of the cell, not of the session', async () => {
      const session = codecall.session();
      await session.execute('kept = "yes"');
      const exited = await session.execute('import sys\nprint("bye")\nsys.exit(3)');
      expect(exited).toMatchObject({ status: 'error', exitCode: 3, stdout: 'bye\n' });
      const clean = await session.execute('import sys\nsys.exit()');
      expect(clean.status).toBe('success');
      expect((await session.execute('print(kept)')).stdout).toBe('yes\n');
      await session.close();
    });

    it('calls tools inside cells, counting calls and applying maxToolCalls per cell', async () => {
      const session = codecallWith({ tools: [add], limits: { maxToolCalls: 3 } }).session();
      const first = await session.execute(
        'from tools import add, ToolError\ntotal = add(1, 2) + add(3, 4)\nprint(total)',
      );
      expect(first).toMatchObject({ status: 'success', stdout: '10\n', toolCalls: 2 });
      const second = await session.execute(
        [
          'results = []',
          'for i in range(5):',
          '    try:',
          '        results.append(add(i, total))',
          '    except ToolError as error:',
          '        results.append(str(error))',
          'print(results)',
        ].join('\n'),
      );
      expect(second.status).toBe('success');
      expect(second.toolCalls).toBe(3);
      expect(second.stdout).toBe("[10, 11, 12, 'tool call limit reached (3)', 'tool call limit reached (3)']\n");
      await session.close();
    });

    it('refuses tool calls made between cells by a background thread', async () => {
      const session = codecall.session();
      await session.execute(
        [
          'import threading, time',
          'from tools import add, ToolError',
          'outcome = []',
          'def later():',
          '    time.sleep(0.3)',
          '    try:',
          '        outcome.append(add(1, 1))',
          '    except ToolError as error:',
          '        outcome.append(str(error))',
          'worker = threading.Thread(target=later)',
          'worker.start()',
        ].join('\n'),
      );
      await sleep(600);
      const result = await session.execute('worker.join()\nprint(outcome)');
      expect(result.stdout).toMatch(/tools can be called only while a cell runs/);
      expect(result.toolCalls).toBe(0);
      await session.close();
    });

    it('gives each cell only its own output, whatever background threads print between cells', async () => {
      const session = codecall.session();
      const first = await session.execute(
        [
          'import os, sys, threading, time',
          'print("one")',
          'def chatter():',
          '    for _ in range(20):',
          '        print("tick", flush=True)',
          '        sys.stderr.write("tock\\n")',
          '        time.sleep(0.01)',
          'background = threading.Thread(target=chatter)',
          'background.start()',
        ].join('\n'),
      );
      expect(first.stdout.startsWith('one\n')).toBe(true);
      expect(first.stdout).not.toContain('two');
      // The thread ends long before the next cell: its later output belongs to no cell.
      await sleep(800);
      const second = await session.execute('background.join()\nprint("two")\nos.system("echo from-a-subprocess")');
      expect(second.stdout).toBe('two\nfrom-a-subprocess\n');
      expect(second.stderr).toBe('');
      const third = await session.execute(
        [
          'def burst():',
          '    for index in range(10):',
          '        print("bg", index)',
          'worker = threading.Thread(target=burst)',
          'worker.start()',
          'worker.join()',
        ].join('\n'),
      );
      expect(third.stdout.trim().split('\n')).toHaveLength(10);
      await session.close();
    });

    it('runs cells one at a time, in call order', async () => {
      const session = codecall.session();
      await session.execute('log = []');
      const results = await Promise.all(
        ['import time\ntime.sleep(0.2)\nlog.append(1)', 'log.append(2)', 'print(log)'].map((code) =>
          session.execute(code),
        ),
      );
      expect(results[2]?.stdout).toBe('[1, 2]\n');
      await session.close();
    });
  });

  describe('session timeouts and state', () => {
    let codecall: Codecall;
    beforeAll(() => {
      codecall = codecallWith();
    });

    it('interrupts a cell at its timeout and keeps the state', async () => {
      const session = codecall.session();
      await session.execute('x = 7');
      const result = await session.execute('import time\nprint("started", flush=True)\ntime.sleep(60)', {
        timeoutMs: 300,
      });
      expect(result).toMatchObject({ status: 'timeout', reason: 'timeout', stdout: 'started\n' });
      expect(result.error?.type).toBe('Timeout');
      expect(result.stderr).toContain('KeyboardInterrupt');
      expect(result.stateLost).toBeUndefined();
      const after = await session.execute('print(x)');
      expect(after).toMatchObject({ status: 'success', stdout: '7\n' });
      expect(after.stateLost).toBeUndefined();
      await session.close();
    });

    it('kills an interpreter that ignores the interrupt, reports the state lost once, and starts afresh', async () => {
      const session = codecall.session();
      await session.execute('x = 7');
      const result = await session.execute(
        'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)',
        { timeoutMs: 300 },
      );
      expect(result).toMatchObject({ status: 'timeout', reason: 'timeout', stateLost: true });
      expect(formatResultForModel(result)).toMatch(/variables of earlier cells are gone/);
      const after = await session.execute('print(x)');
      expect(after.error?.type).toBe('NameError');
      expect(after.stateLost).toBeUndefined();
      await session.close();
    });

    it('reports the state lost when the interpreter dies in a cell', async () => {
      const session = codecall.session();
      await session.execute('x = 1');
      const died = await session.execute('import os\nprint("bye", flush=True)\nos._exit(3)');
      expect(died).toMatchObject({ status: 'error', exitCode: 3, stdout: 'bye\n', stateLost: true });
      const fresh = await session.execute('print("x" in globals())');
      expect(fresh).toMatchObject({ status: 'success', stdout: 'False\n' });
      await session.close();
    });

    it('interrupts a cell when its signal aborts, and keeps the state', async () => {
      const session = codecall.session();
      await session.execute('x = 3');
      const controller = new AbortController();
      const running = session.execute('import time\ntime.sleep(60)', { signal: controller.signal });
      setTimeout(() => controller.abort(), 200);
      await expect(running).rejects.toMatchObject({ name: 'AbortError' });
      const after = await session.execute('print(x)');
      expect(after).toMatchObject({ status: 'success', stdout: '3\n' });
      expect(after.stateLost).toBeUndefined();
      await session.close();
    });

    it('gives each cell its own CPU budget, and stops a busy cell at it with reason cpu', async () => {
      const session = codecallWith({ limits: { cpuSeconds: 1, timeoutMs: 20_000 } }).session();
      const burn = 'import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.6:\n    pass';
      expect((await session.execute(burn)).status).toBe('success');
      expect((await session.execute(burn)).status).toBe('success');
      const busy = await session.execute('while True:\n    pass');
      expect(busy).toMatchObject({ status: 'limit', reason: 'cpu', stateLost: true });
      await session.close();
    });

    it('starts fresh after reset, without reporting a loss the caller asked for', async () => {
      const session = codecall.session();
      await session.execute('x = 1');
      await session.reset();
      const result = await session.execute('print("x" in globals())');
      expect(result).toMatchObject({ status: 'success', stdout: 'False\n' });
      expect(result.stateLost).toBeUndefined();
      await session.close();
    });

    it('stops an idle interpreter after its idle timeout; the next cell starts fresh with stateLost', async () => {
      const session = codecall.session({ idleTimeoutMs: 100 });
      const first = await session.execute('import os\nx = 1\nprint(os.getpid())');
      const pid = Number(first.stdout);
      for (let waited = 0; waited < 10_000 && processAlive(pid); waited += 50) await sleep(50);
      expect(processAlive(pid)).toBe(false);
      const result = await session.execute('print("x" in globals())');
      expect(result).toMatchObject({ status: 'success', stdout: 'False\n', stateLost: true });
      await session.close();
    });

    it('counts the idle time from the end of the last cell, also after a cell longer than the idle timeout', async () => {
      const session = codecall.session({ idleTimeoutMs: 150 });
      await session.execute('import os, time\nx = 1');
      // The idle time runs out during this cell: a busy session keeps its interpreter.
      const long = await session.execute('time.sleep(0.4)\nprint(os.getpid())');
      const pid = Number(long.stdout);
      const next = await session.execute('print(x)');
      expect(next).toMatchObject({ status: 'success', stdout: '1\n' });
      expect(next.stateLost).toBeUndefined();
      for (let waited = 0; waited < 10_000 && processAlive(pid); waited += 50) await sleep(50);
      expect(processAlive(pid)).toBe(false);
      const fresh = await session.execute('print("x" in globals())');
      expect(fresh).toMatchObject({ status: 'success', stdout: 'False\n', stateLost: true });
      await session.close();
    });
  });
});

describe('session lifecycle', () => {
  it('evicts the least recently used idle session past maxLive, never a running one', async () => {
    const codecall = codecallWith({ sessions: { maxLive: 2 } });
    const [first, second, third] = [codecall.session(), codecall.session(), codecall.session()];
    await first.execute('name = "first"');
    await second.execute('name = "second"');
    // `first` runs a cell while `third` starts: `second` is the one evicted.
    const running = first.execute('import time\ntime.sleep(0.5)\nprint(name)');
    await sleep(100);
    await third.execute('name = "third"');
    expect(await running).toMatchObject({ status: 'success', stdout: 'first\n' });
    const evicted = await second.execute('print("name" in globals())');
    expect(evicted).toMatchObject({ stdout: 'False\n', stateLost: true });
    await codecall.close();
  });

  it('closes a session: its interpreter is gone and later calls reject with CLOSED', async () => {
    const codecall = codecallWith();
    const session = codecall.session();
    const pid = Number((await session.execute('import os\nprint(os.getpid())')).stdout);
    expect(processAlive(pid)).toBe(true);
    await session.close();
    expect(processAlive(pid)).toBe(false);
    await expect(session.execute('print(1)')).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(session.reset()).rejects.toMatchObject({ code: 'CLOSED' });
    await session.close();
  });

  it('closes every session with the codecall, ending a running cell as aborted', async () => {
    const codecall = codecallWith();
    const session = codecall.session();
    const pid = Number((await session.execute('import os\nprint(os.getpid())')).stdout);
    const running = session.execute('import time\ntime.sleep(60)');
    await sleep(200);
    await codecall.close();
    expect(await running).toMatchObject({ status: 'aborted', stateLost: true });
    expect(processAlive(pid)).toBe(false);
    expect(() => codecall.session()).toThrow(CodecallError);
  });

  it('checks session options', () => {
    const codecall = codecallWith();
    expect(() => codecall.session({ idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs/);
    expect(() => codecall.session({ bogus: 1 } as never)).toThrow(
      /^unknown key "bogus" in session options; known keys: limits, idleTimeoutMs$/,
    );
    expect(() => codecall.session({ limits: { timeoutMs: -1 } })).toThrow(CodecallError);
    expect(() => codecallWith({ sessions: { maxLive: 0 } })).toThrow(/maxLive/);
  });

  it('runs cells with the environment, limits and working directory of a fresh run', async () => {
    const codecall = codecallWith();
    const probe = [
      'import os, resource, sys',
      'print(sorted(os.environ))',
      'print([resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE")])',
      'print(os.getcwd() == os.environ["HOME"], sorted(os.listdir("."))[:1])',
      'print(sys.flags.no_site, os.environ["TMPDIR"].startswith(os.getcwd()))',
    ].join('\n');
    const fresh = await codecall.execute(probe);
    const session = codecall.session();
    const cell = await session.execute(probe);
    expect(cell.stdout).toBe(fresh.stdout);
    await session.close();
  });
});

describe('the end of a cell output', () => {
  it('keeps what a cell wrote to the descriptors, what its subprocess wrote and what it printed last in order', async () => {
    const codecall = codecallWith();
    const session = codecall.session();
    await session.execute('import os, subprocess, sys');
    for (let cell = 0; cell < 40; cell += 1) {
      const result = await session.execute(
        [
          `os.write(1, b"direct ${cell}\\n")`,
          `os.write(2, b"error ${cell}\\n")`,
          `print("printed ${cell}")`,
          ...(cell % 10 === 0 ? ['subprocess.run([sys.executable, "-c", "print(\'child\')"], check=True)'] : []),
          `print("last ${cell}")`,
        ].join('\n'),
      );
      const child = cell % 10 === 0 ? 'child\n' : '';
      expect(result.stdout).toBe(`direct ${cell}\nprinted ${cell}\n${child}last ${cell}\n`);
      expect(result.stderr).toBe(`error ${cell}\n`);
    }
    await session.close();
  });

  it('writes what a cell printed last to the file it made its stdout, not into the result', async () => {
    const codecall = codecallWith();
    const session = codecall.session();
    const redirected = await session.execute(
      [
        'import os',
        'saved = os.dup(1)',
        'target = os.open("redirected.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)',
        'os.dup2(target, 1)',
        'print("into the file")',
      ].join('\n'),
    );
    expect(redirected.status).toBe('success');
    expect(redirected.stdout).toBe('');
    const restored = await session.execute(
      'os.dup2(saved, 1)\nprint(open("redirected.txt", "rb").read().startswith(b"into the file\\n"))',
    );
    expect(restored.stdout).toBe('True\n');
    await session.close();
  });

  it('gives what a cell printed that is not UTF-8 as a run gets it', async () => {
    const codecall = codecallWith();
    const code =
      'import sys\nsys.stdout.buffer.write(b"caf\\xe9 \\xff\\xfe ok\\n")\nsys.stdout.write("tail \\u00e9\\n")';
    const run = await codecall.execute(code);
    const session = codecall.session();
    const cell = await session.execute(code);
    expect(cell.stdout).toBe(run.stdout);
    expect(cell.stdout).toContain('tail é');
    const text = await session.execute('print("ünïcödé ✓")');
    expect(text.stdout).toBe('ünïcödé ✓\n');
    await session.close();
  });
});
