import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Codecall, createCodecall, defineTool } from '../../src/index.js';
import {
  findRedisServer,
  type RedisServer,
  startRedisServer,
  startWorkerProcess,
  type WorkerProcess,
} from '../support/redis-fleet.js';

const redisServer = findRedisServer();
if ('missing' in redisServer) console.warn(redisServer.missing);

const tools = [
  defineTool({
    name: 'add',
    description: 'Add two numbers',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
    execute: ({ a, b }: { a: number; b: number }) => a + b,
  }),
  defineTool({
    name: 'fail',
    description: 'Always fails',
    inputSchema: { type: 'object', properties: {} },
    execute: () => {
      throw new Error('the backend is down');
    },
  }),
  defineTool({
    name: 'guarded',
    description: 'Needs approval',
    inputSchema: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
    needsApproval: true,
    execute: ({ target }: { target: string }) => `done ${target}`,
  }),
];

/** The same behaviours, checked on a local codecall and on one whose runs go to a worker process. */
describe.skipIf('missing' in redisServer).each(['local', 'remote'] as const)('%s runs behave the same', (mode) => {
  let redis: RedisServer | undefined;
  let worker: WorkerProcess | undefined;
  let codecall: Codecall;

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    const options = {
      sandbox: 'none' as const,
      tools,
      limits: { maxToolCalls: 3 },
      approveToolCall: ({ arguments: args }: { arguments: Readonly<Record<string, unknown>> }) =>
        args.target === 'staging' ? true : { allow: false as const, reason: 'production is off limits' },
    };
    if (mode === 'remote') {
      redis = await startRedisServer(redisServer);
      worker = await startWorkerProcess(redis.url, { queue: 'same' });
      codecall = createCodecall({ ...options, remote: { redis: redis.url, queue: 'same' } });
    } else {
      codecall = createCodecall(options);
    }
  }, 60_000);

  afterAll(async () => {
    await codecall?.close();
    await worker?.kill();
    await redis?.stop();
  }, 30_000);

  it('prints what the script prints, with its tool results', async () => {
    const result = await codecall.execute('from tools import add\nprint(add(1, 2))');
    expect(result).toMatchObject({ status: 'success', stdout: '3\n', toolCalls: 1, exitCode: 0 });
  });

  it('reports an uncaught exception with its type and traceback', async () => {
    const result = await codecall.execute('def f():\n    raise KeyError("nope")\nf()');
    expect(result.status).toBe('error');
    expect(result.error?.type).toBe('KeyError');
    expect(result.error?.traceback).toMatch(/in f/);
  });

  it('raises a failing tool as ToolError with the host message', async () => {
    const result = await codecall.execute(
      'from tools import fail, ToolError\ntry:\n    fail()\nexcept ToolError as error:\n    print("caught", error)',
    );
    expect(result.stdout).toMatch(/^caught .*the backend is down/);
  });

  it('asks the approval hook of the agent', async () => {
    const result = await codecall.execute(
      'from tools import guarded, ToolError\nprint(guarded(target="staging"))\ntry:\n    guarded(target="prod")\nexcept ToolError as error:\n    print(error)',
    );
    expect(result.stdout).toMatch(/^done staging\n.*denied: production is off limits/);
  });

  it('stops at the tool call limit and at the timeout', async () => {
    const limited = await codecall.execute('from tools import add\nfor i in range(10):\n    add(i, 1)');
    expect(limited).toMatchObject({ status: 'limit', reason: 'tool_calls', toolCalls: 3 });
    const slow = await codecall.execute('import time\ntime.sleep(30)', { timeoutMs: 500 });
    expect(slow).toMatchObject({ status: 'timeout', reason: 'timeout' });
  });

  it('keeps a session’s variables between cells', async () => {
    const session = codecall.session();
    await session.execute('total = 0');
    await session.execute('from tools import add\ntotal = add(total, 5)');
    expect((await session.execute('print(total)')).stdout).toBe('5\n');
    await session.close();
  });
});
