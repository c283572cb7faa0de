// Start-up figures of `npm run bench`: the first script of a fresh host process against its fourth, the one-shot
// `codecall run` against `node -e 0` plus a bare interpreter and with a full outputs folder against an empty one,
// `codecall serve`'s first call against its second, a warm-pool run against a session cell and a plain JSON echo, and
// warm-pool runs back to back against one after a pause. Each next to its baseline, measured in the same run.
// Run alone with `node bench/startup.js` (after `npm run build`); BENCH_ONLY=<part of a figure's name> picks rows.
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { POOL_REFILL_QUIET_MS } from '../dist/engine/supervise/warm-pool.js';
import { createCodecall, defineTool } from '../dist/index.js';
import { median, plainJsonEchoMicroseconds, timeSpawn } from './measure.js';

// The installed command (package.json's bin).
const CLI = fileURLToPath(new URL('../dist/cli/main.cjs', import.meta.url));
const FIRST_SCRIPT = fileURLToPath(new URL('./first-script.js', import.meta.url));
const TOOL_DELAY_MS = 100;

/** The `wait_100ms` tool of the parallel-call rows (shared with bench/run.js). */
export const waitTool = defineTool({
  name: 'wait_100ms',
  description: 'Answers after 100 ms.',
  inputSchema: { type: 'object', properties: { index: { type: 'integer' } } },
  execute: async ({ index }) => {
    await sleep(TOOL_DELAY_MS);
    return index;
  },
});

/** Sequential echo calls of each script of the first-script figure. */
const FIRST_SCRIPT_CALLS = 1_000;
/** Fresh host processes of the first-script figure. */
const FRESH_PROCESSES = 5;
/** Calls of the 100 ms tool made at once by the parallel-call figures (here and in bench/run.js). */
export const PARALLEL_CALLS = 100;
/**
 * Least pause before each warm-pool run and its baselines, so the pool has replaced the interpreter the last run took:
 * it starts the replacement once the host has been quiet for POOL_REFILL_QUIET_MS, then the start takes its time (the
 * pause is longer when starting an interpreter takes longer here: see {@link poolRefillPause}); bench/run.js pauses
 * this long before its warm-pool runs and their baselines.
 */
export const POOL_REFILL_PAUSE_MS = POOL_REFILL_QUIET_MS + 150;
/** How many times the start of a pooled interpreter the pause lasts, so no refill runs beside a measured run. */
const POOL_REFILL_PAUSE_FACTOR = 2;
/** Size of the pool of the back-to-back figure: each round runs this many scripts, one right after another. */
const BACK_TO_BACK_POOL_SIZE = 4;

/** Entries in the outputs folder of the saved-outputs figure: the default retention's `maxRuns`. */
const SAVED_OUTPUT_ENTRIES = 500;
/**
 * Cells a session runs before the cell rows are timed: the host's JavaScript for a cell is still being optimised by
 * V8 over the first two thousand or so (a cell took ~450 µs in the first hundreds and ~140 µs from about 2,000 on,
 * measured on a 2-core VM); the warm-up cells are timed too and shown in a row of their own.
 */
const CELL_WARM_UP = 2_000;

/** The figures of this module, in order: each names the rows it makes (BENCH_ONLY matches these names). */
export const STARTUP_FIGURES = [
  'first script of a fresh process',
  'codecall run print(1)',
  'codecall run print(1) with saved outputs',
  'codecall serve',
  'warm-pool run',
  'warm-pool asyncio gather',
];

/**
 * Measures the start-up figures and returns their rows (for the `row` helper of bench/run.js).
 * @param {{ stateDir: string, interpreter: { executable: string }, runs: number, only?: string }} options
 */
