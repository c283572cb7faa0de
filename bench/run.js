// `npm run bench`: every figure next to its baseline, measured in the same run. Prints one table and writes
// bench/results.json. Environment: BENCH_RUNS (default 60) and BENCH_CALLS (default 5000) scale the repetitions;
// BENCH_ONLY=<part of a figure's name> runs only the start-up figures of bench/startup.js that match it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { generatePythonModule } from '../dist/codegen/python-module.js';
import { resolveLimits } from '../dist/core/limits.js';
import { createCodecall, defineTool } from '../dist/index.js';
import { resolvePythonInterpreter } from '../dist/sandbox/interpreter.js';
import {
  bareBubblewrapLauncher,
  median,
  plainJsonEchoMicroseconds,
  ratio,
  timeConcurrentSpawns,
  timeSpawn,
} from './measure.js';
import { measureStartup, PARALLEL_CALLS, POOL_REFILL_PAUSE_MS, waitTool } from './startup.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 60);
const CALLS = Number(process.env.BENCH_CALLS ?? 5_000);
const CELLS = 20 * RUNS;
const CONCURRENT_RUNS = 64;
const GENERATED_TOOLS = 500;
/** Scripts calling tools in a loop at the same time, for the throughput of the channel under load. */
const CONCURRENT_CALLERS = 4;
/** Rounds of sequential tool calls, each next to a round of the plain JSON echo. */
const CALL_ROUNDS = 9;

const benchStarted = performance.now();
const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-'));
const rows = [];
/** One line of the table: the figure, its baseline measured in the same run, and the target of issue 5 if any. */
const row = ({ figure, value, unit, digits = 1, baseline, baselineName, target, met }) =>
  rows.push({
    figure: `${figure} (${unit})`,
    value: value.toFixed(digits),
    baseline: baselineName ? `${baseline.toFixed(digits)} (${baselineName})` : '',
    ratio: baselineName ? ratio(value, baseline) : '',
    target: target ?? '',
    met: target === undefined ? '' : met ? 'yes' : 'NO',
    raw: { value, baseline, unit },
  });
const print = (...parts) => process.stderr.write(`${parts.join(' ')}\n`);

const interpreter = await resolvePythonInterpreter('python3');
const echo = defineTool({
  name: 'echo',
  description: 'Returns its arguments.',
  inputSchema: { type: 'object', properties: { value: {} } },
  execute: async (args) => args,
});
const codecall = createCodecall({
  sandbox: 'none',
  tools: [echo, waitTool],
  stateDir,
  limits: { maxToolCalls: CALLS + 1_000, maxProcesses: 256 },
});
const expectSuccess = (result) => {
  if (result.status !== 'success') throw new Error(`run failed: ${JSON.stringify(result)}`);
  return result;
};
const addStartupRows = async (only) => {
  for (const entry of await measureStartup({ stateDir: join(stateDir, 'startup'), interpreter, runs: RUNS, only })) {
    row(entry);
  }
};

if (process.env.BENCH_ONLY !== undefined) {
  await addStartupRows(process.env.BENCH_ONLY);
  await finish();
  process.exit(0);
}

