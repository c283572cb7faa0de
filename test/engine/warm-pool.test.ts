import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { createCodecall } from '../../src/engine/codecall.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { processesIn } from '../support/processes-in.js';
import { add, sleep } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

const REPOSITORY = fileURLToPath(new URL('../../', import.meta.url));
const POOLED_RUN_PROCESS = join(REPOSITORY, 'test/fixtures/engine/pooled-run-process.ts');
const VITE_NODE = join(REPOSITORY, 'node_modules/.bin/vite-node');

/** Run directories in place (a used run's directory is renamed away before its result): the interpreters started. */
const runDirectoriesIn = (runs: string) => readdirSync(runs).filter((name) => !name.startsWith('.'));

/** A script printing the pid of the interpreter that runs it. */
const PRINT_PID = 'import os\nprint(os.getpid())';

/** A codecall without a sandbox whose pool keeps `size` interpreters, and the folder of its run directories. */
function pooledCodecall(size: number): { codecall: ReturnType<typeof createCodecall>; runs: string } {
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-pool-'));
  return { codecall: createCodecall({ sandbox: 'none', stateDir, pool: { size } }), runs: join(stateDir, 'runs') };
}

/** Waits until `count` interpreters not in `used` wait in `runs` (or gives up after ten seconds); returns their pids. */
async function waitingInterpreters(runs: string, used: ReadonlySet<number>, count: number): Promise<number[]> {
  let waiting: number[] = [];
  for (let waited = 0; waited < 10_000; waited += 50) {
    waiting = processesIn(runs).filter((pid) => !used.has(pid));
    if (waiting.length === count) break;
    await sleep(50);
  }
  return waiting;
}

/** Runs the pooled-run host process to its end; resolves with its exit code and output. */
function runPooledRunProcess(stateDir: string, close: boolean): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(VITE_NODE, [POOLED_RUN_PROCESS, stateDir, ...(close ? ['close'] : [])], {
      cwd: REPOSITORY,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout }));
  });
}

