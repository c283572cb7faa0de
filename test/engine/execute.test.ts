import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { CodecallOptions } from '../../src/engine/codecall.js';
import { formatResultForModel } from '../../src/engine/result/format-result.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { captureError } from '../support/capture-error.js';
import { processAlive, useCodecalls } from '../support/codecall-fixture.js';
import { add, createBarrierTool, sleep, slow } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

describe('running scripts', () => {
  const codecall = codecallWith({ tools: [add, slow] });

  it('returns what the script prints', async () => {
    const result = await codecall.execute('print(1)');
    expect(result).toMatchObject({ status: 'success', stdout: '1\n', exitCode: 0, toolCalls: 0, isolation: 'none' });
  });

  it('calls a tool and gets a parsed value back', async () => {
    const result = await codecall.execute('from tools import add\nprint(add(1, 2), add(a=2.5, b=0.25))');
    expect(result).toMatchObject({ status: 'success', stdout: '3 2.75\n', toolCalls: 2 });
  });

  it('reports an uncaught exception with its type, message and the script frames only', async () => {
    const result = await codecall.execute('x = {}\nprint("partial")\nx["missing"]');
    expect(result.status).toBe('error');
    expect(result.stdout).toBe('partial\n');
    expect(result.error?.type).toBe('KeyError');
    expect(result.error?.message).toBe("'missing'");
    expect(result.error?.traceback).toContain('File "script.py", line 3');
    expect(result.error?.traceback).not.toContain('codecall_boot');
  });

  it("quotes the script's own lines from a mounted workspace that holds another script.py, and loads linecache only for them", async () => {
    const workspace = mkdtempSync(join(tmpdir(), 'codecall-workspace-lines-'));
    // Readable by the unprivileged user a root host runs scripts as.
    chmodSync(workspace, 0o755);
    writeFileSync(join(workspace, 'script.py'), 'print("the workspace file")\n');
    const mounted = codecallWith({ workspace, workspaceMount: 'read-only' });
    try {
      const uncaught = await mounted.execute('x = 1\nraise ValueError("boom")  # raised here');
      expect(uncaught.error?.traceback).toContain(
        'File "script.py", line 2, in <module>\n    raise ValueError("boom")  # raised here',
      );
      const formatted = await mounted.execute(
        'import traceback\ntry:\n    1 / 0  # divided here\nexcept ZeroDivisionError:\n    print(traceback.format_exc())',
      );
      expect(formatted.stdout).toContain('File "script.py", line 3, in <module>\n    1 / 0  # divided here');
      const warned = await mounted.execute('import warnings\nwarnings.warn("careful")  # warned here');
      expect(warned.stderr).toBe('script.py:2: UserWarning: careful\n  warnings.warn("careful")  # warned here\n');
      // linecache imports tokenize, re and enum: milliseconds a run that formats no traceback does without.
      const plain = await mounted.execute('import sys\nprint("linecache" in sys.modules)');
      expect(plain.stdout).toBe('False\n');
    } finally {
      rmSync(workspace, { recursive: true, force: true });
    }
  });

  it('reports a syntax error with its line', async () => {
    const result = await codecall.execute('print("ok")\ndef broken(:\n');
    expect(result.status).toBe('error');
    expect(result.error?.type).toBe('SyntaxError');
    expect(result.error?.message).toContain('line 2');
  });

  it('reports sys.exit with a non-zero status as an error', async () => {
    const result = await codecall.execute('import sys\nprint("bye")\nsys.exit(3)');
    expect(result).toMatchObject({ status: 'error', exitCode: 3, stdout: 'bye\n' });
    expect(result.error?.type).toBe('SystemExit');
  });

  it('treats sys.exit(0) as success', async () => {
    const result = await codecall.execute('import sys\nsys.exit(0)');
    expect(result.status).toBe('success');
  });
});

