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
import {
  MAX_SENT_ARTIFACT_BYTES,
  packRunFiles,
  unpackRunFiles,
  withoutFileData,
} from '../../src/remote/artifact-transfer.js';
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

/** A result whose stdout was truncated, its full output saved at `path`, with the notice the engine writes. */
function truncatedResult(path: string, artifacts: readonly Artifact[] = []): ExecuteResult {
  return {
    ...resultWith(artifacts),
    stdout: `head\n[… 10 bytes omitted: kept the first 5 and the last 5 of 20 bytes; the complete output is in ${path} …]\ntail\n`,
    stdoutTruncated: { keptBytes: 10, totalBytes: 20, fullOutputPath: path },
  };
}

describe('a worker packing the artifacts of a run', () => {
  it('sends regular files only: a link, a FIFO, a missing file stay behind and are named; the copies are removed', async () => {
    const worker = folder();
    const passwd = readFileSync('/etc/passwd');
    writeFileSync(join(worker, 'real.txt'), 'real');
    symlinkSync('/etc/passwd', join(worker, 'passwd.txt'));
    execFileSync('mkfifo', [join(worker, 'pipe.png')]);
    const packed = await packRunFiles(
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
    const packed = await packRunFiles(
      {
        ...resultWith(names.map((name) => listed(join(worker, name)))),
        artifactsNote: 'artifacts dropped: 1 incomplete',
      },
      'worker-2',
    );
    expect(packed.artifacts.map((artifact) => artifact.name)).toEqual(['first.bin', 'small.txt']);
    expect(packed.result.artifactsNote).toBe(
      `artifacts dropped: 1 incomplete; 2 artifact(s) not sent home from worker worker-2: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send`,
    );
  });
});

describe('a worker packing the full output of a truncated run', () => {
  it('sends it first, within the same bound as the artifacts, and removes its copy', async () => {
    const worker = folder();
    const output = join(worker, 'run-stdout.txt');
    writeFileSync(output, 'x');
    truncateSync(output, MAX_SENT_ARTIFACT_BYTES / 2);
    writeFileSync(join(worker, 'fits.txt'), 'fits');
    writeFileSync(join(worker, 'half.bin'), 'x');
    truncateSync(join(worker, 'half.bin'), MAX_SENT_ARTIFACT_BYTES / 2);
    const packed = await packRunFiles(
      truncatedResult(output, [listed(join(worker, 'fits.txt')), listed(join(worker, 'half.bin'))]),
      'worker-3',
    );
    expect(packed.fullOutput?.workerPath).toBe(output);
    expect(Buffer.from(packed.fullOutput?.data ?? '', 'base64').length).toBe(MAX_SENT_ARTIFACT_BYTES / 2);
    expect(packed.artifacts.map((artifact) => artifact.name)).toEqual(['fits.txt']);
    expect(packed.result.stdoutTruncated).toEqual({ keptBytes: 10, totalBytes: 20 });
    expect(packed.result.artifactsNote).toBe(
      `1 artifact(s) not sent home from worker worker-3: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send`,
    );
    expect(readdirSync(worker)).toEqual([]);
  });

  it('over the bound, or not a regular file, is not sent: the field is absent, the note and the notice say why', async () => {
    const worker = folder();
    const huge = join(worker, 'huge-stdout.txt');
    writeFileSync(huge, 'x');
    truncateSync(huge, MAX_SENT_ARTIFACT_BYTES + 1);
    const over = await packRunFiles(truncatedResult(huge), 'worker-4');
    const why = `was not sent home from worker worker-4 (over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send)`;
    expect(over.fullOutput).toBeUndefined();
    expect(over.result.stdoutTruncated).toEqual({
      keptBytes: 10,
      totalBytes: 20,
      fullOutputNote: `the full output ${why}`,
    });
    expect(over.result.stdout).toBe(
      `head\n[… 10 bytes omitted: kept the first 5 and the last 5 of 20 bytes; the complete output ${why} …]\ntail\n`,
    );
    const linked = join(worker, 'linked-stdout.txt');
    symlinkSync('/etc/passwd', linked);
    const link = await packRunFiles(truncatedResult(linked), 'worker-4');
    expect(link.fullOutput).toBeUndefined();
    expect(link.result.stdoutTruncated?.fullOutputNote).toBe(
      'the full output was not sent home from worker worker-4 (no longer available)',
    );
    expect(link.result.stdout).not.toContain(worker);
    expect(readdirSync(worker)).toEqual([]);
    expect(existsSync('/etc/passwd')).toBe(true);
  });
});

describe('the reply a queue keeps', () => {
  it('carries no bytes of the files, and says they went only with the result message', () => {
    const workerPath = '/worker/outputs/run-stdout.txt';
    const reply = withoutFileData({
      worker: 'worker-5',
      result: { ...truncatedResult(workerPath), stdoutTruncated: { keptBytes: 10, totalBytes: 20 } },
      fullOutput: { workerPath, data: 'eA==' },
      artifacts: [{ name: 'x.txt', mimeType: 'text/plain', data: 'eA==' }],
    });
    const lost = "only with the worker's result message, which did not arrive";
    expect(Object.keys(reply).sort()).toEqual(['result', 'worker']);
    expect(reply.result?.stdoutTruncated).toEqual({
      keptBytes: 10,
      totalBytes: 20,
      fullOutputNote: `the full output was sent ${lost}`,
    });
    expect(reply.result?.stdout).toContain(`; the complete output was sent ${lost} …]`);
    expect(reply.result?.artifactsNote).toBe(`1 artifact(s) were sent ${lost}`);
  });
});

describe('an agent unpacking the full output a worker sent', () => {
  it('writes it where a local run would and names it in the field and the notice', async () => {
    const agent = join(folder(), 'remote-run');
    const stdoutPath = `${agent}-stdout.txt`;
    const result = await unpackRunFiles(
      truncatedResult('/worker/outputs/run-stdout.txt'),
      {
        fullOutput: { workerPath: '/worker/outputs/run-stdout.txt', data: Buffer.from('all of it').toString('base64') },
      },
      { artifacts: agent, stdout: stdoutPath },
    );
    expect(result.stdoutTruncated).toEqual({ keptBytes: 10, totalBytes: 20, fullOutputPath: stdoutPath });
    expect(readFileSync(stdoutPath, 'utf8')).toBe('all of it');
    expect(result.stdout).toContain(`; the complete output is in ${stdoutPath} …]`);
    expect(result.stdout).not.toContain('/worker/');
  });

  it('never writes through a file or link already there, and keeps nothing malformed', async () => {
    const base = folder();
    const target = join(base, 'target.txt');
    writeFileSync(target, 'untouched');
    const stdoutPath = join(base, 'remote-run-stdout.txt');
    symlinkSync(target, stdoutPath);
    const sent = { workerPath: '/worker/run-stdout.txt', data: Buffer.from('forged').toString('base64') };
    const paths = { artifacts: join(base, 'remote-run'), stdout: stdoutPath };
    const linked = await unpackRunFiles(truncatedResult(sent.workerPath), { fullOutput: sent }, paths);
    expect(readFileSync(target, 'utf8')).toBe('untouched');
    expect(linked.stdoutTruncated?.fullOutputPath).toBeUndefined();
    expect(linked.stdoutTruncated?.fullOutputNote).toMatch(/^the full output was not kept: it could not be written/);
    const malformed = await unpackRunFiles(
      truncatedResult(sent.workerPath),
      { fullOutput: { ...sent, data: 'not base64!' } },
      { ...paths, stdout: join(base, 'other-stdout.txt') },
    );
    expect(malformed.stdoutTruncated?.fullOutputNote).toBe(
      'the full output was not kept: the worker sent it malformed',
    );
    expect(malformed.stdout).not.toContain('/worker/');
    expect(existsSync(join(base, 'other-stdout.txt'))).toBe(false);
  });
});

describe('an agent unpacking the artifacts a worker sent', () => {
  it('writes them into its own folder with checked, unique names, and lists them as a local run does', async () => {
    const agent = join(folder(), 'remote-run');
    const result = await unpackRunFiles(
      resultWith([listed('/worker/path/x.txt')]),
      {
        artifacts: [
          { name: 'x.txt', mimeType: 'text/plain', data: 'b25l' },
          { name: 'x.txt', mimeType: 'text/plain', data: 'dHdv' },
          { name: '../escape.txt', mimeType: 'text/plain', data: 'eA==' },
          { name: '/etc/forged.txt', mimeType: 'text/plain', data: 'eA==' },
          { name: '.hidden', mimeType: 'text/plain', data: 'eA==' },
          { name: 'bad.bin', mimeType: 'text/plain', data: 'not base64!' },
          { name: 'number.bin', mimeType: 'text/plain', data: 5 },
          'not an object',
        ],
      },
      { artifacts: agent, stdout: `${agent}-stdout.txt` },
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
    const result = await unpackRunFiles(
      resultWith([]),
      { artifacts: many },
      { artifacts: agent, stdout: `${agent}-stdout.txt` },
    );
    expect(result.artifacts).toHaveLength(100);
    expect(result.artifactsNote).toBe('artifacts dropped: 50 over the limit of 100 artifacts');
    const noneFolder = join(folder(), 'remote-none');
    const none = await unpackRunFiles(
      resultWith([]),
      { artifacts: { name: 'x.txt', data: 'eA==' } },
      { artifacts: noneFolder, stdout: `${noneFolder}-stdout.txt` },
    );
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

  it('keeps a full output over the bound on neither side: the result says it was not sent home', async () => {
    const codecall = createCodecall({
      sandbox: 'none',
      stateDir: agentState,
      remote: { redis: redis?.url ?? '', queue: 'artifacts' },
    });
    try {
      const printed = MAX_SENT_ARTIFACT_BYTES + 1;
      const result = await codecall.execute(`import sys\nsys.stdout.write("x" * ${printed})`, {
        limits: { maxOutputBytes: 2 * MAX_SENT_ARTIFACT_BYTES },
      });
      const why = `was not sent home from worker ${worker?.id} (over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send)`;
      expect(result.status).toBe('success');
      expect(result.stdoutTruncated?.totalBytes).toBe(printed);
      expect(result.stdoutTruncated?.fullOutputPath).toBeUndefined();
      expect(result.stdoutTruncated?.fullOutputNote).toBe(`the full output ${why}`);
      expect(result.stdout).toContain(`; the complete output ${why} …]`);
      expect(result.stdout).not.toContain(workerState);
      const left = execFileSync('find', [workerState, agentState, '-name', '*-stdout.txt'], { encoding: 'utf8' });
      expect(left).toBe('');
    } finally {
      await codecall.close();
    }
  });

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
        `1 artifact(s) not sent home from worker ${worker?.id}: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send`,
      );
      const left = execFileSync('find', [workerState, '-type', 'f', '-path', '*/outputs/*'], { encoding: 'utf8' });
      expect(left).toBe('');
    } finally {
      await codecall.close();
    }
  });
});