export async function measureStartup({ stateDir, interpreter, runs, only }) {
  const wanted = (figure) => only === undefined || figure.includes(only);
  const rows = [];
  const print = (text) => process.stderr.write(`${text}\n`);

  if (wanted(STARTUP_FIGURES[0])) {
    print('first script of a fresh process…');
    const ratios = [];
    const firsts = [];
    const secondsAndThirds = [];
    const fourths = [];
    for (let round = 0; round < FRESH_PROCESSES; round += 1) {
      const perCall = await nodeJson(FIRST_SCRIPT, [join(stateDir, 'first'), String(FIRST_SCRIPT_CALLS), '4']);
      firsts.push(perCall[0]);
      secondsAndThirds.push((perCall[1] + perCall[2]) / 2);
      fourths.push(perCall[3]);
      ratios.push(perCall[0] / perCall[3]);
    }
    rows.push({
      figure: `${FIRST_SCRIPT_CALLS} echo calls, first script of a fresh process, per call`,
      unit: 'µs',
      value: median(firsts),
      baseline: median(fourths),
      baselineName: 'fourth script of the same process',
      target: '≤ 1.3× baseline (median of per-process ratios)',
      met: median(ratios) <= 1.3,
    });
    // V8 optimises the tool-call path over the first few thousand calls of a process, compiling on other threads
    // while scripts run: a change that only moves that cost out of the first script shows here.
    rows.push({
      figure: `${FIRST_SCRIPT_CALLS} echo calls, second and third scripts of a fresh process, per call`,
      unit: 'µs',
      value: median(secondsAndThirds),
      baseline: median(fourths),
      baselineName: 'fourth script of the same process',
    });
  }

  if (wanted(STARTUP_FIGURES[1])) {
    print('codecall run…');
    const parent = traversableFolder('codecall-bench-cli-');
    try {
      const { command, toolCommand } = printCommandIn(parent, 'cli');
      // The first command fills the state folder's cache: every later process finds it, as a user's would.
      await timeCommand(command);
      await timeCommand(toolCommand);
      const whole = [];
      const withToolCall = [];
      const bare = [];
      for (let run = 0; run < commandRounds(runs); run += 1) {
        whole.push(await timeCommand(command));
        withToolCall.push(await timeCommand(toolCommand));
        bare.push(
          (await timeSpawn(process.execPath, ['-e', '0'], { env: COMMAND_ENVIRONMENT })) +
            (await timeSpawn(interpreter.executable, ['-S', '-c', 'pass'])),
        );
      }
      rows.push({
        figure: 'codecall run print(1), whole command',
        unit: 'ms',
        value: median(whole),
        baseline: median(bare),
        baselineName: 'node -e 0 + python -S -c pass',
        target: '≤ 2× baseline',
        met: median(whole) <= 2 * median(bare),
      });
      // What a one-shot run's first tool call adds: the argument check's Ajv, the built-in tool, the round trip.
      rows.push({
        figure: 'codecall run of one read_file call, whole command',
        unit: 'ms',
        value: median(withToolCall),
        baseline: median(whole),
        baselineName: 'codecall run print(1)',
      });
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }

  if (wanted(STARTUP_FIGURES[2])) {
    print('codecall run with saved outputs…');
    const parent = traversableFolder('codecall-bench-outputs-');
    try {
      const full = printCommandIn(parent, 'cli-saved-outputs');
      const empty = printCommandIn(parent, 'cli-no-saved-outputs');
      // The first commands make the state folders and fill their caches, as a user's would be.
      await timeCommand(full.command);
      await timeCommand(empty.command);
      // A day of runs that saved something: an artifacts folder of two files and a full stdout file per run, up to the
      // default retention's 500 entries (so every prune keeps them all).
      const outputs = join(full.folder, 'state', 'outputs');
      for (let run = 0; run < SAVED_OUTPUT_ENTRIES / 2; run += 1) {
        const name = run.toString(16).padStart(16, '0');
        mkdirSync(join(outputs, name), { recursive: true });
        writeFileSync(join(outputs, name, 'a.png'), 'x\n');
        writeFileSync(join(outputs, name, 'b.csv'), 'y\n');
        writeFileSync(join(outputs, `${name}-stdout.txt`), 'z\n');
      }
      const withOutputs = [];
      const withoutOutputs = [];
      for (let run = 0; run < commandRounds(runs); run += 1) {
        withOutputs.push(await timeCommand(full.command));
        withoutOutputs.push(await timeCommand(empty.command));
      }
      rows.push({
        figure: `codecall run print(1) with ${SAVED_OUTPUT_ENTRIES} saved outputs, whole command`,
        unit: 'ms',
        value: median(withOutputs),
        baseline: median(withoutOutputs),
        baselineName: 'the same command, no saved outputs',
      });
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }

  if (wanted(STARTUP_FIGURES[3])) {
    print('codecall serve…');
    const connects = [];
    const firstCalls = [];
    const secondCalls = [];
    for (let round = 0; round < 5; round += 1) {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [CLI, 'serve', '--sandbox', 'none', '--workspace', stateDir],
        env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', TMPDIR: join(stateDir, 'serve') },
        stderr: 'ignore',
      });
      mkdirSync(join(stateDir, 'serve'), { recursive: true });
      const client = new Client({ name: 'bench', version: '1.0.0' });
      let started = performance.now();
      await client.connect(transport);
      await client.listTools();
      connects.push(performance.now() - started);
      const call = async () => {
        const callStarted = performance.now();
        const result = await client.callTool({ name: 'execute_code', arguments: { code: 'print(1)' } });
        if (result.isError) throw new Error(`serve run failed: ${JSON.stringify(result)}`);
        return performance.now() - callStarted;
      };
      firstCalls.push(await call());
      started = performance.now();
      secondCalls.push(await call());
      await client.close();
    }
    rows.push({
      figure: 'codecall serve: connect and list tools',
      unit: 'ms',
      value: median(connects),
      baseline: median(secondCalls),
      baselineName: 'a second execute_code',
    });
    rows.push({
      figure: 'codecall serve: first execute_code',
      unit: 'ms',
      value: median(firstCalls),
      baseline: median(secondCalls),
      baselineName: 'a second execute_code',
    });
  }

  if (wanted(STARTUP_FIGURES[4]) || wanted(STARTUP_FIGURES[5])) {
    const pooled = createCodecall({
      sandbox: 'none',
      tools: [waitTool],
      stateDir: join(stateDir, 'pool'),
      pool: { size: 2 },
    });
    const plain = createCodecall({ sandbox: 'none', tools: [waitTool], stateDir: join(stateDir, 'pool') });
    const session = plain.session();
    await pooled.execute('print(1)');
    await session.execute('counter = 0');
    const warmUpCells = [];
    for (let cell = 0; cell < CELL_WARM_UP; cell += 1) {
      const started = performance.now();
      await session.execute('counter += 1');
      warmUpCells.push(performance.now() - started);
    }
    const refillPauseMs = await poolRefillPause(plain);

    if (wanted(STARTUP_FIGURES[4])) {
      print('warm-pool run against a cell…');
      const pooledRuns = [];
      const cells = [];
      const pausedCells = [];
      const echoes = [];
      // A pooled run comes after an idle time (waking both processes from it costs more than a cell right after a
      // cell pays): each is next to a cell after the same pause, with the pool full and quiet.
      for (let run = 0; run < runs; run += 1) {
        await sleep(refillPauseMs);
        let started = performance.now();
        const result = await pooled.execute('print(1)');
        pooledRuns.push(performance.now() - started);
        if (result.stdout !== '1\n') throw new Error(`unexpected result ${JSON.stringify(result)}`);
        await sleep(refillPauseMs);
        started = performance.now();
        await session.execute('counter += 1');
        pausedCells.push(performance.now() - started);
      }
      // Cells back to back, as a session serves them; the echo in rounds beside them.
      for (let round = 0; round < 5; round += 1) {
        for (let cell = 0; cell < 4 * runs; cell += 1) {
          const started = performance.now();
          await session.execute('counter += 1');
          cells.push(performance.now() - started);
        }
        echoes.push((await plainJsonEchoMicroseconds(interpreter.executable, 2_000)) / 1_000);
      }
      // Runs back to back, as a loop or a queue makes them: after a pause long enough for the pool to refill (one
      // interpreter after another), the first run, then the others each right after the last; those are timed.
      print('warm-pool runs back to back…');
      const burstPool = createCodecall({
        sandbox: 'none',
        tools: [waitTool],
        stateDir: join(stateDir, 'pool'),
        pool: { size: BACK_TO_BACK_POOL_SIZE },
      });
      await burstPool.execute('print(1)');
      const backToBackRuns = [];
      for (let round = 0; round < backToBackRounds(runs); round += 1) {
        await sleep(BACK_TO_BACK_POOL_SIZE * refillPauseMs);
        for (let run = 0; run < BACK_TO_BACK_POOL_SIZE; run += 1) {
          const started = performance.now();
          const result = await burstPool.execute('print(1)');
          if (run > 0) backToBackRuns.push(performance.now() - started);
          if (result.stdout !== '1\n') throw new Error(`unexpected result ${JSON.stringify(result)}`);
        }
      }
      await burstPool.close();
      rows.push({
        figure: 'warm-pool run of print(1), none',
        unit: 'ms',
        digits: 3,
        value: median(pooledRuns),
        baseline: median(cells),
        baselineName: 'session cell (counter += 1)',
        target: '≤ 3× baseline',
        met: median(pooledRuns) <= 3 * median(cells),
      });
      rows.push({
        figure: 'warm-pool run of print(1), none',
        unit: 'ms',
        digits: 3,
        value: median(pooledRuns),
        baseline: median(pausedCells),
        baselineName: `session cell after the same ${refillPauseMs.toFixed(0)} ms pause`,
        target: '≤ 3× baseline',
        met: median(pooledRuns) <= 3 * median(pausedCells),
      });
      rows.push({
        figure: `warm-pool runs of print(1) back to back (pool of ${BACK_TO_BACK_POOL_SIZE}), none`,
        unit: 'ms',
        digits: 3,
        value: median(backToBackRuns),
        baseline: median(pooledRuns),
        baselineName: `warm-pool run after a ${refillPauseMs.toFixed(0)} ms pause`,
        target: '≤ 2× baseline',
        met: median(backToBackRuns) <= 2 * median(pooledRuns),
      });
      rows.push({
        figure: `session cell (counter += 1), none, after ${CELL_WARM_UP.toLocaleString('en')} cells of the process`,
        unit: 'ms',
        digits: 3,
        value: median(cells),
        baseline: median(echoes),
        baselineName: 'plain JSON echo round trip',
        target: '≤ 2.5× baseline',
        met: median(cells) <= 2.5 * median(echoes),
      });
      rows.push({
        figure: `session cell (counter += 1), none, the first ${CELL_WARM_UP.toLocaleString('en')} of the process`,
        unit: 'ms',
        digits: 3,
        value: median(warmUpCells),
        baseline: median(echoes),
        baselineName: 'plain JSON echo round trip',
      });
    }

    if (wanted(STARTUP_FIGURES[5])) {
      print('warm-pool asyncio gather against a cell…');
      const gather = [
        'import asyncio',
        'import tools.aio as aio',
        'async def main():',
        `    return await asyncio.gather(*(aio.wait_100ms(index=i) for i in range(${PARALLEL_CALLS})))`,
        `assert asyncio.run(main()) == list(range(${PARALLEL_CALLS}))`,
      ].join('\n');
      const pooledGathers = [];
      const cellGathers = [];
      for (let run = 0; run < 7; run += 1) {
        await sleep(refillPauseMs);
        let started = performance.now();
        const result = await pooled.execute(gather);
        pooledGathers.push(performance.now() - started);
        if (result.status !== 'success') throw new Error(`run failed: ${JSON.stringify(result)}`);
        started = performance.now();
        await session.execute(gather);
        cellGathers.push(performance.now() - started);
      }
      rows.push({
        figure: `warm-pool run: import asyncio + gather of ${PARALLEL_CALLS} 100 ms calls, none`,
        unit: 'ms',
        value: median(pooledGathers),
        baseline: median(cellGathers),
        baselineName: 'the same in a session cell',
        target: '≤ 1.2× baseline',
        met: median(pooledGathers) <= 1.2 * median(cellGathers),
      });
    }
    await session.close();
    await pooled.close();
    await plain.close();
  }
  return rows;
}