// Cold print(1), isolation none, alternating with a bare interpreter spawned the same way (same flags).
print('cold runs…');
await codecall.execute('print(1)');
await timeSpawn(interpreter.executable, ['-S', '-c', 'pass']);
const cold = [];
const coldOneCall = [];
const bareSameFlags = [];
const bareDefault = [];
for (let run = 0; run < RUNS; run += 1) {
  let started = performance.now();
  const result = await codecall.execute('print(1)');
  cold.push(performance.now() - started);
  if (result.stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(result.stdout)}`);
  bareSameFlags.push(await timeSpawn(interpreter.executable, ['-S', '-c', 'pass']));
  bareDefault.push(await timeSpawn(interpreter.executable, ['-c', 'pass']));
  started = performance.now();
  expectSuccess(await codecall.execute('from tools import echo\necho(value=1)'));
  coldOneCall.push(performance.now() - started);
}
row({
  figure: 'cold print(1), none',
  unit: 'ms',
  value: median(cold),
  baseline: median(bareSameFlags),
  baselineName: 'bare python -S -c pass',
});
row({
  figure: 'cold print(1), none',
  unit: 'ms',
  value: median(cold),
  baseline: median(bareDefault),
  baselineName: 'bare python -c pass',
});
row({
  figure: 'cold run with one tool call, none',
  unit: 'ms',
  value: median(coldOneCall),
  baseline: median(cold),
  baselineName: 'cold print(1)',
});

// Cold print(1) under bubblewrap, next to the same interpreter started by bwrap with the runner's own flags.
const { probeSandbox } = await import('../dist/sandbox/bubblewrap-probe.js').catch(() => ({}));
const probe = probeSandbox ? await probeSandbox() : undefined;
if (probe?.bubblewrap.available) {
  print('bubblewrap runs…');
  const sandboxed = createCodecall({ sandbox: 'bubblewrap', stateDir: join(stateDir, 'sandboxed') });
  const bare = await bareBubblewrapLauncher({
    interpreter,
    root: join(stateDir, 'bare-bwrap'),
    limits: resolveLimits({}),
  });
  await sandboxed.execute('print(1)');
  await bare();
  const sandboxedRuns = [];
  const bareRuns = [];
  for (let run = 0; run < RUNS; run += 1) {
    const started = performance.now();
    const result = await sandboxed.execute('print(1)');
    sandboxedRuns.push(performance.now() - started);
    if (result.stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(result)}`);
    bareRuns.push(await bare());
  }
  await sandboxed.close();
  row({
    figure: 'cold print(1), bubblewrap',
    unit: 'ms',
    value: median(sandboxedRuns),
    baseline: median(bareRuns),
    baselineName: 'bare python -S -c pass in bwrap, same flags',
    target: '≤ 1.25× baseline',
    met: median(sandboxedRuns) <= 1.25 * median(bareRuns),
  });
} else {
  rows.push({
    figure: 'cold print(1), bubblewrap (ms)',
    value: 'skipped',
    baseline: `bubblewrap unavailable: ${probe?.bubblewrap.reason ?? 'no bubblewrap runner'}`,
    ratio: '',
    target: '',
    met: '',
  });
}

// Warm pool: print(1) in an interpreter started ahead (in its sandbox), next to a bare interpreter start.
print('warm pool…');
const isolations = probe?.bubblewrap.available ? ['none', 'bubblewrap'] : ['none'];
for (const isolation of isolations) {
  const pooled = createCodecall({
    sandbox: isolation,
    stateDir: join(stateDir, `pooled-${isolation}`),
    pool: { size: 2 },
  });
  await pooled.execute('print(1)');
  const warm = [];
  const bareForWarm = [];
  for (let run = 0; run < RUNS; run += 1) {
    await sleep(POOL_REFILL_PAUSE_MS);
    const started = performance.now();
    const result = await pooled.execute('print(1)');
    warm.push(performance.now() - started);
    if (result.stdout !== '1\n' || result.isolation !== isolation) {
      throw new Error(`unexpected result ${JSON.stringify(result)}`);
    }
    await sleep(POOL_REFILL_PAUSE_MS);
    bareForWarm.push(await timeSpawn(interpreter.executable, ['-S', '-c', 'pass']));
  }
  await pooled.close();
  row({
    figure: `warm-pool print(1), ${isolation}`,
    unit: 'ms',
    digits: 2,
    value: median(warm),
    baseline: median(bareForWarm),
    baselineName: 'bare python -S -c pass',
    target: '≤ 3 ms',
    met: median(warm) <= 3,
  });
}

// Sequential tool calls (µs per round trip measured inside the script) and session cells, next to a plain JSON echo.
print('tool calls and cells…');
/** A script that calls `echo` `calls` times in a row (after a warm-up) and prints µs per call. */
const sequentialCalls = (calls) =>
  `import time\nfrom tools import echo\nfor i in range(200):\n    echo(value=i)\nstart = time.perf_counter()\nfor i in range(${calls}):\n    echo(value=i)\nprint((time.perf_counter() - start) / ${calls} * 1e6)`;
