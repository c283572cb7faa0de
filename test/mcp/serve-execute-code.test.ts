import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecuteResult } from '../../src/core/result.js';
import { serveHttp } from '../../src/mcp-server/streamable-http-server.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { CLI_PATH, filesystemServer, TINY_PNG_BASE64 } from './mcp-test-servers.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-mcp-serve-'));
const filesRoot = join(directory, 'files');
const stateDir = join(directory, 'state');
const configFile = join(directory, 'codecall.json');
const newCodecall = useCodecalls();

const READ_FILES_SCRIPT = [
  'from tools.fs import list_directory, read_text_file',
  `root = ${JSON.stringify(filesRoot)}`,
  'for line in sorted(list_directory(path=root)["content"].splitlines()):',
  '    name = line.split(" ", 1)[1]',
  '    print(name, read_text_file(path=root + "/" + name)["content"].strip())',
].join('\n');

const FAILING_SCRIPT = 'from tools.fs import read_text_file\nprint(read_text_file(path="/etc/shadow"))';

const IMAGE_SCRIPT = [
  'import base64, os',
  'path = os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "dot.png")',
  `open(path, "wb").write(base64.b64decode(${JSON.stringify(TINY_PNG_BASE64)}))`,
  'from tools import save_artifact',
  'save_artifact("table.csv", "a,b\\n1,2\\n")',
  // Named as an image, but its bytes are not one: listed by name, never sent as image content.
  'save_artifact("fake.png", "not an image")',
  'print("saved")',
].join('\n');

beforeAll(() => {
  mkdirSync(filesRoot);
  writeFileSync(join(filesRoot, 'a.txt'), 'alpha\n');
  writeFileSync(join(filesRoot, 'b.txt'), 'beta\n');
  writeFileSync(
    configFile,
    JSON.stringify({ sandbox: 'none', stateDir, builtinTools: [], mcpServers: { fs: filesystemServer(filesRoot) } }),
  );
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

/** A transport to a codecall HTTP server that sends its bearer token. */
function httpTransport(url: string, token: string): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

/** Status of an initialize POST with extra headers, sent with node:http (fetch does not let Host be set). */
function postStatus(url: string, headers: Record<string, string>): Promise<number | undefined> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
  });
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      url,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      },
      (response) => {
        response.resume();
        resolve(response.statusCode);
      },
    );
    request.once('error', reject);
    request.end(body);
  });
}

async function callExecuteCode(client: Client, code: string, reset?: boolean): Promise<CallToolResult> {
  const args = reset === undefined ? { code } : { code, reset };
  return (await client.callTool({ name: 'execute_code', arguments: args })) as CallToolResult;
}

function textOf(result: CallToolResult): string {
  return (result.content[0] as { text: string }).text;
}

/** What every transport must do: list execute_code, run scripts through upstream servers, report failures. */
async function checkExecuteCodeOver(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  expect(tools.map((tool) => tool.name)).toEqual(['execute_code']);
  const [tool] = tools;
  expect(tool?.inputSchema).toMatchObject({
    type: 'object',
    properties: { code: { type: 'string' }, reset: { type: 'boolean' } },
    required: ['code'],
  });
  expect(tool?.description).toContain('persist between calls');
  expect(tool?.description).toContain('tools.fs');
  expect(tool?.description).toContain('read_text_file');

  const success = await callExecuteCode(client, READ_FILES_SCRIPT);
  expect(success.isError).toBe(false);
  expect(success.content).toEqual([{ type: 'text', text: 'a.txt alpha\nb.txt beta\n' }]);
  const structured = success.structuredContent as unknown as ExecuteResult;
  expect(structured).toMatchObject({ status: 'success', stdout: 'a.txt alpha\nb.txt beta\n', toolCalls: 3 });

  const failure = await callExecuteCode(client, FAILING_SCRIPT);
  expect(failure.isError).toBe(true);
  const failureText = (failure.content[0] as { text: string }).text;
  expect(failureText).toContain('[status: error]');
  expect(failureText).toContain('ToolError');
  expect(failureText).toContain('Access denied');
  expect(failure.structuredContent).toMatchObject({ status: 'error', error: { type: 'ToolError' } });

  const image = await callExecuteCode(client, IMAGE_SCRIPT);
  expect(image.isError).toBe(false);
  // Images as image content, small text files as embedded resources: never a host path.
  expect(image.content).toEqual([
    {
      type: 'text',
      text:
        'saved\n[artifact] table.csv (text/csv, 8 bytes)\n[artifact] fake.png (image/png, 12 bytes)\n' +
        '[artifact] dot.png (image/png, 69 bytes)\n',
    },
    { type: 'image', data: TINY_PNG_BASE64, mimeType: 'image/png' },
    { type: 'resource', resource: { uri: 'codecall-artifact:table.csv', mimeType: 'text/csv', text: 'a,b\n1,2\n' } },
  ]);

  // Each connection has its own session: state persists between calls until reset.
  expect(textOf(await callExecuteCode(client, 'counter = 41'))).toBe(
    '(the script printed nothing; print the values you need)\n',
  );
  expect(textOf(await callExecuteCode(client, 'counter += 1\nprint(counter)'))).toBe('42\n');
  expect(textOf(await callExecuteCode(client, 'print("counter" in globals())', true))).toBe('False\n');
  const badReset = await client.callTool({ name: 'execute_code', arguments: { code: 'print(1)', reset: 'yes' } });
  expect(badReset.isError).toBe(true);
}

