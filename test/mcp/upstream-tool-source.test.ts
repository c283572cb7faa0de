import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { createMcpToolSource } from '../../src/mcp-client/upstream-tool-source.js';
import type { RegisteredTool, ToolSource } from '../../src/tools/registered-tool.js';
import {
  FIXTURE_SERVER_PATH,
  filesystemServer,
  memoryServer,
  onlyChildProcess,
  packageBin,
  processExists,
  TINY_PNG_BASE64,
  toolContext,
  waitForFifoReader,
  waitUntil,
} from './mcp-test-servers.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-mcp-source-'));
const filesRoot = join(directory, 'files');
const artifactsDir = join(directory, 'artifacts');
let sources: ToolSource[] = [];

function source(name: string, config: Parameters<typeof createMcpToolSource>[1]): ToolSource {
  const created = createMcpToolSource(name, config);
  sources.push(created);
  return created;
}

async function toolNamed(toolSource: ToolSource, wireName: string): Promise<RegisteredTool> {
  const listing = await toolSource.load();
  const tool = listing.tools.find((candidate) => candidate.descriptor.name === wireName);
  if (tool === undefined) throw new Error(`no tool ${wireName}`);
  return tool;
}

beforeAll(() => {
  mkdirSync(filesRoot, { recursive: true });
  writeFileSync(join(filesRoot, 'notes.txt'), 'first line\nsecond line\n');
  writeFileSync(join(filesRoot, 'dot.png'), Buffer.from(TINY_PNG_BASE64, 'base64'));
});

