import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Codecall, CodecallAbortError, createCodecall, defineTool } from '../../src/index.js';
import {
  findRedisServer,
  type RedisServer,
  startRedisServer,
  startWorkerProcess,
  type WorkerProcess,
  waitUntil,
} from '../support/redis-fleet.js';

const redisServer = findRedisServer();
if ('missing' in redisServer) console.warn(redisServer.missing);

/** Tools whose every call is counted here, on the agent: the side effects a lost or doubled run would show. */
function countingTools(calls: Map<string, number>, workersSeen?: Set<string>) {
  return [
    defineTool({
      name: 'record',
      description: 'Record that a run reached this point',
      inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
      execute: ({ key }: { key: string }) => {
        calls.set(key, (calls.get(key) ?? 0) + 1);
        return { recorded: key, count: calls.get(key) };
      },
    }),
    defineTool({
      name: 'whoami',
      description: 'Report the pid of the script',
      inputSchema: { type: 'object', properties: { pid: { type: 'integer' } }, required: ['pid'] },
      execute: ({ pid }: { pid: number }) => {
        workersSeen?.add(String(pid));
        return pid;
      },
    }),
  ];
}

describe.skipIf('missing' in redisServer)('worker fleet on BullMQ and Redis', () => {
  let redis: RedisServer;
  let workers: WorkerProcess[] = [];
  const queue = 'fleet-test';

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    redis = await startRedisServer(redisServer);
    workers = await Promise.all([startWorkerProcess(redis.url, { queue }), startWorkerProcess(redis.url, { queue })]);
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(workers.map((worker) => worker.kill()));
    await redis?.stop();
  }, 30_000);

  const remoteCodecall = (calls: Map<string, number>, options: { queue?: string } = {}): Codecall =>
    createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue: options.queue ?? queue },
    });

  it('runs a script on a worker: tool calls are answered here, events arrive, the result names the worker', async () => {
    const calls = new Map<string, number>();
    const codecall = remoteCodecall(calls);
    try {
      const events: string[] = [];
      const result = await codecall.execute('from tools import record\nprint(record(key="one")["count"])', {
        onEvent: (event) => events.push(event.type),
      });
      expect(result.status).toBe('success');
      expect(result.stdout).toBe('1\n');
      expect(result.toolCalls).toBe(1);
      expect(calls.get('one')).toBe(1);
      expect(workers.map((worker) => worker.id)).toContain(result.worker);
      expect(events[0]).toBe('run-start');
      expect(events).toContain('tool-call-start');
      expect(events).toContain('tool-call-end');
      expect(events.at(-1)).toBe('run-end');
      const invalid = await codecall.execute('from tools import record\nrecord(key=3)');
      expect(invalid.status).toBe('error');
      expect(invalid.error?.message).toMatch(/record: argument 'key' must be string/);
      expect(calls.size).toBe(1);
    } finally {
      await codecall.close();
    }
  });

  it('spreads parallel runs over the workers', async () => {
    const calls = new Map<string, number>();
    const codecall = remoteCodecall(calls);
    try {
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          codecall.execute(`import time\nfrom tools import record\nrecord(key="p${index}")\ntime.sleep(0.4)`),
        ),
      );
      expect(results.map((result) => result.status)).toEqual(Array(8).fill('success'));
      expect(new Set(results.map((result) => result.worker)).size).toBe(2);
      expect([...calls.values()]).toEqual(Array(8).fill(1));
    } finally {
      await codecall.close();
    }
  });

  it('keeps a session on one worker for its life, with its variables', async () => {
    const codecall = remoteCodecall(new Map());
    try {
      const session = codecall.session();
      const first = await session.execute('x = 41');
      const cells = [first];
      for (let index = 0; index < 4; index += 1) cells.push(await session.execute('x += 1\nprint(x)'));
      expect(cells.at(-1)?.stdout).toBe('45\n');
      expect(new Set(cells.map((cell) => cell.worker)).size).toBe(1);
      await session.reset();
      const fresh = await session.execute('print("x" in globals())');
      expect(fresh.stdout).toBe('False\n');
      expect(fresh.worker).toBe(first.worker);
      await session.close();
    } finally {
      await codecall.close();
    }
  });

  it('aborts a remote run with its AbortSignal', async () => {
    const calls = new Map<string, number>();
    const codecall = remoteCodecall(calls);
    try {
      const controller = new AbortController();
      const running = codecall.execute('import time\nfrom tools import record\nrecord(key="a")\ntime.sleep(30)', {
        signal: controller.signal,
        onEvent: (event) => {
          if (event.type === 'tool-call-end') controller.abort(new Error('stop'));
        },
      });
      const error = await running.catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(CodecallAbortError);
      expect((error as CodecallAbortError).result?.status).toBe('aborted');
      expect(calls.get('a')).toBe(1);
    } finally {
      await codecall.close();
    }
  });

  it('close() stops the runs in flight on the workers: they end aborted', async () => {
    const calls = new Map<string, number>();
    const codecall = remoteCodecall(calls);
    const running = codecall.execute(
      'import time\nfrom tools import record\nrecord(key="c")\ntime.sleep(30)\nrecord(key="c")',
    );
    await waitUntil(() => calls.get('c') === 1, 'the first tool call');
    await codecall.close();
    const result = await running;
    expect(result).toMatchObject({ status: 'aborted', reason: 'aborted', toolCalls: 1 });
    expect(calls.get('c')).toBe(1);
    await expect(codecall.execute('print(1)')).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('detects a resubmitted run id instead of running it twice', async () => {
    const calls = new Map<string, number>();
    const codecall = createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    const { createRemoteCodecall } = await import('../../src/remote/index.js');
    const typed = createRemoteCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    try {
      const code = 'from tools import record\nrecord(key="once")';
      expect((await typed.execute(code, { runId: 'order-7' })).status).toBe('success');
      await expect(typed.execute(code, { runId: 'order-7' })).rejects.toMatchObject({ code: 'DUPLICATE_RUN' });
      expect(calls.get('once')).toBe(1);
    } finally {
      await typed.close();
      await codecall.close();
    }
  });
});

