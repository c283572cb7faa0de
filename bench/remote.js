// The worker fleet rows of `npm run bench`: a tool call of a remote script (through Redis and back) next to a plain
// Redis request/reply between two connections, runs per second with 1, 2 and 4 worker processes next to the same runs
// on this process, and the time from submit to script start next to a local run's. Needs redis-server (the rows say
// "skipped" without it). Also runnable alone: `npm run build && node bench/remote.js`.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createCodecall, defineTool } from '../dist/index.js';
import { median } from './measure.js';

/** Sequential tool calls per measured round. */
const CALLS = 1_000;
const CALL_ROUNDS = 5;
/** Size of the artifact of the artifact rows, and runs of each kind (interleaved). */
const ARTIFACT_BYTES = 1024 * 1024;
const ARTIFACT_RUNS = 15;
/** Runs submitted at once for the runs-per-second rows. */
const THROUGHPUT_RUNS = 120;
/** Runs of one worker process at once. */
const WORKER_CONCURRENCY = 2;
const LATENCY_RUNS = 30;
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

/** The path of redis-server, or undefined. */
export function findRedisServer() {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startWorker(url, queue) {
  const child = spawn(
    process.execPath,
    [CLI, 'worker', '--redis', url, '--queue', queue, '--sandbox', 'none', '--concurrency', String(WORKER_CONCURRENCY)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr.on('data', (chunk) => {
    log += chunk;
  });
  while (!/takes runs/.test(log)) {
    if (child.exitCode !== null) throw new Error(`worker failed: ${log}`);
    await sleep(20);
  }
  return child;
}

async function stopWorkers(children) {
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          child.once('exit', resolve);
          child.kill('SIGTERM');
        }),
    ),
  );
}

/** Microseconds of one request/reply through two Redis lists (push, blocking pop on the other side, and back). */
/** Medians of `runs` measurements of a remote and a local run, taken in turn so both see the same load. */
async function interleavedMedians(runs, timeRemote, timeLocal) {
  const remote = [];
  const local = [];
  for (let run = 0; run < runs; run += 1) {
    remote.push(await timeRemote());
    local.push(await timeLocal());
  }
  return [median(remote), median(local)];
}

async function plainRedisRoundTrip(url, calls) {
  const { Redis } = await import('ioredis');
  const [asker, askerBlocking, answerer, answererBlocking] = Array.from({ length: 4 }, () => new Redis(url));
  let running = true;
  const answering = (async () => {
    while (running) {
      const popped = await answererBlocking.blpop('bench:requests', 1);
      if (popped) await answerer.rpush('bench:replies', popped[1]);
    }
  })();
  const started = performance.now();
  for (let call = 0; call < calls; call += 1) {
    await asker.rpush('bench:requests', JSON.stringify({ call, value: call }));
    await askerBlocking.blpop('bench:replies', 0);
  }
  const microseconds = ((performance.now() - started) / calls) * 1_000;
  running = false;
  await answering;
  for (const connection of [asker, askerBlocking, answerer, answererBlocking]) connection.disconnect();
  return microseconds;
}

/**
 * Starts a redis-server, measures, stops it. Returns undefined when redis-server is not installed.
 */