describe('the warm pool', () => {
  it('validates pool.size', () => {
    for (const pool of [{ size: -1 }, { size: 1.5 }, { size: '2' }, { size: 1_000 }, { size: 1, extra: 1 }, 3]) {
      expect(() => codecallWith({ pool: pool as never })).toThrow(CodecallError);
    }
    try {
      codecallWith({ pool: { size: -1 } });
    } catch (error) {
      expect((error as CodecallError).code).toBe('INVALID_CONFIG');
    }
    expect(() => codecallWith({ pool: { size: 0 } })).not.toThrow();
  });

  it('hands over interpreters that have already imported the standard modules scripts use most', async () => {
    const pooled = codecallWith({ pool: { size: 1 } });
    // Whether this interpreter was started as a pooled one, and which of the modules it had before the script.
    const check = [
      'import sys',
      'loaded = sorted(name for name in ("asyncio", "json", "re") if name in sys.modules)',
      'print("main_pooled" in open("/proc/self/cmdline").read(), loaded)',
    ].join('\n');
    const cold = (await codecallWith().execute(check)).stdout;
    let seenPooled = false;
    // A run may start cold while the pool is still filling: pooled ones are told apart by their command line.
    for (let attempt = 0; attempt < 50 && !seenPooled; attempt += 1) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      const stdout = (await pooled.execute(check)).stdout;
      seenPooled = stdout.startsWith('True');
      if (seenPooled) expect(stdout).toBe("True ['asyncio', 'json', 're']\n");
    }
    expect(seenPooled).toBe(true);
    expect(cold).toBe('False []\n');
  });

  it('runs scripts in interpreters started before the run, each used once', async () => {
    const { codecall, runs } = pooledCodecall(2);
    try {
      const used = new Set<number>([Number((await codecall.execute(PRINT_PID)).stdout)]);
      for (let run = 0; run < 4; run += 1) {
        // The two waiting interpreters, told apart from the used ones that may still be on their way out.
        const waiting = await waitingInterpreters(runs, used, 2);
        expect(waiting).toHaveLength(2);
        const result = await codecall.execute(PRINT_PID);
        expect(result.status).toBe('success');
        const pid = Number(result.stdout);
        // Ordering, not clocks: the run's interpreter was already there before the run was asked for.
        expect(waiting).toContain(pid);
        used.add(pid);
      }
      expect(used.size).toBe(5);
    } finally {
      await codecall.close();
    }
  });

  it('serves runs made back to back from the pool, starting no interpreter while they run, and refills after them', async () => {
    const { codecall, runs } = pooledCodecall(3);
    try {
      const used = new Set<number>([Number((await codecall.execute(PRINT_PID)).stdout)]);
      const waiting = await waitingInterpreters(runs, used, 3);
      expect(waiting).toHaveLength(3);
      // As a loop or a queue makes them: each run asked for as soon as the last one returned.
      const pids: number[] = [];
      for (let run = 0; run < 3; run += 1) pids.push(Number((await codecall.execute(PRINT_PID)).stdout));
      // Ordering, not clocks: every run had an interpreter started before the runs, and none started while they ran
      // (a launch makes its run directory first), which would have taken the cores from the next run.
      expect([...pids].sort()).toEqual([...waiting].sort());
      expect(runDirectoriesIn(runs)).toEqual([]);
      for (const pid of pids) used.add(pid);
      // Once the host is quiet the pool is full again.
      expect(await waitingInterpreters(runs, used, 3)).toHaveLength(3);
      expect(runDirectoriesIn(runs)).toHaveLength(3);
    } finally {
      await codecall.close();
    }
  });

  it('lets a process that ran once from the pool end, closed or not, without starting a replacement', async () => {
    for (const close of [false, true]) {
      const stateDir = mkdtempSync(join(tmpdir(), 'codecall-pool-'));
      // Ends on its own or not at all: the test's timeout is the failure.
      const { code, stdout } = await runPooledRunProcess(stateDir, close);
      expect({ code, stdout }).toEqual({ code: 0, stdout: 'ran\n' });
      // A replacement started after the run would have left its run directory behind, killed when the host exited.
      expect(readdirSync(join(stateDir, 'runs'))).toEqual([]);
    }
  }, 60_000);

  it('gives pooled runs the results, environment, limits and files of a cold run', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'codecall-pool-'));
    const probe = [
      'import os, resource, sys',
      'from tools import add',
      'print(add(1, 2))',
      'print(sorted(os.environ))',
      'print(sys.argv, __file__, __name__, sys.path[0] == os.getcwd())',
      'print([resource.getrlimit(getattr(resource, name)) for name in',
      '       ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_CORE")])',
      'print(sorted(os.listdir(".")), open(__file__).read().count("\\n"))',
      'fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))',
      'print(fds[:-1])',
      'print(oct(os.stat(".").st_mode & 0o777), oct(os.stat("script.py").st_mode & 0o777))',
      'open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "out.txt"), "w").write("made")',
      'raise ValueError("at the end")',
    ].join('\n');
    const cold = createCodecall({ sandbox: 'none', workspaceMount: 'none', stateDir, tools: [add] });
    const pooled = createCodecall({
      sandbox: 'none',
      workspaceMount: 'none',
      stateDir,
      tools: [add],
      pool: { size: 1 },
    });
    try {
      await pooled.execute('pass');
      await sleep(500);
      const [coldResult, pooledResult] = [await cold.execute(probe), await pooled.execute(probe)];
      const normalise = (result: typeof coldResult) => ({
        ...result,
        durationMs: 0,
        // Timings differ run to run; the calls, their order and outcome do not.
        trace: result.trace?.calls.map(({ startMs: _startMs, endMs: _endMs, ...call }) => call),
        artifacts: result.artifacts?.map((artifact) => ({ ...artifact, path: artifact.path.split('/').at(-1) })),
      });
      expect(pooledResult.status).toBe('error');
      expect(normalise(pooledResult)).toEqual(normalise(coldResult));
      expect(readFileSync(pooledResult.artifacts?.[0]?.path ?? '', 'utf8')).toBe('made');
    } finally {
      await Promise.all([cold.close(), pooled.close()]);
    }
  });

  it('applies timeouts, tool-call limits and aborts to pooled runs', async () => {
    const codecall = codecallWith({ pool: { size: 2 }, tools: [add], limits: { maxToolCalls: 2 } });
    await codecall.execute('pass');
    await sleep(500);
    const timedOut = await codecall.execute('import time\ntime.sleep(60)', { timeoutMs: 300 });
    expect(timedOut).toMatchObject({ status: 'timeout', reason: 'timeout' });
    await sleep(500);
    const limited = await codecall.execute(
      'from tools import add, ToolError\nfor i in range(3):\n    try:\n        add(i, i)\n    except ToolError as e:\n        print(e)',
    );
    expect(limited).toMatchObject({ status: 'success', toolCalls: 2, stdout: 'tool call limit reached (2)\n' });
    await sleep(500);
    const controller = new AbortController();
    const running = codecall.execute('import time\ntime.sleep(60)', { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('starts runs with other process limits cold, with those limits', async () => {
    const codecall = codecallWith({ pool: { size: 1 } });
    await codecall.execute('pass');
    const result = await codecall.execute('import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0])', {
      limits: { memoryBytes: 512 * 1024 * 1024 },
    });
    expect(result.stdout).toBe(`${512 * 1024 * 1024}\n`);
  });

  it('kills its waiting interpreters on close and leaves no run directory behind', async () => {
    const { codecall, runs } = pooledCodecall(3);
    await codecall.execute('pass');
    // The interpreter the first run used may still be on its way out: wait for the three waiting ones alone.
    for (let waited = 0; waited < 10_000 && processesIn(runs).length !== 3; waited += 50) await sleep(50);
    expect(processesIn(runs)).toHaveLength(3);
    await codecall.close();
    expect(processesIn(runs)).toEqual([]);
    expect(readdirSync(runs)).toEqual([]);
  });
});