describe('tool calls', () => {
  it('refuses wrong argument types with a ToolError naming the field, without calling the handler', async () => {
    const execute = vi.fn(async ({ a, b }: { a: number; b: number }) => a + b);
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'add',
          description: 'Add.',
          inputSchema: z.object({ a: z.number(), b: z.number() }),
          execute,
        }),
      ],
    });
    const result = await codecall.execute(
      'from tools import add, ToolError\ntry:\n    add(1, "two")\nexcept ToolError as error:\n    print("ToolError:", error)',
    );
    expect(result.status).toBe('success');
    expect(result.stdout).toMatch(/^ToolError: add: .*'b'/);
    expect(execute).not.toHaveBeenCalled();
  });

  it('turns a throwing handler into a ToolError with its message and no host stack trace', async () => {
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'explode',
          description: 'Always fails.',
          inputSchema: { type: 'object', properties: {} },
          execute: async () => {
            throw new Error('database unreachable');
          },
        }),
      ],
    });
    const result = await codecall.execute('from tools import explode\nexplode()');
    expect(result.status).toBe('error');
    expect(result.error).toMatchObject({ type: 'ToolError', message: 'database unreachable' });
    expect(result.stderr).not.toContain('.ts:');
    expect(result.stderr).not.toContain('node:internal');
  });

  it('turns results that cannot cross the channel into tool errors', async () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const codecall = codecallWith({
      tools: [
        defineTool({ name: 'big', description: 'BigInt.', inputSchema: { type: 'object' }, execute: () => 10n }),
        defineTool({
          name: 'loop',
          description: 'Circular.',
          inputSchema: { type: 'object' },
          execute: () => circular,
        }),
        defineTool({
          name: 'nothing',
          description: 'Undefined.',
          inputSchema: { type: 'object' },
          execute: () => undefined,
        }),
      ],
    });
    const result = await codecall.execute(
      [
        'from tools import big, loop, nothing, ToolError',
        'for fn in (big, loop):',
        '    try:',
        '        fn()',
        '    except ToolError as error:',
        '        print(type(error).__name__, "|", error)',
        'print(repr(nothing()))',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ToolError \| .*BigInt/);
    expect(lines[1]).toMatch(/^ToolError \| .*circular/i);
    expect(lines[2]).toBe('None');
  });

  // The barrier tool answers only once every call is in flight: calls made one at a time would never get past it
  // (the run's timeout then ends the test with status "timeout").
  it('runs 20 threads calling a tool concurrently: all 20 calls are in flight at once', async () => {
    const barrier = createBarrierTool(20);
    const codecall = codecallWith({ tools: [barrier.tool] });
    const result = await codecall.execute(
      [
        'import threading',
        'from tools import meet',
        'results = []',
        'def worker():',
        '    results.append(meet())',
        'threads = [threading.Thread(target=worker) for _ in range(20)]',
        'for thread in threads: thread.start()',
        'for thread in threads: thread.join()',
        'print(len(results), results.count("done"))',
      ].join('\n'),
      { timeoutMs: 20_000 },
    );
    expect(result).toMatchObject({ status: 'success', stdout: '20 20\n', toolCalls: 20 });
    expect(barrier.maxInFlight).toBe(20);
  });

  it('runs 50 asyncio.gather calls concurrently through tools.aio: all 50 are in flight at once', async () => {
    const barrier = createBarrierTool(50);
    const codecall = codecallWith({ tools: [barrier.tool] });
    const result = await codecall.execute(
      [
        'import asyncio',
        'from tools import aio',
        'async def main():',
        '    results = await asyncio.gather(*(aio.meet() for _ in range(50)))',
        '    print(len(results), results.count("done"))',
        'asyncio.run(main())',
      ].join('\n'),
      { timeoutMs: 20_000 },
    );
    expect(result).toMatchObject({ status: 'success', stdout: '50 50\n', toolCalls: 50 });
    expect(barrier.maxInFlight).toBe(50);
  });

  it('answers quick and slow calls in turn, and megabytes of arguments sent after quick calls', async () => {
    // Quick replies are polled for and slow ones slept on; polling leaves the channel non-blocking, which a large
    // frame then fills.
    const measure = defineTool({
      name: 'measure',
      description: 'Length of a text.',
      inputSchema: z.object({ text: z.string() }),
      execute: async ({ text }) => text.length,
    });
    const codecall = codecallWith({ tools: [add, slow, measure] });
    const result = await codecall.execute(
      [
        'from tools import add, measure, slow',
        'for i in range(50):',
        '    assert add(a=i, b=1) == i + 1',
        'assert slow() == "done"',
        'for i in range(50):',
        '    assert add(a=i, b=2) == i + 2',
        'for size in (1 << 20, 2 << 20, 4 << 20):',
        '    for i in range(50):',
        '        assert add(a=i, b=size) == i + size',
        '    assert measure(text="x" * size) == size',
        'assert slow() == "done" and add(a=1, b=1) == 2',
        'print("ok")',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'ok\n', toolCalls: 256 });
  });

  it('answers calls past maxToolCalls with "tool call limit reached (N)"', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 5 } });
    const result = await codecall.execute(
      [
        'from tools import add, ToolError',
        'errors = []',
        'for i in range(8):',
        '    try:',
        '        add(i, 1)',
        '    except ToolError as error:',
        '        errors.append(str(error))',
        'print(len(errors), errors[0])',
      ].join('\n'),
    );
    expect(result.stdout).toBe('3 tool call limit reached (5)\n');
    expect(result.toolCalls).toBe(5);
  });

  it('reports reason tool_calls when the limit ends the script', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 2 } });
    const result = await codecall.execute('from tools import add\nfor i in range(5):\n    add(i, i)');
    expect(result).toMatchObject({ status: 'limit', reason: 'tool_calls' });
    expect(result.hint).toContain('2 tool calls');
  });

  it('times out a tool call that never settles, and ignores it settling after the run', async () => {
    let settleLate: ((value: string) => void) | undefined;
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'hang',
          description: 'Never answers.',
          inputSchema: { type: 'object' },
          execute: () =>
            new Promise<string>((resolve) => {
              settleLate = resolve;
            }),
        }),
      ],
      limits: { toolCallTimeoutMs: 300 },
    });
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const result = await codecall.execute(
      'from tools import hang, ToolError\ntry:\n    hang()\nexcept ToolError as error:\n    print(error)',
    );
    expect(result.stdout).toBe('hang: the tool call timed out after 0.3 seconds\n');
    settleLate?.('too late');
    await sleep(20);
    process.off('unhandledRejection', onRejection);
    expect(rejections).toEqual([]);
  });

  it('gives handlers an AbortSignal that fires when the run ends', async () => {
    let signal: AbortSignal | undefined;
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'wait',
          description: 'Waits for its signal.',
          inputSchema: { type: 'object' },
          execute: (_args, context) => {
            signal = context.signal;
            return new Promise(() => {});
          },
        }),
      ],
      limits: { timeoutMs: 500 },
    });
    const result = await codecall.execute('from tools import wait\nwait()');
    expect(result.status).toBe('timeout');
    expect(signal?.aborted).toBe(true);
  });

  it('caps a result larger than the frame limit with a clear error', async () => {
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'huge',
          description: 'Too big.',
          inputSchema: { type: 'object' },
          execute: () => 'x'.repeat(2 << 20),
        }),
      ],
      limits: { maxFrameBytes: 1 << 20 },
    });
    const result = await codecall.execute(
      'from tools import huge, ToolError\ntry:\n    huge()\nexcept ToolError as error:\n    print(error)',
    );
    expect(result.stdout).toMatch(/^huge: the result is \d+ bytes, over the channel limit of 1048576 bytes/);
  });

  it('delivers megabytes of text whole and exact, to threads and asyncio tasks at once, between small replies', async () => {
    // Multi-byte characters, escapes JSON would need, and lengths that do not line up with any read size.
    const text = (size: number) => `é中😀"\\\n\u0001${'x'.repeat(size)}`;
    const codecall = codecallWith({
      tools: [
        defineTool({
          name: 'text',
          description: 'Long text.',
          inputSchema: { type: 'object', properties: { size: { type: 'integer' } } },
          execute: ({ size }) => ({ size, content: text(size as number), lone: `\ud800${'y'.repeat(size as number)}` }),
        }),
        add,
      ],
    });
    const result = await codecall.execute(
      [
        'import asyncio, threading',
        'from tools import add, text',
        'import tools.aio as aio',
        'def expected(size):',
        '    return {"size": size, "content": "é中😀\\"\\\\\\n\\u0001" + "x" * size, "lone": "\\ud800" + "y" * size}',
        'sizes = [5000, 70000, 3 << 20, 65531, 1 << 20]',
        'failures = []',
        'def work(index):',
        '    for size in sizes[index % 5:] + sizes[:index % 5]:',
        '        if text(size=size) != expected(size) or add(a=index, b=size) != index + size:',
        '            failures.append((index, size))',
        'threads = [threading.Thread(target=work, args=(index,)) for index in range(6)]',
        '[thread.start() for thread in threads]',
        '[thread.join() for thread in threads]',
        'async def gather():',
        '    return await asyncio.gather(*(aio.text(size=size) for size in sizes * 2))',
        'assert [reply == expected(size) for reply, size in zip(asyncio.run(gather()), sizes * 2)] == [True] * 10',
        'print(failures)',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: '[]\n' });
  });
});