describe('codecall serve over stdio (the CLI, driven by the official SDK client)', () => {
  it('runs scripts that read files through the filesystem server; a failing one comes back with isError', async () => {
    expect(existsSync(CLI_PATH), 'dist/cli/main.js is missing: run `npm run build` (npm test does)').toBe(true);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI_PATH, 'serve', '--config', configFile],
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += String(chunk);
    });
    const client = new Client({ name: 'codecall-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect(client.getServerVersion()?.name).toBe('codecall');
      await checkExecuteCodeOver(client);
    } catch (error) {
      throw new Error(`${String(error)}\n--- server stderr ---\n${stderr}`, { cause: error });
    } finally {
      await client.close();
    }
  });
});

describe('codecall serve over Streamable HTTP', () => {
  it('serves execute_code in process with serveHttp', async () => {
    const codecall = newCodecall({ builtinTools: [], mcpServers: { fs: filesystemServer(filesRoot) } });
    const server = await serveHttp(codecall, { port: 0 });
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/mcp`);
    const client = new Client({ name: 'codecall-test', version: '1.0.0' });
    try {
      await client.connect(httpTransport(server.url, server.token));
      await checkExecuteCodeOver(client);
      await callExecuteCode(client, 'mine = "first client"');
      const other = new Client({ name: 'codecall-test-2', version: '1.0.0' });
      await other.connect(httpTransport(server.url, server.token));
      try {
        expect(textOf(await callExecuteCode(other, 'print("mine" in globals())'))).toBe('False\n');
      } finally {
        await other.close();
      }
      expect(textOf(await callExecuteCode(client, 'print(mine)'))).toBe('first client\n');
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('serves the CLI with --http and its printed token, and refuses a request whose Host is not loopback', async () => {
    const child: ChildProcess = spawn(process.execPath, [CLI_PATH, 'serve', '--http', '0', '--config', configFile], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      const { url, token } = await new Promise<{ url: string; token: string }>((resolve, reject) => {
        let stderr = '';
        child.stderr?.on('data', (chunk: Buffer) => {
          stderr += String(chunk);
          const url = /(http:\/\/\S+\/mcp)/.exec(stderr)?.[1];
          const token = /bearer token generated for this start: (\S+)\n/.exec(stderr)?.[1];
          if (url !== undefined && token !== undefined) resolve({ url, token });
        });
        child.once('exit', (code) => reject(new Error(`codecall serve exited with ${code}: ${stderr}`)));
      });
      expect(await postStatus(url, {})).toBe(401);
      const client = new Client({ name: 'codecall-test', version: '1.0.0' });
      await client.connect(httpTransport(url, token));
      try {
        const result = await callExecuteCode(client, READ_FILES_SCRIPT);
        expect(result.content).toEqual([{ type: 'text', text: 'a.txt alpha\nb.txt beta\n' }]);
      } finally {
        await client.close();
      }
      // What a browser sends after a DNS rebinding: the attacker's name in Host.
      const authorization = `Bearer ${token}`;
      expect(await postStatus(url, { Authorization: authorization, Host: 'attacker.example' })).toBe(403);
      expect(await postStatus(url, { Authorization: authorization, Origin: 'https://attacker.example' })).toBe(403);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
