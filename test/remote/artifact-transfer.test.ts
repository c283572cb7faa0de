import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artifact, ExecuteResult } from '../../src/core/result.js';
import { createCodecall } from '../../src/index.js';
import { MAX_SENT_ARTIFACT_BYTES, packArtifacts, unpackArtifacts } from '../../src/remote/artifact-transfer.js';
import { type FleetWorker, startFleetWorker } from '../../src/remote/index.js';
import { findRedisServer, type RedisServer, startRedisServer } from '../support/redis-fleet.js';

const scratch = mkdtempSync(join(tmpdir(), 'codecall-artifact-transfer-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let folders = 0;
function folder(): string {
  folders += 1;
  const path = join(scratch, `folder-${folders}`);
  mkdirSync(path);
  return path;
}

function resultWith(artifacts: readonly Artifact[]): ExecuteResult {
  return {
    status: 'success',
    stdout: '',
    stderr: '',
    exitCode: 0,
    toolCalls: 0,
    durationMs: 1,
    isolation: 'none',
    artifacts,
  };
}

const listed = (path: string, mimeType = 'text/plain'): Artifact => ({ path, mimeType, bytes: 0 });

describe('a worker packing the artifacts of a run', () => {
  it('sends regular files only: a link, a FIFO, a missing file stay behind and are named; the copies are removed', async () => {
    const worker = folder();
    const passwd = readFileSync('/etc/passwd');
    writeFileSync(join(worker, 'real.txt'), 'real');
    symlinkSync('/etc/passwd', join(worker, 'passwd.txt'));
    execFileSync('mkfifo', [join(worker, 'pipe.png')]);
    const packed = await packArtifacts(
      resultWith(['real.txt', 'passwd.txt', 'pipe.png', 'gone.txt'].map((name) => listed(join(worker, name)))),
      'worker-1',
    );
    expect(packed.artifacts).toEqual([{ name: 'real.txt', mimeType: 'text/plain', data: 'cmVhbA==' }]);
    expect(packed.result.artifacts).toBeUndefined();
    expect(packed.result.artifactsNote).toBe(
      'artifacts not sent home from worker worker-1: passwd.txt (no longer available), pipe.png (not a regular file), gone.txt (no longer available)',
    );
    expect(readdirSync(worker)).toEqual([]);
    expect(readFileSync('/etc/passwd').equals(passwd)).toBe(true);
  });

  it(`sends at most ${MAX_SENT_ARTIFACT_BYTES} bytes in all, and says how many were left out`, async () => {
    const worker = folder();
    const names = ['first.bin', 'second.bin', 'small.txt', 'huge.bin'];
    for (const name of names) writeFileSync(join(worker, name), 'x');
    // Sparse files: the bound is checked on the size before any byte is read.
    truncateSync(join(worker, 'first.bin'), MAX_SENT_ARTIFACT_BYTES / 2);
    truncateSync(join(worker, 'second.bin'), MAX_SENT_ARTIFACT_BYTES / 2 + 1);
    truncateSync(join(worker, 'huge.bin'), 4 * MAX_SENT_ARTIFACT_BYTES);
    const packed = await packArtifacts(
      {
        ...resultWith(names.map((name) => listed(join(worker, name)))),
        artifactsNote: 'artifacts dropped: 1 incomplete',
      },
      'worker-2',
    );
    expect(packed.artifacts.map((artifact) => artifact.name)).toEqual(['first.bin', 'small.txt']);
    expect(packed.result.artifactsNote).toBe(
      `artifacts dropped: 1 incomplete; 2 artifact(s) not sent home from worker worker-2: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run's artifacts may total`,
    );
  });
});

describe('an agent unpacking the artifacts a worker sent', () => {
  it('writes them into its own folder with checked, unique names, and lists them as a local run does', async () => {
    const agent = join(folder(), 'remote-run');
    const result = await unpackArtifacts(
      resultWith([listed('/worker/path/x.txt')]),
      [
        { name: 'x.txt', mimeType: 'text/plain', data: 'b25l' },
        { name: 'x.txt', mimeType: 'text/plain', data: 'dHdv' },
        { name: '../escape.txt', mimeType: 'text/plain', data: 'eA==' },
        { name: '/etc/forged.txt', mimeType: 'text/plain', data: 'eA==' },
        { name: '.hidden', mimeType: 'text/plain', data: 'eA==' },
        { name: 'bad.bin', mimeType: 'text/plain', data: 'not base64!' },
        { name: 'number.bin', mimeType: 'text/plain', data: 5 },
        'not an object',
      ],
      agent,
    );
    expect(result.artifacts).toEqual([
      { path: join(agent, 'x.txt'), mimeType: 'text/plain', bytes: 3 },
      { path: join(agent, 'x-2.txt'), mimeType: 'text/plain', bytes: 3 },
    ]);
    expect(readFileSync(join(agent, 'x-2.txt'), 'utf8')).toBe('two');
    expect(result.artifactsNote).toBe('artifacts dropped: 5 malformed frame(s) or unusable name(s)');
    expect(readdirSync(agent).sort()).toEqual(['x-2.txt', 'x.txt']);
    expect(existsSync(join(agent, '..', 'escape.txt'))).toBe(false);
    expect(existsSync('/etc/forged.txt')).toBe(false);
  });

  it('keeps at most the artifact count of a local run, and takes no list that is not one', async () => {
    const agent = join(folder(), 'remote-many');
    const many = Array.from({ length: 150 }, (_, index) => ({
      name: `f${index}.txt`,
      mimeType: 'text/plain',
      data: '',
    }));
    const result = await unpackArtifacts(resultWith([]), many, agent);
    expect(result.artifacts).toHaveLength(100);
    expect(result.artifactsNote).toBe('artifacts dropped: 50 over the limit of 100 artifacts');
    const none = await unpackArtifacts(resultWith([]), { name: 'x.txt', data: 'eA==' }, join(folder(), 'remote-none'));
    expect(none.artifacts).toBeUndefined();
  });
});

const redisServer = findRedisServer();
if ('missing' in redisServer) console.warn(redisServer.missing);

describe.skipIf('missing' in redisServer)('artifacts of a remote run over the bound', () => {
  let redis: RedisServer | undefined;
  let worker: FleetWorker | undefined;
  const workerState = mkdtempSync(join(tmpdir(), 'codecall-worker-state-'));
  const agentState = mkdtempSync(join(tmpdir(), 'codecall-agent-state-'));

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    redis = await startRedisServer(redisServer);
    worker = await startFleetWorker({
      redis: redis.url,
      queue: 'artifacts',
      codecall: { sandbox: 'none', stateDir: workerState },
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await redis?.stop();
    rmSync(workerState, { recursive: true, force: true });
    rmSync(agentState, { recursive: true, force: true });
  }, 30_000);

  it('brings home what fits, says what did not, and leaves no artifact on the worker', async () => {
    const codecall = createCodecall({
      sandbox: 'none',
      stateDir: agentState,
      remote: { redis: redis?.url ?? '', queue: 'artifacts' },
    });
    try {
      const result = await codecall.execute(
        [
          'import os',
          'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
          'open(os.path.join(artifacts, "small.txt"), "w").write("small")',
          `open(os.path.join(artifacts, "large.bin"), "wb").write(b"x" * ${MAX_SENT_ARTIFACT_BYTES + 1})`,
        ].join('\n'),
      );
      expect(result.status).toBe('success');
      expect(result.artifacts?.map((artifact) => basename(artifact.path))).toEqual(['small.txt']);
      expect(result.artifacts?.[0]?.path.startsWith(agentState)).toBe(true);
      expect(result.artifactsNote).toBe(
        `1 artifact(s) not sent home from worker ${worker?.id}: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run's artifacts may total`,
      );
      const left = execFileSync('find', [workerState, '-type', 'f', '-path', '*/outputs/*'], { encoding: 'utf8' });
      expect(left).toBe('');
    } finally {
      await codecall.close();
    }
  });
});