describe.skipIf('missing' in redisServer)('worker fleet faults', () => {
  let redis: RedisServer;
  const started: WorkerProcess[] = [];

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    redis = await startRedisServer(redisServer);
  }, 30_000);

  afterAll(async () => {
    await Promise.allSettled(started.map((worker) => worker.kill()));
    await redis?.stop();
  }, 30_000);

  const workerOn = async (queue: string, concurrency = 2) => {
    const worker = await startWorkerProcess(redis.url, { queue, concurrency });
    started.push(worker);
    return worker;
  };

  it('a worker SIGKILLed after a tool call: worker_lost, not run again', async () => {
    const queue = 'lost-after-call';
    const doomed = await workerOn(queue);
    const calls = new Map<string, number>();
    const codecall = createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    try {
      const running = codecall.execute(
        'import time\nfrom tools import record\nrecord(key="k")\ntime.sleep(5)\nrecord(key="k")',
      );
      await waitUntil(() => calls.get('k') === 1, 'the first tool call');
      await workerOn(queue);
      await doomed.kill();
      const result = await running;
      expect(result.status).toBe('error');
      expect(result.reason).toBe('worker_lost');
      expect(result.worker).toBe(doomed.id);
      expect(result.error?.message).toMatch(/made 1 tool call, so it was not run again/);
      expect(calls.get('k')).toBe(1);
    } finally {
      await codecall.close();
    }
  }, 60_000);

  it('a worker SIGKILLed before any tool call: the run goes to another worker and succeeds once', async () => {
    const queue = 'lost-before-call';
    const doomed = await workerOn(queue, 1);
    const calls = new Map<string, number>();
    const codecall = createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    // The script waits for this file, made once the first worker is dead: however slowly the second one starts, the
    // first never gets to the tool call.
    const folder = mkdtempSync(join(tmpdir(), 'codecall-lost-before-call-'));
    // Scripts run under a uid of their own: they must be able to look into the folder.
    chmodSync(folder, 0o755);
    const go = join(folder, 'go');
    try {
      const events: string[] = [];
      const running = codecall.execute(
        `import os, time\nwhile not os.path.exists(${JSON.stringify(go)}):\n    time.sleep(0.05)\nfrom tools import record\nprint(record(key="r")["count"])`,
        {
          onEvent: (event) => events.push(event.type),
        },
      );
      await waitUntil(() => events.includes('run-start'), 'the run to start');
      const survivor = await workerOn(queue, 1);
      await doomed.kill();
      writeFileSync(go, '');
      const result = await running;
      expect(result.status).toBe('success');
      expect(result.worker).toBe(survivor.id);
      expect(calls.get('r')).toBe(1);
    } finally {
      await codecall.close();
      rmSync(folder, { recursive: true, force: true });
    }
  }, 60_000);

  it('the agent process exiting: its run is stopped on the worker', async () => {
    const queue = 'agent-exit';
    await workerOn(queue);
    const agentScript = `
      import { createCodecall, defineTool } from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
      const codecall = createCodecall({ sandbox: 'none', remote: { redis: ${JSON.stringify(redis.url)}, queue: ${JSON.stringify(queue)} },
        tools: [defineTool({ name: 'report', description: 'r', inputSchema: { type: 'object', properties: { pid: { type: 'integer' } } },
          execute: ({ pid }) => { process.stdout.write('pid ' + pid + '\\n'); return 1; } })] });
      await codecall.execute('import os, time\\nfrom tools import report\\nreport(pid=os.getpid())\\ntime.sleep(120)');
    `;
    const agent = spawn(process.execPath, ['--input-type=module', '-e', agentScript], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    agent.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await waitUntil(() => /pid \d+/.test(output), 'the script to report its pid', 30_000);
    const pid = Number(/pid (\d+)/.exec(output)?.[1]);
    expect(isAlive(pid)).toBe(true);
    agent.kill('SIGKILL');
    await waitUntil(() => !isAlive(pid), 'the worker to stop the run of the dead agent', 30_000);
  }, 60_000);

  it('Redis restarting mid-run: the run finishes and its tool calls all arrive', async () => {
    const queue = 'redis-restart';
    await workerOn(queue);
    const calls = new Map<string, number>();
    const codecall = createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    try {
      const running = codecall.execute(
        'import time\nfrom tools import record\nrecord(key="before")\ntime.sleep(3)\nprint(record(key="after")["count"])',
      );
      await waitUntil(() => calls.get('before') === 1, 'the first tool call');
      await redis.restart({ downMs: 1_000 });
      const result = await running;
      expect(result.status).toBe('success');
      expect(result.stdout).toBe('1\n');
      expect(calls.get('after')).toBe(1);
      const next = await codecall.execute('from tools import record\nrecord(key="next")');
      expect(next.status).toBe('success');
    } finally {
      await codecall.close();
    }
  }, 60_000);

  it('500 runs over 3 workers: none lost, none doubled (counted by their tool calls)', async () => {
    const queue = 'five-hundred';
    await Promise.all([workerOn(queue), workerOn(queue), workerOn(queue)]);
    const calls = new Map<string, number>();
    const codecall = createCodecall({
      sandbox: 'none',
      tools: countingTools(calls),
      remote: { redis: redis.url, queue },
    });
    try {
      const results = await Promise.all(
        Array.from({ length: 500 }, (_, index) =>
          codecall.execute(`from tools import record\nprint(record(key="run-${index}")["count"])`),
        ),
      );
      expect(results.filter((result) => result.status !== 'success')).toEqual([]);
      expect(calls.size).toBe(500);
      expect([...calls.values()].every((count) => count === 1)).toBe(true);
      expect(new Set(results.map((result) => result.worker)).size).toBe(3);
      expect(results.filter((result) => result.stdout !== '1\n')).toEqual([]);
    } finally {
      await codecall.close();
    }
  }, 120_000);
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
