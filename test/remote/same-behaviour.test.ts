import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readArtifactsForModel } from '../../src/adapters/artifact-images.js';
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

/** A 1×1 PNG. */
const PNG_BASE64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

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
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-same-'));

  beforeAll(async () => {
    if ('missing' in redisServer) return;
    const options = {
      stateDir,
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
    rmSync(stateDir, { recursive: true, force: true });
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
    expect(result).toMatchObject({ toolCalls: 2, deniedToolCalls: 1 });
    expect(result.trace?.calls.map((call) => call.status)).toEqual(['ok', 'denied']);
  });

  it('returns artifacts as files of this host: same names, types and sizes, read as images by the adapters', async () => {
    const result = await codecall.execute(
      [
        'import base64, os',
        'from codecall_runtime import save_artifact',
        `save_artifact("chart.png", base64.b64decode("${PNG_BASE64}"))`,
        'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
        'open(os.path.join(artifacts, "notes.txt"), "w").write("hello")',
        'os.symlink("/etc/passwd", os.path.join(artifacts, "passwd.txt"))',
        'os.mkfifo(os.path.join(artifacts, "pipe.png"))',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const png = Buffer.from(PNG_BASE64, 'base64');
    expect(result.artifacts?.map(({ path, ...rest }) => ({ name: basename(path), ...rest }))).toEqual([
      { name: 'chart.png', mimeType: 'image/png', bytes: png.length },
      { name: 'notes.txt', mimeType: 'text/plain', bytes: 5 },
    ]);
    expect(result.artifactsNote).toBeUndefined();
    for (const artifact of result.artifacts ?? []) {
      expect(artifact.path.startsWith(join(stateDir, 'outputs'))).toBe(true);
    }
    expect(readFileSync(result.artifacts?.[1]?.path ?? '', 'utf8')).toBe('hello');
    const forModel = await readArtifactsForModel(result.artifacts ?? []);
    expect(forModel.images).toEqual([
      { name: 'chart.png', mediaType: 'image/png', base64: PNG_BASE64, bytes: png.length },
    ]);
  });

  it('saves the full output of a truncated stdout on this host, as printed, and names it in the notice', async () => {
    const result = await codecall.execute(
      'import sys\nfor i in range(2000):\n    sys.stdout.write(f"line {i:04d}\\n")',
      {
        limits: { maxStdoutBytes: 1000 },
      },
    );
    const printed = Array.from({ length: 2000 }, (_, index) => `line ${String(index).padStart(4, '0')}\n`).join('');
    expect(result.status).toBe('success');
    expect(result.stdoutTruncated).toMatchObject({ totalBytes: printed.length });
    const path = result.stdoutTruncated?.fullOutputPath ?? '';
    expect(path.startsWith(join(stateDir, 'outputs'))).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe(printed);
    expect(result.stdout).toContain(`; the complete output is in ${path} …]`);
    expect(result.stdoutTruncated?.fullOutputNote).toBeUndefined();
  });

  it('saves the full output of a truncated cell on this host too', async () => {
    const session = codecall.session();
    try {
      const cell = await session.execute('print("y" * 5000)', { limits: { maxStdoutBytes: 1000 } });
      const path = cell.stdoutTruncated?.fullOutputPath ?? '';
      expect(path.startsWith(join(stateDir, 'outputs'))).toBe(true);
      expect(readFileSync(path, 'utf8')).toBe(`${'y'.repeat(5000)}\n`);
      expect(cell.stdout).toContain(`; the complete output is in ${path} …]`);
    } finally {
      await session.close();
    }
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