describe('limits and cleanup', () => {
  it('stops time.sleep(999) at a 2 s timeout, keeps earlier prints, and leaves no child process', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      [
        'import subprocess, time',
        'child = subprocess.Popen(["sleep", "999"])',
        'print("child", child.pid, flush=True)',
        'time.sleep(999)',
      ].join('\n'),
      { timeoutMs: 2_000 },
    );
    expect(result.status).toBe('timeout');
    expect(result.reason).toBe('timeout');
    const pid = Number(/child (\d+)/.exec(result.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(processAlive(pid)).toBe(false);
    expect(formatResultForModel(result)).toContain('2 s');
  });

  it('keeps head and tail of 15,000 lines with a notice, and saves the complete output', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      'print("HEAD")\nfor i in range(15000):\n    print(f"line {i:05d}")\nprint("TAIL")',
    );
    expect(result.status).toBe('success');
    expect(result.stdout.startsWith('HEAD\nline 00000\n')).toBe(true);
    expect(result.stdout.endsWith('line 14999\nTAIL\n')).toBe(true);
    expect(result.stdout).toMatch(
      /\[… \d+ bytes omitted: kept the first \d+ and the last \d+ of \d+ bytes; the complete output is in .+ …\]/,
    );
    const truncation = result.stdoutTruncated;
    expect(truncation).toBeDefined();
    expect(truncation?.totalBytes).toBe(5 + 15000 * 11 + 5);
    const saved = readFileSync(truncation?.fullOutputPath ?? '', 'utf8');
    expect(saved.length).toBe(truncation?.totalBytes);
    expect(saved.split('\n')[15000]).toBe('line 14999');
    expect(Buffer.byteLength(result.stdout)).toBeLessThan(codecall.limits.maxStdoutBytes + 300);
  });

  it('shows the script no host variable outside the allowlist', async () => {
    process.env.OPENAI_API_KEY = 'sk-test-secret';
    process.env.GITHUB_TOKEN = 'ghp_test_secret';
    process.env.TZ = 'UTC';
    try {
      // Output as printed: masking would hide the leak this test looks for.
      const codecall = codecallWith({ redactSecrets: false });
      const result = await codecall.execute('import os, json\nprint(json.dumps(dict(os.environ)))');
      const environment = JSON.parse(result.stdout) as Record<string, string>;
      expect(environment.OPENAI_API_KEY).toBeUndefined();
      expect(environment.GITHUB_TOKEN).toBeUndefined();
      expect(result.stdout).not.toContain('secret');
      // The interpreter's own commands (python, python3) first, then the system directories only.
      expect(environment.PATH).toMatch(/^[^:]*\/modules\/bin-[0-9a-f]{16}:\/usr\/local\/bin:\/usr\/bin:\/bin$/);
      expect(environment.PYTHONUTF8).toBe('1');
      expect(environment.PYTHONDONTWRITEBYTECODE).toBe('1');
      expect(environment.PYTHONUNBUFFERED).toBe('1');
      expect(environment.TZ).toBe('UTC');
      const allowed =
        /^(PATH|HOME|TMPDIR|LANG|LC_ALL|TZ|MALLOC_ARENA_MAX|MPLBACKEND|PYTHON[A-Z0-9]+|CODECALL_[A-Z_]+)$/;
      expect(Object.keys(environment).filter((name) => !allowed.test(name))).toEqual([]);
    } finally {
      delete process.env.OPENAI_API_KEY;
      delete process.env.GITHUB_TOKEN;
    }
  });

  it('passes configured variables, as they were when the codecall was created', async () => {
    process.env.PASSTHROUGH_TEST_A = 'passed';
    process.env.PASSTHROUGH_TEST_B = 'added later';
    try {
      const env: Record<string, string> = { GREETING: 'hello' };
      const envPassthrough = ['PASSTHROUGH_TEST_A'];
      const codecall = codecallWith({ env, envPassthrough });
      env.GREETING = 'changed';
      env.LD_PRELOAD = '/x.so';
      envPassthrough.push('PASSTHROUGH_TEST_B');
      const result = await codecall.execute(
        'import os\nprint([os.environ.get(name) for name in ("GREETING", "LD_PRELOAD", "PASSTHROUGH_TEST_A", "PASSTHROUGH_TEST_B")])',
      );
      expect(result.stdout).toBe("['hello', None, 'passed', None]\n");
    } finally {
      delete process.env.PASSTHROUGH_TEST_A;
      delete process.env.PASSTHROUGH_TEST_B;
    }
  });

  it('refuses a bad env, envPassthrough, network, redactSecrets, sandbox, python or stateDir when the codecall is created', () => {
    const cases: [CodecallOptions, RegExp][] = [
      [{ env: { LD_PRELOAD: '/x.so' } }, /^env: "LD_PRELOAD" cannot be set for scripts/],
      [{ env: { PYTHONPATH: '/x' } }, /^env: "PYTHONPATH" cannot be set for scripts/],
      [{ env: { CODECALL_CHANNEL_FD: '4' } }, /^env: "CODECALL_CHANNEL_FD" cannot be set for scripts/],
      [{ env: { COUNT: 1 as never } }, /^env\.COUNT must be a string, got 1$/],
      [{ env: { 'A=B': 'x' } }, /^env: "A=B" is not a valid environment variable name$/],
      [{ env: { 'A\u0000B': 'x' } }, /^env: "A\\u0000B" is not a valid environment variable name$/],
      [{ env: 'A=1' as never }, /^env must be an object of strings, got "A=1"$/],
      [{ envPassthrough: 'TZ' as never }, /^envPassthrough must be an array of variable names, got "TZ"$/],
      [{ envPassthrough: ['LD_LIBRARY_PATH'] }, /^envPassthrough: "LD_LIBRARY_PATH" cannot be set for scripts/],
      [{ envPassthrough: [3 as never] }, /^envPassthrough: 3 is not a valid environment variable name$/],
      [{ network: 'yes' as never }, /^network must be true or false, got "yes"$/],
      // null is a value given, never taken for the default.
      [{ network: null as never }, /^network must be true or false, got null$/],
      [{ redactSecrets: null as never }, /^redactSecrets must be true or false, got null$/],
      [
        { files: { allowVersionControlWrites: null as never } },
        /^files.allowVersionControlWrites must be true or false, got null$/,
      ],
      [{ sandbox: null as never }, /^sandbox must be one of auto, bubblewrap, none, got null$/],
      [{ python: null as never }, /^python must be a command or path, got null$/],
      [{ stateDir: 3 as never }, /^stateDir must be a path, got 3$/],
      [{ stateDir: '' }, /^stateDir must be a path, got ""$/],
    ];
    for (const [options, message] of cases) {
      const error = captureError(() => codecallWith(options));
      expect(error.code).toBe('INVALID_CONFIG');
      expect(error.message).toMatch(message);
    }
  });

  it('runs each script in a fresh private directory that is removed afterwards, without following links', async () => {
    const codecall = codecallWith();
    const outside = mkdtempSync(join(tmpdir(), 'codecall-canary-'));
    writeFileSync(join(outside, 'canary.txt'), 'still here');
    const result = await codecall.execute(
      [
        'import os',
        `os.symlink(${JSON.stringify(outside)}, "link")`,
        'open("mine.txt", "w").write("x")',
        'print(os.getcwd())',
        'print(sorted(os.listdir(".")))',
      ].join('\n'),
    );
    const [workDir, listing] = result.stdout.trim().split('\n');
    expect(listing).toBe("['artifacts', 'link', 'mine.txt', 'script.py', 'tmp']");
    expect(existsSync(workDir ?? '')).toBe(false);
    expect(readFileSync(join(outside, 'canary.txt'), 'utf8')).toBe('still here');
    const second = await codecall.execute('import os\nprint(os.getcwd())');
    expect(second.stdout.trim()).not.toBe(workDir);
  });

  it('copes with directories nested past PATH_MAX when cleaning up (R17)', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      'import os\nfor _ in range(1500):\n    os.mkdir("a")\n    os.chdir("a")\nprint(len(os.getcwd()))',
    );
    expect(result.status).toBe('success');
    expect(Number(result.stdout)).toBeGreaterThan(3000);
  });

  it('shows the script only stdio and the channel, and keeps the channel from its subprocesses (E19)', async () => {
    const codecall = codecallWith({ tools: [add] });
    const result = await codecall.execute(
      [
        'import os, subprocess',
        'from tools import add',
        'add(1, 1)',
        'fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))',
        'print([fd for fd in fds if fd != fds[-1]], os.readlink("/proc/self/fd/3").startswith("socket:"))',
        'listing = subprocess.run(["sh", "-c", "ls -l /proc/$$/fd"], capture_output=True, text=True, close_fds=False)',
        'print("socket:" in listing.stdout)',
      ].join('\n'),
    );
    // The last descriptor is the one os.listdir itself opened to read the directory.
    expect(result.stdout).toBe('[0, 1, 2, 3] True\nFalse\n');
  });

  it('ends a run with an uncaught MemoryError as reason memory (R3)', async () => {
    const codecall = codecallWith({ limits: { memoryBytes: 256 * 1024 * 1024 } });
    const result = await codecall.execute('blocks = [bytearray(50 << 20) for _ in range(999)]');
    expect(result).toMatchObject({ status: 'limit', reason: 'memory' });
    expect(result.error?.type).toBe('MemoryError');
  });

  it('stops a busy loop at its CPU limit with reason cpu (R5)', async () => {
    const codecall = codecallWith({ limits: { cpuSeconds: 1, timeoutMs: 10_000 } });
    const result = await codecall.execute('while True:\n    pass');
    expect(result).toMatchObject({ status: 'limit', reason: 'cpu' });
  });

  it('refuses a file past maxFileBytes with EFBIG (R7)', async () => {
    const codecall = codecallWith({ limits: { maxFileBytes: 1 << 20 } });
    const result = await codecall.execute(
      'try:\n    open("big", "wb").write(b"\\0" * (2 << 20))\nexcept OSError as error:\n    print(error.errno, error.strerror)',
    );
    expect(result.stdout).toBe('27 File too large\n');
  });

  it('refuses files past maxOpenFiles with EMFILE (R13)', async () => {
    const codecall = codecallWith({ limits: { maxOpenFiles: 64 } });
    const result = await codecall.execute(
      'files = []\ntry:\n    while True:\n        files.append(open("/dev/null"))\nexcept OSError as error:\n    print(error.errno, len(files) < 64)',
    );
    expect(result.stdout).toBe('24 True\n');
  });

  it('kills a print flood at maxOutputBytes with reason output, keeping the host responsive (R10)', async () => {
    const codecall = codecallWith({ limits: { maxOutputBytes: 4 << 20 } });
    const result = await codecall.execute("while True:\n    print('x' * 10**6)");
    expect(result).toMatchObject({ status: 'limit', reason: 'output' });
    expect(result.stdoutTruncated?.totalBytes).toBeGreaterThan(4 << 20);
  });

  it('drains stderr separately while stdout is idle (R11)', async () => {
    const codecall = codecallWith({ limits: { maxOutputBytes: 4 << 20 } });
    const result = await codecall.execute("import sys\nwhile True:\n    sys.stderr.write('e' * 10**6)");
    expect(result).toMatchObject({ status: 'limit', reason: 'output', stdout: '' });
    expect(result.stderr).toContain('bytes of stderr omitted');
  });

  it('handles a gigantic line without a newline (R12)', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute("import sys\nsys.stdout.write('x' * 3_000_000)");
    expect(result.status).toBe('success');
    expect(result.stdoutTruncated?.totalBytes).toBe(3_000_000);
  });

  it('keeps the wall-clock timeout absolute while the script keeps printing (R15)', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute("import time\nwhile True:\n    print('.', flush=True)\n    time.sleep(0.1)", {
      timeoutMs: 1_000,
    });
    // An idle timeout that output resets would never end this run; the test's own timeout would.
    expect(result).toMatchObject({ status: 'timeout', reason: 'timeout' });
  });

  it('aborts a run through an AbortSignal: rejects with AbortError and kills the process', async () => {
    const codecall = codecallWith();
    const controller = new AbortController();
    const run = codecall.execute('import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(30)', {
      signal: controller.signal,
    });
    await sleep(300);
    controller.abort();
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('kills runs in progress on close() and reports them aborted', async () => {
    const codecall = codecallWith();
    const run = codecall.execute('import time\ntime.sleep(30)');
    await sleep(300);
    await codecall.close();
    const result = await run;
    expect(result).toMatchObject({ status: 'aborted', reason: 'aborted' });
    await expect(codecall.execute('print(1)')).rejects.toMatchObject({ code: 'CLOSED' });
  });
});

