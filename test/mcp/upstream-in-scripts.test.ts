import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Codecall, CodecallOptions } from '../../src/engine/codecall.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import {
  FIXTURE_SERVER_PATH,
  filesystemServer,
  memoryServer,
  onlyChildProcess,
  processExists,
  TINY_PNG_BASE64,
  waitForFifoReader,
  waitUntil,
} from './mcp-test-servers.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-mcp-scripts-'));
const filesRoot = join(directory, 'files');
mkdirSync(filesRoot);
writeFileSync(join(filesRoot, 'a.txt'), 'alpha\n');
writeFileSync(join(filesRoot, 'b.txt'), 'beta\n');
writeFileSync(join(filesRoot, 'dot.png'), Buffer.from(TINY_PNG_BASE64, 'base64'));
const createTestCodecall = useCodecalls();
let openCodecalls: Codecall[] = [];

// Each test's codecall (and so its servers) ends with the test, so a test finds its own server among our children.
function newCodecall(options: CodecallOptions): Codecall {
  const codecall = createTestCodecall(options);
  openCodecalls.push(codecall);
  return codecall;
}

afterEach(async () => {
  await Promise.all(openCodecalls.map((codecall) => codecall.close()));
  openCodecalls = [];
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

describe('upstream MCP servers in scripts', () => {
  it('creates 50 entities in server-memory in a loop and prints only the count: 51 tool calls, one result', async () => {
    const codecall = newCodecall({ mcpServers: { memory: memoryServer(join(directory, 'memory-loop.jsonl')) } });
    const result = await codecall.execute(
      [
        'from tools.memory import create_entities, read_graph',
        'for i in range(50):',
        '    create_entities(entities=[{"name": f"entity-{i}", "entityType": "test", "observations": [f"number {i}"]}])',
        'print(len(read_graph()["entities"]))',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.status).toBe('success');
    expect(result.stdout).toBe('50\n');
    expect(result.toolCalls).toBe(51);
  });

  it('reads files through server-filesystem, and a hyphenated server name becomes a module name', async () => {
    const codecall = newCodecall({ mcpServers: { 'file-system': filesystemServer(filesRoot) } });
    const result = await codecall.execute(
      [
        'from tools.file_system import list_directory, read_text_file',
        `root = ${JSON.stringify(filesRoot)}`,
        'names = sorted(line.split(" ", 1)[1] for line in list_directory(path=root)["content"].splitlines())',
        'for name in names:',
        '    if name.endswith(".txt"):',
        '        print(name, read_text_file(path=root + "/" + name)["content"].strip())',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    expect(result.stdout).toBe('a.txt alpha\nb.txt beta\n');
  });

  it('turns an upstream isError into a ToolError the script can catch', async () => {
    const codecall = newCodecall({ mcpServers: { fs: filesystemServer(filesRoot) } });
    const result = await codecall.execute(
      [
        'from tools import ToolError',
        'from tools.fs import read_text_file',
        'try:',
        '    read_text_file(path="/etc/passwd")',
        'except ToolError as error:',
        '    print("refused:", "Access denied" in str(error))',
      ].join('\n'),
    );
    expect(result.stdout).toBe('refused: True\n');
  });

  it('returns upstream images as artifacts, the script getting their name and bytes, not a host path', async () => {
    const codecall = newCodecall({ mcpServers: { fs: filesystemServer(filesRoot) } });
    const result = await codecall.execute(
      [
        'from tools.fs import read_media_file',
        `image = read_media_file(path=${JSON.stringify(join(filesRoot, 'dot.png'))})["content"][0]`,
        'print(image["type"], image["mimeType"], image["name"].endswith(".png"), "path" in image)',
      ].join('\n'),
    );
    expect(result.stdout).toBe('image image/png True False\n');
    expect(result.artifacts?.map((artifact) => artifact.mimeType)).toEqual(['image/png']);
  });

  it('sanitises tool names like get-tiny-image and hands images over with their bytes', async () => {
    const codecall = newCodecall({
      mcpServers: { fixture: { command: process.execPath, args: [FIXTURE_SERVER_PATH] } },
    });
    const result = await codecall.execute(
      [
        'from tools.fixture import get_tiny_image, mixed',
        'image = get_tiny_image()',
        'import base64',
        'print(sorted(image), image["type"], image["mimeType"])',
        'print(base64.b64decode(image["data"])[:4] == b"\\x89PNG")',
        'print([part if isinstance(part, str) else part["type"] for part in mixed()])',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(
      "['bytes', 'data', 'mimeType', 'name', 'type'] image image/png\nTrue\n['caption', 'image', 'resource', 'resource_link']\n",
    );
    expect(result.artifacts?.map((artifact) => artifact.mimeType).sort()).toEqual([
      'image/png',
      'image/png',
      'text/markdown',
    ]);
  });

  it('writes no upstream media into a host folder the artifacts folder was swapped for a link to', async () => {
    const canary = join(directory, 'media-canary');
    mkdirSync(canary, { mode: 0o755 });
    writeFileSync(join(canary, 'keep.txt'), 'canary');
    const codecall = newCodecall({
      mcpServers: { fixture: { command: process.execPath, args: [FIXTURE_SERVER_PATH] } },
    });
    const result = await codecall.execute(
      [
        'import os, shutil',
        'from tools.fixture import get_tiny_image',
        'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
        'shutil.rmtree(artifacts)',
        `os.symlink(${JSON.stringify(canary)}, artifacts)`,
        'print(get_tiny_image()["type"])',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'image\n' });
    expect(readdirSync(canary)).toEqual(['keep.txt']);
    expect(result.artifacts?.map((artifact) => artifact.mimeType)).toEqual(['image/png']);
    expect(result.artifacts?.[0]?.path.startsWith(canary)).toBe(false);
  });

  it('reconnects a server killed between runs', async () => {
    const codecall = newCodecall({ mcpServers: { memory: memoryServer(join(directory, 'memory-kill.jsonl')) } });
    const script = [
      'from tools.memory import create_entities, read_graph',
      'create_entities(entities=[{"name": "x", "entityType": "t", "observations": []}])',
      'print(len(read_graph()["entities"]))',
    ].join('\n');
    expect((await codecall.execute(script)).stdout).toBe('1\n');
    const pid = onlyChildProcess(process.pid, 'server-memory');
    process.kill(pid, 'SIGKILL');
    await waitUntil(() => !processExists(pid), 'the killed server to be gone');
    const second = await codecall.execute(script);
    expect(second.status).toBe('success');
    // server-memory keeps its graph in its file, so the restarted server still knows the first entity.
    expect(second.stdout).toBe('1\n');
    expect(onlyChildProcess(process.pid, 'server-memory')).not.toBe(pid);
  });

  it('fails a call whose server is killed during it with a ToolError naming the server, and the run goes on', async () => {
    const codecall = newCodecall({ mcpServers: { fs: filesystemServer(filesRoot) } });
    const pipe = join(filesRoot, 'pipe');
    execFileSync('mkfifo', [pipe]);
    let writer: number | undefined;
    try {
      const run = codecall.execute(
        [
          'from tools import ToolError',
          'from tools.fs import read_text_file',
          'try:',
          `    read_text_file(path=${JSON.stringify(pipe)})`,
          'except ToolError as error:',
          '    print("ToolError:", error)',
          `print(read_text_file(path=${JSON.stringify(join(filesRoot, 'a.txt'))})["content"].strip())`,
        ].join('\n'),
      );
      writer = await waitForFifoReader(pipe);
      process.kill(onlyChildProcess(process.pid, 'server-filesystem'), 'SIGKILL');
      const result = await run;
      expect(result.status).toBe('success');
      expect(result.stdout).toMatch(/^ToolError: .*MCP server "fs" stopped during the call to read_text_file/);
      expect(result.stdout.endsWith('alpha\n')).toBe(true);
      expect(result.toolCalls).toBe(2);
    } finally {
      if (writer !== undefined) closeSync(writer);
      rmSync(pipe, { force: true });
    }
  });

  it('describes a server that failed to start, and the others still work', async () => {
    const codecall = newCodecall({
      mcpServers: {
        broken: { command: process.execPath, args: ['-e', 'process.exit(1)'] },
        memory: memoryServer(join(directory, 'memory-broken.jsonl')),
      },
    });
    const description = await codecall.describe();
    expect(description).toContain('broken');
    const result = await codecall.execute('from tools.memory import read_graph\nprint(read_graph())');
    expect(result.status).toBe('success');
  });
});