export async function measureRemote({ stateDir }) {
  const redisServer = findRedisServer();
  if (redisServer === undefined) return undefined;
  const folder = mkdtempSync(join(tmpdir(), 'codecall-bench-redis-'));
  const port = await freePort();
  const redis = spawn(redisServer, ['--port', String(port), '--bind', '127.0.0.1', '--dir', folder, '--save', ''], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  await sleep(300);
  const echo = defineTool({
    name: 'echo',
    description: 'Returns its arguments.',
    inputSchema: { type: 'object', properties: { value: {} } },
    execute: async (args) => args,
  });
  const options = { sandbox: 'none', tools: [echo], stateDir, limits: { maxToolCalls: CALLS + 10 } };
  const local = createCodecall(options);
  const figures = {};
  const workers = [];
  try {
    const queue = 'bench';
    const remote = createCodecall({ ...options, remote: { redis: url, queue } });
    workers.push(await startWorker(url, queue));
    // Tool call round trip: rounds of CALLS sequential echo calls, each next to the same through plain Redis lists.
    const loop = `import time\nfrom tools import echo\nstart = time.perf_counter()\nfor i in range(${CALLS}): echo(value=i)\nprint((time.perf_counter() - start) / ${CALLS} * 1e6)`;
    await remote.execute(loop);
    await plainRedisRoundTrip(url, 200);
    const remoteCall = [];
    const plainCall = [];
    const localCall = [];
    for (let round = 0; round < CALL_ROUNDS; round += 1) {
      remoteCall.push(Number((await remote.execute(loop)).stdout));
      plainCall.push(await plainRedisRoundTrip(url, CALLS));
      localCall.push(Number((await local.execute(loop)).stdout));
    }
    figures.remoteCall = median(remoteCall);
    figures.plainRedisCall = median(plainCall);
    figures.localCall = median(localCall);

    // Queue latency: execute() to the run-start event, next to a local run's.
    const toStart = async (codecall) => {
      const started = performance.now();
      let at = 0;
      await codecall.execute('pass', {
        onEvent: (event) => {
          if (event.type === 'run-start') at = performance.now();
        },
      });
      return at - started;
    };
    [figures.remoteStart, figures.localStart] = await interleavedMedians(
      LATENCY_RUNS,
      () => toStart(remote),
      () => toStart(local),
    );

    // A run saving a 1 MiB artifact: the worker reads it and sends it home in the result, the agent writes it.
    const saveArtifact = `from codecall_runtime import save_artifact\nsave_artifact("data.bin", b"x" * ${ARTIFACT_BYTES})`;
    const timed = async (codecall) => {
      const started = performance.now();
      const result = await codecall.execute(saveArtifact);
      if (result.artifacts?.[0]?.bytes !== ARTIFACT_BYTES)
        throw new Error(`the artifact did not come back: ${JSON.stringify(result)}`);
      return performance.now() - started;
    };
    await timed(remote);
    await timed(local);
    [figures.remoteArtifact, figures.localArtifact] = await interleavedMedians(
      ARTIFACT_RUNS,
      () => timed(remote),
      () => timed(local),
    );

    // Runs per second with 1, 2 and 4 worker processes, each next to the same runs on this process with as many at once.
    const runsPerSecond = async (execute) => {
      const started = performance.now();
      await Promise.all(Array.from({ length: THROUGHPUT_RUNS }, () => execute()));
      return THROUGHPUT_RUNS / ((performance.now() - started) / 1_000);
    };
    figures.throughput = [];
    for (const count of [1, 2, 4]) {
      while (workers.length < count) workers.push(await startWorker(url, queue));
      await runsPerSecond(() => remote.execute('print(1)'));
      const remoteRate = await runsPerSecond(() => remote.execute('print(1)'));
      let running = 0;
      const waiting = [];
      const limited = async () => {
        while (running >= count * WORKER_CONCURRENCY) await new Promise((resolve) => waiting.push(resolve));
        running += 1;
        try {
          return await local.execute('print(1)');
        } finally {
          running -= 1;
          waiting.shift()?.();
        }
      };
      const localRate = await runsPerSecond(limited);
      figures.throughput.push({
        workers: count,
        remote: remoteRate,
        local: localRate,
        atOnce: count * WORKER_CONCURRENCY,
      });
    }
    await remote.close();
  } finally {
    await stopWorkers(workers);
    await local.close();
    redis.kill('SIGTERM');
    await new Promise((resolve) => redis.once('exit', resolve));
    rmSync(folder, { recursive: true, force: true });
  }
  return figures;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-'));
  const figures = await measureRemote({ stateDir });
  rmSync(stateDir, { recursive: true, force: true });
  console.log(figures === undefined ? 'redis-server is not installed: skipped' : JSON.stringify(figures, null, 2));
}