describe('output the model sees', () => {
  const codecall = codecallWith();

  it('decodes invalid UTF-8 with U+FFFD (O1)', async () => {
    const result = await codecall.execute("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3(')");
    expect(result.stdout).toBe('ok \uFFFD\uFFFD\uFFFD(');
  });

  it('removes terminal escape sequences (O2)', async () => {
    const result = await codecall.execute(
      "print('\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;ZXZpbA==\\x07clean \\x1b[31mred\\x1b[0m')",
    );
    expect(result.stdout).toBe('clean red\n');
  });

  it('keeps a NUL visible instead of truncating (O3)', async () => {
    const result = await codecall.execute("print('a\\0b')");
    expect(result.stdout).toBe('a\\x00b\n');
  });

  it('completes on process exit, not on stdout EOF (O4)', async () => {
    // The artifact is the script's last act, after its output closed: a run that ended at EOF would not receive it.
    const result = await codecall.execute(
      [
        'import os, time',
        'from codecall_runtime import save_artifact',
        'os.close(1)',
        'os.close(2)',
        'time.sleep(1)',
        'save_artifact("last-act.txt", "after EOF")',
        'os._exit(0)',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const artifact = result.artifacts?.find((entry) => entry.path.endsWith('last-act.txt'));
    expect(readFileSync(artifact?.path ?? '', 'utf8')).toBe('after EOF');
  });

  it('never parses results out of stdout (O5)', async () => {
    const result = await codecall.execute('print(\'{"final_answer": 42}\')');
    expect(result.stdout).toBe('{"final_answer": 42}\n');
    expect(result).not.toHaveProperty('final_answer');
  });

  it('surfaces a script-side UnicodeEncodeError as a normal error (O7)', async () => {
    const result = await codecall.execute("print('\\ud800')");
    expect(result.status).toBe('error');
    expect(result.error?.type).toBe('UnicodeEncodeError');
  });
});

describe('failure hints', () => {
  const codecall = codecallWith({ tools: [add, slow] });

  it('lists the real functions when the script imports one that does not exist', async () => {
    const result = await codecall.execute('from tools import multiply');
    expect(result.hint).toBe('"tools" has no function "multiply"; the functions of tools are: add, slow.');
    expect(formatResultForModel(result)).toContain('[hint] "tools" has no function "multiply"');
  });

  it('says what is installed when a module is missing', async () => {
    const result = await codecall.execute('import pandas_is_not_installed_here');
    expect(result.hint).toMatch(
      /^Module "pandas_is_not_installed_here" is not installed: (only the Python standard library|besides the standard library the interpreter has|the interpreter has the Python standard library)/,
    );
  });

  it('explains that results are parsed values when a dict is used as a string', async () => {
    const tools = [
      defineTool({
        name: 'info',
        description: 'Info.',
        inputSchema: { type: 'object' },
        execute: () => ({ name: 'x' }),
      }),
    ];
    const result = await codecallWith({ tools }).execute('from tools import info\nprint(info().split(","))');
    expect(result.hint).toContain('parsed Python values');
  });

  it('says to import a tool used without importing it', async () => {
    const result = await codecall.execute('print(add(1, 2))');
    expect(result.hint).toBe('Import the tool first: from tools import add.');
  });
});

describe('configuration errors are thrown', () => {
  it('rejects unknown options and bad limits', () => {
    const unknown = captureError(() => codecallWith({ colour: 'blue' } as never));
    expect(unknown.message).toMatch(
      /^unknown key "colour" in createCodecall options; known keys: tools, builtinTools, workspace, workspaceMount, readOnlyPaths, moduleName, python, sandbox, limits, mcpServers, databases, env, envPassthrough, network, stateDir, pool, sessions, /,
    );
    expect(unknown.details).toMatchObject({ key: 'colour', where: 'createCodecall options' });
    expect(() => codecallWith({ limits: { timeoutMs: -1 } })).toThrow(
      /limits.timeoutMs must be an integer >= 1, got -1/,
    );
    expect(() => codecallWith({ limits: { maxDiskBytes: 4096 } })).toThrow(
      /limits.maxDiskBytes must be an integer >= 1048576, got 4096/,
    );
    expect(() => codecallWith({ limits: { speed: 3 } as never })).toThrow(
      /^unknown key "speed" in limits; known keys: timeoutMs, maxToolCalls, /,
    );
    expect(() => codecallWith({ limits: { constructor: 3 } as never })).toThrow(/^unknown key "constructor" in limits/);
    expect(() => codecallWith({ pool: { size: 1, warm: true } as never })).toThrow(
      /^unknown key "warm" in pool; known keys: size$/,
    );
    expect(() => codecallWith({ sessions: { max: 2 } as never })).toThrow(
      /^unknown key "max" in sessions; known keys: maxLive, idleTimeoutMs$/,
    );
    expect(() => codecallWith({ sandbox: 'docker' as never })).toThrow(/sandbox must be one of/);
  });

  it('rejects a missing interpreter when the first run needs it', async () => {
    const codecall = codecallWith({ python: 'python-does-not-exist-3' });
    await expect(codecall.execute('print(1)')).rejects.toMatchObject({ code: 'INTERPRETER_NOT_FOUND' });
  });
});

describe('module name', () => {
  it('refuses a module name that would hide a standard library module', async () => {
    const codecall = codecallWith({ moduleName: 'json' });
    await expect(codecall.execute('print(1)')).rejects.toThrow(
      /moduleName "json" is a module of Python's standard library/,
    );
  });

  it('serves the tools under a configured module name', async () => {
    const codecall = codecallWith({ moduleName: 'hermes_tools', tools: [add] });
    const result = await codecall.execute('from hermes_tools import add\nprint(add(2, 3))');
    expect(result.stdout).toBe('5\n');
  });
});

describe('builtins that site would install', () => {
  it('offers help(), exit() and quit() although the interpreter starts without site', async () => {
    const codecall = codecallWith({ tools: [add] });
    const help = await codecall.execute('from tools import add\nhelp(add)');
    expect(help.status).toBe('success');
    expect(help.stdout).toContain("add(a: 'float', b: 'float')");
    expect(help.stdout).toContain('Add two numbers.');
    const exit = await codecall.execute('print("bye")\nexit(4)');
    expect(exit).toMatchObject({ status: 'error', exitCode: 4, stdout: 'bye\n' });
    const quit = await codecall.execute('quit()');
    expect(quit.status).toBe('success');
  });
});

describe('concurrent tool calls', () => {
  it('runs at most maxConcurrentToolCalls handlers at once; the rest wait their turn', async () => {
    let running = 0;
    let most = 0;
    const counted = defineTool({
      name: 'counted',
      description: 'Counts handlers running at once.',
      inputSchema: { type: 'object' },
      execute: async () => {
        running += 1;
        most = Math.max(most, running);
        await sleep(50);
        running -= 1;
        return most;
      },
    });
    const codecall = codecallWith({ tools: [counted], limits: { maxConcurrentToolCalls: 2 } });
    const result = await codecall.execute(
      'import asyncio\nfrom tools import aio\nasync def main():\n    return await asyncio.gather(*(aio.counted() for _ in range(6)))\nprint(len(asyncio.run(main())))',
    );
    expect(result).toMatchObject({ status: 'success', stdout: '6\n', toolCalls: 6 });
    expect(most).toBe(2);
  });
});
