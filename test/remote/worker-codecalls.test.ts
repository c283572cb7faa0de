import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Codecall, createCodecall, defineTool } from '../../src/index.js';
import { type FleetWorker, startFleetWorker } from '../../src/remote/index.js';
import { findRedisServer, type RedisServer, startRedisServer, waitUntil } from '../support/redis-fleet.js';

const redisServer = findRedisServer();
if ('missing' in redisServer) console.warn(redisServer.missing);

/** A tool named `name` returning `name`: each agent below has its own tool manifest, so its own codecall on a worker. */
const namedTool = (name: string) =>
  defineTool({
    name,
    description: `Says ${name}.`,
    inputSchema: { type: 'object', properties: {} },
    execute: () => name,
  });

describe.skipIf('missing' in redisServer)('the codecalls a worker keeps, one per tool manifest', () => {
  let redis: RedisServer | undefined;
  let worker: FleetWorker | undefined;
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-worker-codecalls-'));
  const agents: Codecall[] = [];
  const agent = (tool: string): Codecall => {
    const codecall = createCodecall({
      sandbox: 'none',
      stateDir,
      tools: [namedTool(tool)],
      remote: { redis: redis?.url ?? '', queue: 'codecalls' },
    });
    agents.push(codecall);
    return codecall;
  };

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    redis = await startRedisServer(redisServer);
    worker = await startFleetWorker({
      redis: redis.url,
      queue: 'codecalls',
      codecall: { sandbox: 'none', stateDir },
      maxCodecalls: 1,
      idleCodecallMs: 1_500,
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(agents.map((codecall) => codecall.close()));
    await worker?.close();
    await redis?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }, 30_000);

  it('closes the least recently used idle one past the bound, and idle ones after their time; never one in use', async () => {
    const alpha = agent('alpha');
    const beta = agent('beta');
    const session = alpha.session();
    expect((await session.execute('from tools import alpha\nname = alpha()')).status).toBe('success');
    expect(worker?.codecalls).toBe(1);

    // Over the bound of one: beta's codecall is the idle one, so it goes once its run ended; alpha's holds a session.
    expect((await beta.execute('from tools import beta\nprint(beta())')).stdout).toBe('beta\n');
    expect(worker?.codecalls).toBe(1);

    // Longer than the idle time: alpha's codecall stays while its session lives, and the session keeps its variables.
    await new Promise((wait) => setTimeout(wait, 2_500));
    expect(worker?.codecalls).toBe(1);
    expect((await session.execute('print(name)')).stdout).toBe('alpha\n');

    // Made again when needed after it was closed.
    expect((await beta.execute('from tools import beta\nprint(beta())')).stdout).toBe('beta\n');

    await session.close();
    await waitUntil(() => worker?.codecalls === 0, 'the idle codecalls to be closed');
    expect((await alpha.execute('from tools import alpha\nprint(alpha())')).stdout).toBe('alpha\n');
  });
});
