import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { type Codecall, type CodecallOptions, createCodecall } from '../../src/index.js';
import {
  findRedisServer,
  type RedisServer,
  startRedisServer,
  startWorkerProcess,
  type WorkerProcess,
} from './redis-fleet.js';

/** Where a parametrised test file's scripts run: here, or on a worker process through Redis. */
export type CodecallMode = 'local' | 'remote';

const redisServer = findRedisServer();
if ('missing' in redisServer) console.warn(redisServer.missing);

/** The modes a parametrised file runs in: `remote` only when `redis-server` is installed (the build is needed too). */
export const codecallModes: readonly CodecallMode[] = 'missing' in redisServer ? ['local'] : ['local', 'remote'];

/**
 * {@link useCodecalls} in `mode`: every codecall gets a private state folder, isolation `none` and no workspace mount;
 * in `remote` mode its runs go to one `codecall worker` process (sandbox `none`) on a redis-server of the file's own,
 * started before the tests of the calling `describe` and stopped after them. Call it inside that `describe`, and the
 * returned function in its tests or a `beforeAll`.
 */
export function useCodecallsIn(mode: CodecallMode): (options?: CodecallOptions) => Codecall {
  const created: Codecall[] = [];
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-test-'));
  let redis: RedisServer | undefined;
  let worker: WorkerProcess | undefined;
  const queue = `modes-${process.pid}`;
  if (mode === 'remote') {
    beforeAll(async () => {
      if ('missing' in redisServer) return;
      redis = await startRedisServer(redisServer);
      worker = await startWorkerProcess(redis.url, { queue, concurrency: 4 });
    }, 60_000);
  }
  afterAll(async () => {
    await Promise.all(created.map((codecall) => codecall.close()));
    await worker?.stop();
    await redis?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }, 60_000);
  return (options = {}) => {
    if (mode === 'remote' && redis === undefined) {
      throw new Error('create remote codecalls in a test or a beforeAll (the fleet starts in a beforeAll)');
    }
    const remote = redis === undefined ? {} : { remote: { redis: redis.url, queue } };
    const codecall = createCodecall({ sandbox: 'none', workspaceMount: 'none', stateDir, ...options, ...remote });
    created.push(codecall);
    return codecall;
  };
}