// Each test's servers end with it, so the test can find its own server among this process's children.
afterEach(async () => {
  const pipe = join(filesRoot, 'pipe');
  try {
    // Opening the FIFO for writing, then closing it, releases a server still blocked reading it.
    closeSync(openSync(pipe, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // No FIFO, or no reader left.
  }
  rmSync(pipe, { force: true });
  await Promise.all(sources.map((toolSource) => toolSource.close()));
  sources = [];
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

describe('an upstream stdio server (server-memory)', () => {
  it('is idle until loaded, then lists its tools under <server>/<tool> in module <server>', async () => {
    const memory = source('memory', memoryServer(join(directory, 'memory-1.jsonl')));
    expect(memory.status()).toEqual({ state: 'idle' });
    const listing = await memory.load();
    const names = listing.tools.map((tool) => tool.descriptor.name);
    expect(names).toContain('memory/create_entities');
    expect(names).toContain('memory/read_graph');
    expect(listing.tools.every((tool) => tool.module === 'memory')).toBe(true);
    const create = listing.tools.find((tool) => tool.descriptor.name === 'memory/create_entities');
    expect(create?.descriptor.inputSchema).toMatchObject({
      type: 'object',
      properties: { entities: { type: 'array' } },
    });
    expect(create?.descriptor.outputSchema).toMatchObject({ type: 'object' });
    expect(memory.status()).toEqual({ state: 'ready', toolCount: listing.tools.length });
    expect(await memory.load()).toBe(listing);
  });

  it('returns structuredContent, and checks arguments against the input schema', async () => {
    const memory = source('memory', memoryServer(join(directory, 'memory-2.jsonl')));
    const create = await toolNamed(memory, 'memory/create_entities');
    expect(await create.checkArguments({ entities: 'nope' })).toMatchObject({ ok: false });
    const args = { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] };
    expect(await create.checkArguments(args)).toEqual({ ok: true, value: args });
    const result = await create.invoke(args, toolContext(artifactsDir));
    expect(result).toEqual({ entities: args.entities });
  });

  it('reconnects on the next call when the server was killed between calls', async () => {
    const memory = source('memory', memoryServer(join(directory, 'memory-3.jsonl')));
    const read = await toolNamed(memory, 'memory/read_graph');
    expect(await read.invoke({}, toolContext(artifactsDir))).toEqual({ entities: [], relations: [] });
    const firstPid = onlyChildProcess(process.pid, 'server-memory');
    process.kill(firstPid, 'SIGKILL');
    await waitUntil(() => !processExists(firstPid), 'the killed server to be gone');
    expect(await read.invoke({}, toolContext(artifactsDir))).toEqual({ entities: [], relations: [] });
    const secondPid = onlyChildProcess(process.pid, 'server-memory');
    expect(secondPid).not.toBe(firstPid);
    expect(memory.status()).toMatchObject({ state: 'ready' });
  });
});

describe('an upstream stdio server (server-filesystem)', () => {
  it('parses text results and turns isError into a thrown error with the server text', async () => {
    const files = source('files', filesystemServer(filesRoot));
    const read = await toolNamed(files, 'files/read_text_file');
    expect(await read.invoke({ path: join(filesRoot, 'notes.txt') }, toolContext(artifactsDir))).toEqual({
      content: 'first line\nsecond line\n',
    });
    await expect(read.invoke({ path: '/etc/passwd' }, toolContext(artifactsDir))).rejects.toThrow(/Access denied/);
  });

  it('saves images embedded in structured content as artifacts and returns their names and bytes', async () => {
    const files = source('files', filesystemServer(filesRoot));
    const readMedia = await toolNamed(files, 'files/read_media_file');
    const result = (await readMedia.invoke({ path: join(filesRoot, 'dot.png') }, toolContext(artifactsDir))) as {
      content: { type: string; name: string; mimeType: string; data: string }[];
    };
    expect(result.content).toHaveLength(1);
    const image = result.content[0];
    expect(image).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(image?.name.endsWith('.png')).toBe(true);
    expect(readFileSync(join(artifactsDir, image?.name ?? ''))).toEqual(readFileSync(join(filesRoot, 'dot.png')));
    expect(Buffer.from(image?.data ?? '', 'base64')).toEqual(readFileSync(join(filesRoot, 'dot.png')));
  });

  it('fails a call whose server is killed during it with an error naming the server, then recovers', async () => {
    const files = source('files', filesystemServer(filesRoot));
    const read = await toolNamed(files, 'files/read_text_file');
    execFileSync('mkfifo', [join(filesRoot, 'pipe')]);
    // Reading a FIFO blocks until data comes, so the call is certainly in flight when the server dies.
    const pending = read.invoke({ path: join(filesRoot, 'pipe') }, toolContext(artifactsDir));
    const outcome = pending.then(
      () => undefined,
      (error: unknown) => error,
    );
    const writer = await waitForFifoReader(join(filesRoot, 'pipe'));
    process.kill(onlyChildProcess(process.pid, 'server-filesystem'), 'SIGKILL');
    const error = await outcome;
    expect(error).toBeInstanceOf(CodecallError);
    expect((error as CodecallError).code).toBe('MCP_SERVER_FAILED');
    expect((error as Error).message).toMatch(/MCP server "files" stopped during the call to read_text_file/);
    expect((error as CodecallError).details).toMatchObject({ server: 'files' });
    closeSync(writer);
    expect(await read.invoke({ path: join(filesRoot, 'notes.txt') }, toolContext(artifactsDir))).toEqual({
      content: 'first line\nsecond line\n',
    });
  });

  it('passes the call signal to the SDK, which cancels the request', async () => {
    const files = source('files', filesystemServer(filesRoot));
    const read = await toolNamed(files, 'files/read_text_file');
    execFileSync('mkfifo', [join(filesRoot, 'pipe')]);
    const controller = new AbortController();
    const pending = read.invoke({ path: join(filesRoot, 'pipe') }, toolContext(artifactsDir, controller.signal));
    controller.abort(new Error('tool call timed out'));
    await expect(pending).rejects.toThrow(/tool call timed out/);
    expect(files.status()).toMatchObject({ state: 'ready' });
  });
});

describe('a server that fails to start', () => {
  it('reports failed with the error and the end of its stderr, without touching other servers', async () => {
    const broken = source('broken', {
      command: process.execPath,
      args: ['-e', 'console.error("no config, giving up"); process.exit(3)'],
    });
    const missing = source('missing', { command: join(directory, 'no-such-command') });
    const memory = source('memory', memoryServer(join(directory, 'memory-4.jsonl')));
    const [brokenLoad, missingLoad, memoryLoad] = await Promise.allSettled([
      broken.load(),
      missing.load(),
      memory.load(),
    ]);
    expect(memoryLoad.status).toBe('fulfilled');
    expect(brokenLoad.status).toBe('rejected');
    expect(missingLoad.status).toBe('rejected');
    const brokenError = (brokenLoad as PromiseRejectedResult).reason as CodecallError;
    expect(brokenError.code).toBe('MCP_SERVER_FAILED');
    expect(brokenError.message).toMatch(/^MCP server "broken" failed to start/);
    expect(brokenError.message).toContain('no config, giving up');
    expect(broken.status()).toMatchObject({ state: 'failed', error: expect.stringContaining('no config, giving up') });
    expect(((missingLoad as PromiseRejectedResult).reason as Error).message).toMatch(
      /MCP server "missing" failed to start.*ENOENT/,
    );
    expect(memory.status()).toMatchObject({ state: 'ready' });
    // A second load right after reports the same failure instead of starting the process again.
    await expect(broken.load()).rejects.toBe(brokenError);
  });

  it('rejects an invalid configuration synchronously, naming the server and the key', () => {
    expect(() => createMcpToolSource('bad', { command: 'node', argz: [] } as never)).toThrow(
      /^unknown key "argz" in mcpServers\.bad \(a stdio server\); known keys: /,
    );
  });
});

describe('an upstream Streamable HTTP server', () => {
  let child: ChildProcess | undefined;
  let url = '';

  /** Starts the fixture server over HTTP (port 0 picks one) and resolves with its endpoint. */
  async function startFixture(port: number): Promise<string> {
    child = spawn(process.execPath, [FIXTURE_SERVER_PATH, '--http', String(port)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const started = child;
    return new Promise<string>((resolve, reject) => {
      started.stdout?.on('data', (chunk: Buffer) => {
        const bound = /listening (\d+)/.exec(String(chunk))?.[1];
        if (bound !== undefined) resolve(`http://127.0.0.1:${bound}/mcp`);
      });
      started.once('exit', (code) => reject(new Error(`fixture server exited with ${code}`)));
    });
  }

  async function stopFixture(): Promise<void> {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  }

  beforeAll(async () => {
    url = await startFixture(0);
  });

  afterAll(async () => {
    await stopFixture();
  });

  it('lists and calls tools with headers, converting every content type', async () => {
    const fixture = source('fixture', { url, headers: { 'X-Test': 'yes' } });
    const listing = await fixture.load();
    expect(listing.description).toBe('A fixture server for codecall tests.');
    expect(listing.tools.map((tool) => tool.descriptor.name)).toEqual(
      expect.arrayContaining([
        'fixture/echo',
        'fixture/get-tiny-image',
        'fixture/mixed',
        'fixture/add',
        'fixture/fail',
      ]),
    );
    const call = async (name: string, args: Record<string, unknown> = {}): Promise<unknown> =>
      (await toolNamed(fixture, `fixture/${name}`)).invoke(args, toolContext(artifactsDir));
    expect(await call('echo', { text: 'plain words' })).toBe('plain words');
    expect(await call('echo', { text: '{"a": [1, 2]}' })).toEqual({ a: [1, 2] });
    expect(await call('echo', { text: '42' })).toBe('42');
    expect(await call('add', { a: 2, b: 3 })).toEqual({ sum: 5 });
    await expect(call('fail')).rejects.toThrow('the fixture failed on purpose');
    expect(await call('get-tiny-image')).toMatchObject({ type: 'image', mimeType: 'image/png' });
    const mixed = (await call('mixed')) as Record<string, unknown>[];
    expect(mixed).toHaveLength(4);
    expect(mixed[0]).toBe('caption');
    expect(mixed[1]).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(mixed[2]).toMatchObject({ type: 'resource', uri: 'file:///notes/report.md', mimeType: 'text/markdown' });
    expect(readFileSync(join(artifactsDir, String(mixed[2]?.name)), 'utf8')).toBe('# Report');
    expect(String(mixed[2]?.name).endsWith('.md')).toBe(true);
    expect(mixed[3]).toEqual({
      type: 'resource_link',
      uri: 'file:///notes/other.md',
      name: 'other.md',
      mimeType: 'text/markdown',
    });
  });

  it('opens a new session when the server restarted and forgot the old one', async () => {
    const fixture = source('fixture', { url });
    const echo = await toolNamed(fixture, 'fixture/echo');
    expect(await echo.invoke({ text: 'before' }, toolContext(artifactsDir))).toBe('before');
    await stopFixture();
    url = await startFixture(Number(new URL(url).port));
    expect(await echo.invoke({ text: 'after' }, toolContext(artifactsDir))).toBe('after');
  });

  it('reports a server that is not there as failed', async () => {
    const nowhere = source('nowhere', { url: 'http://127.0.0.1:9/mcp' });
    await expect(nowhere.load()).rejects.toThrow(/MCP server "nowhere" failed to start/);
    expect(nowhere.status()).toMatchObject({ state: 'failed' });
  });
});

it('resolves the installed servers from node_modules', () => {
  expect(packageBin('@modelcontextprotocol/server-memory')).toMatch(/server-memory/);
});