/** The same calls awaited one after another through `tools.aio` (their event loop reads their replies). */
const awaitedCalls = (calls) =>
  `import asyncio, time\nimport tools.aio as aio\nasync def main():\n    for i in range(200):\n        await aio.echo(value=i)\n    start = time.perf_counter()\n    for i in range(${calls}):\n        await aio.echo(value=i)\n    return (time.perf_counter() - start) / ${calls} * 1e6\nprint(asyncio.run(main()))`;
const roundTrips = [];
const awaitedRoundTrips = [];
const listenedRoundTrips = [];
const echoes = [];
/** A listener that does nothing: what is measured is the cost of producing the events. */
const ignoreEvent = () => {};
for (let run = 0; run < CALL_ROUNDS; run += 1) {
  roundTrips.push(Number(expectSuccess(await codecall.execute(sequentialCalls(CALLS))).stdout));
  awaitedRoundTrips.push(Number(expectSuccess(await codecall.execute(awaitedCalls(CALLS))).stdout));
  listenedRoundTrips.push(
    Number(expectSuccess(await codecall.execute(sequentialCalls(CALLS), { onEvent: ignoreEvent })).stdout),
  );
  echoes.push(await plainJsonEchoMicroseconds(interpreter.executable, CALLS));
}
// Several scripts calling at once share the host (and the processors): calls per second of all of them together.
const concurrentCallRates = [];
const concurrentEchoRates = [];
const callsPerSecond = (microseconds) => microseconds.reduce((sum, perCall) => sum + 1e6 / perCall, 0);
for (let run = 0; run < CALL_ROUNDS; run += 1) {
  const results = await Promise.all(
    Array.from({ length: CONCURRENT_CALLERS }, () => codecall.execute(sequentialCalls(Math.ceil(CALLS / 2)))),
  );
  concurrentCallRates.push(callsPerSecond(results.map((result) => Number(expectSuccess(result).stdout))));
  concurrentEchoRates.push(
    callsPerSecond(
      await Promise.all(
        Array.from({ length: CONCURRENT_CALLERS }, () =>
          plainJsonEchoMicroseconds(interpreter.executable, Math.ceil(CALLS / 2)),
        ),
      ),
    ),
  );
}
const cellsByIsolation = new Map();
for (const isolation of isolations) {
  const owner =
    isolation === 'none'
      ? codecall
      : createCodecall({ sandbox: isolation, stateDir: join(stateDir, `session-${isolation}`) });
  const session = owner.session();
  expectSuccess(await session.execute('counter = 0'));
  for (let cell = 0; cell < 200; cell += 1) await session.execute('counter += 1');
  const cells = [];
  for (let cell = 0; cell < CELLS; cell += 1) {
    const started = performance.now();
    await session.execute('counter += 1');
    cells.push(performance.now() - started);
  }
  const last = await session.execute('print(counter)');
  if (last.stdout !== `${CELLS + 200}\n` || last.isolation !== isolation) throw new Error('session lost a cell');
  await session.close();
  if (owner !== codecall) await owner.close();
  cellsByIsolation.set(isolation, cells);
}
row({
  figure: 'sequential tool call',
  unit: 'µs',
  value: median(roundTrips),
  baseline: median(echoes),
  baselineName: 'plain JSON echo',
  target: '≤ 60 µs and ≤ echo',
  met: median(roundTrips) <= 60 && median(roundTrips) <= median(echoes),
});
row({
  figure: 'sequential tool call awaited through tools.aio',
  unit: 'µs',
  value: median(awaitedRoundTrips),
  baseline: median(roundTrips),
  baselineName: 'sequential tool call',
});
row({
  figure: 'sequential tool call with a no-op onEvent listener',
  unit: 'µs',
  value: median(listenedRoundTrips),
  baseline: median(roundTrips),
  baselineName: 'sequential tool call, events off',
  target: '≤ 1.10× baseline',
  met: median(listenedRoundTrips) <= 1.1 * median(roundTrips),
});
row({
  figure: `${CONCURRENT_CALLERS} scripts calling at once`,
  unit: 'calls/s',
  digits: 0,
  value: median(concurrentCallRates),
  baseline: median(concurrentEchoRates),
  baselineName: `${CONCURRENT_CALLERS} plain JSON echo clients at once`,
});
for (const [isolation, cells] of cellsByIsolation) {
  row({
    figure: `session cell (counter += 1), ${isolation}`,
    unit: 'ms',
    digits: 3,
    value: median(cells),
    baseline: median(echoes) / 1_000,
    baselineName: 'plain JSON echo round trip',
    target: '≤ 0.2 ms',
    met: median(cells) <= 0.2,
  });
}