/** Rounds of the back-to-back warm-pool figure: a quarter of the runs, at least five (each pauses for a refill). */
function backToBackRounds(runs) {
  return Math.max(5, Math.round(runs / 4));
}

/** The environment of the measured commands: PATH and HOME, as a user's shell passes them (nothing else). */
const COMMAND_ENVIRONMENT = {
  PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
  HOME: process.env.HOME ?? '/',
};

/**
 * Whole commands measured per row: half of the runs, at least five (each takes a few hundred milliseconds). A whole
 * command moves by 10–15 % with the machine's speed within one full run (two rows of the same command read 232 and
 * 196 ms a minute apart); the median of fifteen moved with it, of thirty less.
 */
function commandRounds(runs) {
  return Math.max(5, Math.round(runs / 2));
}

/**
 * A new folder the run's uid can traverse, like the default state folder (`<tmpdir>/codecall-<uid>`, 0711): behind a
 * private folder (mkdtemp makes them 0700) every run would first enter a mount namespace made to reach it.
 */
function traversableFolder(prefix) {
  const folder = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(folder, 0o711);
  return folder;
}

/**
 * A folder `name` in `parent` with print.py, read.py and a codecall.json keeping its state inside, and the commands
 * running the two.
 */
function printCommandIn(parent, name) {
  const folder = join(parent, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'print.py'), 'print(1)\n');
  writeFileSync(
    join(folder, 'read.py'),
    'from tools import read_file\nprint(read_file(path="print.py")["totalLines"])\n',
  );
  writeFileSync(join(folder, 'codecall.json'), JSON.stringify({ stateDir: join(folder, 'state') }));
  const run = [CLI, 'run', '--config', join(folder, 'codecall.json')];
  return {
    folder,
    command: [...run, join(folder, 'print.py')],
    // The same run calling the built-in read_file once, on a file of the folder (the workspace).
    toolCommand: [...run, '--workspace', folder, join(folder, 'read.py')],
  };
}

/** Wall time of the `codecall` command with these arguments, in a fresh process. */
function timeCommand(command) {
  return timeSpawn(process.execPath, command, { env: COMMAND_ENVIRONMENT });
}

/**
 * The pause before a warm-pool run: the pool's quiet time and {@link POOL_REFILL_PAUSE_FACTOR} times what a cold run of
 * the modules a pooled interpreter imports takes here (at least {@link POOL_REFILL_PAUSE_MS}), so the refill after the
 * last run is over.
 */
async function poolRefillPause(codecall) {
  const starts = [];
  for (let run = 0; run < 3; run += 1) {
    const started = performance.now();
    await codecall.execute('import asyncio, json, re');
    starts.push(performance.now() - started);
  }
  return Math.max(POOL_REFILL_PAUSE_MS, POOL_REFILL_QUIET_MS + POOL_REFILL_PAUSE_FACTOR * median(starts));
}

/** Runs a Node script of this folder in a fresh process and parses what it prints as JSON. */
function nodeJson(script, args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [script, ...args], { maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${script} failed: ${stderr || error.message}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

// Run alone: print the rows.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { resolvePythonInterpreter } = await import('../dist/sandbox/interpreter.js');
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-startup-'));
  try {
    const rows = await measureStartup({
      stateDir,
      interpreter: await resolvePythonInterpreter('python3'),
      runs: Number(process.env.BENCH_RUNS ?? 60),
      only: process.env.BENCH_ONLY,
    });
    for (const entry of rows) {
      console.log(
        `${entry.figure} (${entry.unit}): ${entry.value.toFixed(entry.digits ?? 1)}  ` +
          `${entry.baselineName}: ${entry.baseline.toFixed(entry.digits ?? 1)}  ` +
          `${(entry.value / entry.baseline).toFixed(2)}×${entry.target ? `  target ${entry.target}: ${entry.met ? 'yes' : 'NO'}` : ''}`,
      );
    }
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}