// 100 parallel calls of a 100 ms tool, with asyncio and with threads, next to one call of it.
print('parallel calls…');
const single = [];
const gathered = [];
const threaded = [];
for (let run = 0; run < 5; run += 1) {
  single.push(
    Number(
      expectSuccess(
        await codecall.execute(
          'import time\nfrom tools import wait_100ms\nstart = time.perf_counter()\nwait_100ms(index=0)\nprint((time.perf_counter() - start) * 1e3)',
        ),
      ).stdout,
    ),
  );
  gathered.push(
    Number(
      expectSuccess(
        await codecall.execute(
          [
            'import asyncio, time',
            'import tools.aio as aio',
            'async def main():',
            `    return await asyncio.gather(*(aio.wait_100ms(index=i) for i in range(${PARALLEL_CALLS})))`,
            'start = time.perf_counter()',
            `assert asyncio.run(main()) == list(range(${PARALLEL_CALLS}))`,
            'print((time.perf_counter() - start) * 1e3)',
          ].join('\n'),
        ),
      ).stdout,
    ),
  );
  threaded.push(
    Number(
      expectSuccess(
        await codecall.execute(
          [
            'import time',
            'from concurrent.futures import ThreadPoolExecutor',
            'from tools import wait_100ms',
            'start = time.perf_counter()',
            `with ThreadPoolExecutor(${PARALLEL_CALLS}) as pool:`,
            `    assert list(pool.map(lambda i: wait_100ms(index=i), range(${PARALLEL_CALLS}))) == list(range(${PARALLEL_CALLS}))`,
            'print((time.perf_counter() - start) * 1e3)',
          ].join('\n'),
        ),
      ).stdout,
    ),
  );
}
for (const [figure, values] of [
  [`${PARALLEL_CALLS} parallel 100 ms calls, asyncio`, gathered],
  [`${PARALLEL_CALLS} parallel 100 ms calls, threads`, threaded],
]) {
  row({
    figure,
    unit: 'ms',
    value: median(values),
    baseline: median(single),
    baselineName: 'one call',
    target: '≤ 200 ms',
    met: median(values) <= 200,
  });
}

// 64 concurrent cold runs: throughput and failures, next to 64 concurrent bare interpreters; host memory per run.
print('concurrent runs…');
const throughput = [];
const bareThroughput = [];
let failures = 0;
for (let round = 0; round < 3; round += 1) {
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: CONCURRENT_RUNS }, () => codecall.execute('print(1)').catch((error) => ({ error }))),
  );
  throughput.push(CONCURRENT_RUNS / ((performance.now() - started) / 1_000));
  failures += results.filter((result) => result.status !== 'success' || result.stdout !== '1\n').length;
  const bare = await timeConcurrentSpawns(interpreter.executable, ['-S', '-c', 'pass'], CONCURRENT_RUNS);
  bareThroughput.push(CONCURRENT_RUNS / (bare.ms / 1_000));
}
row({
  figure: `${CONCURRENT_RUNS} concurrent runs`,
  unit: 'runs/s',
  digits: 0,
  value: median(throughput),
  baseline: median(bareThroughput),
  baselineName: `${CONCURRENT_RUNS} concurrent bare pythons`,
});
row({
  figure: `${CONCURRENT_RUNS} concurrent runs, failures`,
  unit: 'count',
  digits: 0,
  value: failures,
  baseline: 0,
  baselineName: 'expected',
  target: '0',
  met: failures === 0,
});
rows.at(-1).ratio = '';
// Host memory: peak resident growth while 64 scripts sleep at once, in a fresh Node process each time.
const probeMemory = (mode) =>
  new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [
        '--expose-gc',
        fileURLToPath(new URL('./memory-probe.js', import.meta.url)),
        mode,
        String(CONCURRENT_RUNS),
        join(stateDir, 'memory'),
      ],
      (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout).bytesPerScript)),
    );
  });
const perRun = [];
const perBare = [];
for (let round = 0; round < 3; round += 1) {
  perRun.push(await probeMemory('codecall'));
  perBare.push(await probeMemory('bare'));
}
row({
  figure: 'host memory per concurrent run',
  unit: 'KiB',
  digits: 0,
  value: median(perRun) / 1024,
  baseline: median(perBare) / 1024,
  baselineName: 'per bare child process, same stdio',
});

// Codegen for 500 tools, and importing the generated module in a fresh interpreter.
print('codegen…');
const manyTools = Array.from({ length: GENERATED_TOOLS }, (_, index) => ({
  name: `tool_${index}`,
  description: `Tool number ${index}: reads the given path and returns what it found, as a dict.`,
  inputSchema: {
    type: 'object',
    properties: {
      path: { type: 'string', description: 'File to read.' },
      limit: { type: 'integer', minimum: 1, description: 'Most lines to return.' },
      mode: { enum: ['fast', 'thorough'] },
      tags: { type: 'array', items: { type: 'string' } },
      options: { type: 'object', properties: { deep: { type: 'boolean' } } },
    },
    required: ['path'],
  },
  outputSchema: { type: 'object', properties: { ok: { type: 'boolean' }, lines: { type: 'array' } } },
}));
const codegen = [];
const jsonRoundTrips = [];
for (let run = 0; run < RUNS + 3; run += 1) {
  let started = performance.now();
  generatePythonModule({ moduleName: 'tools', tools: manyTools });
  const elapsed = performance.now() - started;
  started = performance.now();
  JSON.parse(JSON.stringify(manyTools));
  const jsonElapsed = performance.now() - started;
  // The first runs warm the JIT up.
  if (run >= 3) {
    codegen.push(elapsed);
    jsonRoundTrips.push(jsonElapsed);
  }
}
row({
  figure: `codegen, ${GENERATED_TOOLS} tools`,
  unit: 'ms',
  value: median(codegen),
  baseline: median(jsonRoundTrips),
  baselineName: 'JSON round trip of the schemas',
  target: '≤ 20 ms',
  met: median(codegen) <= 20,
});
const big = createCodecall({
  sandbox: 'none',
  stateDir: join(stateDir, 'big'),
  tools: manyTools.map((tool) => defineTool({ ...tool, execute: async () => ({ ok: true }) })),
});
const importTimes = [];
const jsonImportTimes = [];
const timedImport = (module) =>
  `import time\nstart = time.perf_counter()\nimport ${module}\nprint((time.perf_counter() - start) * 1e3)`;
await big.execute(timedImport('tools'));
for (let run = 0; run < Math.min(RUNS, 20); run += 1) {
  importTimes.push(Number(expectSuccess(await big.execute(timedImport('tools'))).stdout));
  jsonImportTimes.push(Number(expectSuccess(await big.execute(timedImport('json'))).stdout));
}
await big.close();
row({
  figure: `import of the generated module, ${GENERATED_TOOLS} tools`,
  unit: 'ms',
  digits: 2,
  value: median(importTimes),
  baseline: median(jsonImportTimes),
  baselineName: 'import json',
  target: '≤ 10 ms',
  met: median(importTimes) <= 10,
});

// Databases: sequential query() calls of a one-row SELECT on SQLite, next to the statement run through sql.js in Node.
print('database queries…');
const sqlJsInstalled = (() => {
  try {
    createRequire(import.meta.url).resolve('sql.js');
    return true;
  } catch {
    return false;
  }
})();
if (sqlJsInstalled) {
  const { measureDatabaseQueries } = await import('./database-query.js');
  const databaseFigures = await measureDatabaseQueries({ stateDir: join(stateDir, 'database'), rounds: 5 });
  row({
    figure: '1,000 sequential query() calls, SQLite one-row SELECT',
    unit: 'µs',
    value: databaseFigures.query,
    baseline: databaseFigures.driver,
    baselineName: 'same statement through sql.js in Node',
  });
  row({
    figure: '1,000 sequential query() calls, SQLite one-row SELECT',
    unit: 'µs',
    value: databaseFigures.query,
    baseline: databaseFigures.toolCall,
    baselineName: 'host tool returning such a row',
  });
} else {
  rows.push({
    figure: '1,000 sequential query() calls, SQLite (µs)',
    value: 'skipped',
    baseline: 'sql.js is not installed (npm install sql.js)',
    ratio: '',
    target: '',
    met: '',
  });
}

// Bulk data (bench/bulk-io.js): files through read_file next to plain reads, a 5 MB result next to a raw socketpair
// reply, 50,000 printed lines next to a bare interpreter.
const { measureBulkIo } = await import('./bulk-io.js');
for (const entry of await measureBulkIo({
  stateDir: join(stateDir, 'bulk'),
  interpreter,
  rounds: Math.max(3, Math.round(RUNS / 12)),
  print,
})) {
  row(entry);
}

// Worker fleet: tool calls through Redis, runs per second with worker processes, queue latency (needs redis-server).
print('worker fleet…');
const { measureRemote } = await import('./remote.js');
const fleet = await measureRemote({ stateDir: join(stateDir, 'fleet') });
if (fleet === undefined) {
  rows.push({
    figure: 'worker fleet rows',
    value: 'skipped',
    baseline: 'redis-server is not installed (apt-get install redis-server)',
    ratio: '',
    target: '',
    met: '',
  });
} else {
  row({
    figure: 'remote tool call, through Redis and back',
    unit: 'µs',
    value: fleet.remoteCall,
    baseline: fleet.plainRedisCall,
    baselineName: 'plain Redis request/reply (list push, blocking pop, and back)',
  });
  row({
    figure: 'remote tool call, through Redis and back',
    unit: 'µs',
    value: fleet.remoteCall,
    baseline: fleet.localCall,
    baselineName: 'local tool call',
  });
  row({
    figure: 'submit to script start, remote',
    unit: 'ms',
    value: fleet.remoteStart,
    baseline: fleet.localStart,
    baselineName: 'local run',
  });
  row({
    figure: 'run saving a 1 MiB artifact, remote (sent home through Redis)',
    unit: 'ms',
    value: fleet.remoteArtifact,
    baseline: fleet.localArtifact,
    baselineName: 'local run',
  });
  for (const entry of fleet.throughput) {
    row({
      figure: `print(1) runs/s, ${entry.workers} worker process${entry.workers === 1 ? '' : 'es'} × ${entry.atOnce / entry.workers}`,
      unit: 'runs/s',
      value: entry.remote,
      baseline: entry.local,
      baselineName: `local, ${entry.atOnce} at once`,
    });
  }
}

// The first script of a fresh process, the one-shot CLI, serve's first call, the warm pool against a cell.
await addStartupRows(undefined);
await finish();

/** Closes what the benchmarks made, prints the table and writes bench/results.json. */
async function finish() {
  await codecall.close();
  rmSync(stateDir, { recursive: true, force: true });

  const columns = ['figure', 'value', 'baseline', 'ratio', 'target', 'met'];
  const widths = columns.map((key) => Math.max(key.length, ...rows.map((entry) => String(entry[key]).length)));
  const line = (cells) =>
    cells
      .map((cell, index) => String(cell).padEnd(widths[index]))
      .join('  ')
      .trimEnd();
  console.log(
    `codecall benchmarks: Python ${interpreter.version}, Node ${process.version}, ${cpus().length} CPUs, ` +
      `load ${loadavg()
        .map((value) => value.toFixed(2))
        .join(' ')}, ${RUNS} runs, medians, ${((performance.now() - benchStarted) / 1_000).toFixed(0)} s`,
  );
  console.log(line(columns));
  for (const entry of rows) console.log(line(columns.map((key) => entry[key])));
  writeFileSync(
    new URL('./results.json', import.meta.url),
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        python: interpreter.version,
        node: process.version,
        cpus: cpus().length,
        load: loadavg(),
        runs: RUNS,
        rows: rows.map(({ raw, ...entry }) => ({ ...entry, ...(raw ?? {}) })),
      },
      null,
      2,
    )}\n`,
  );
}
