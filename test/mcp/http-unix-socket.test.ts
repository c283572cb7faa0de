import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { serveHttp } from '../../src/mcp-server/streamable-http-server.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { initializeBody, rawRequest, unixSocketFetch } from './http-requests.js';

const run = promisify(execFile);
const newCodecall = useCodecalls();
const TOKEN = 'socket-test-token-0123456789';
const NOBODY = 65_534;
const asRoot = process.getuid?.() === 0;
const base = mkdtempSync(join(tmpdir(), 'codecall-socket-'));
// Others may traverse it, so that only the socket's own mode keeps them out.
chmodSync(base, 0o755);

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

let folders = 0;
function newFolder(mode = 0o755): string {
  folders += 1;
  const folder = join(base, `f${folders}`);
  mkdirSync(folder);
  chmodSync(folder, mode);
  return folder;
}

/** A socket file nothing listens on, as a server killed before it could remove it leaves behind. */
async function deadSocket(path: string): Promise<void> {
  await run('/usr/bin/python3', ['-c', 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', path]);
}

/** Runs a small Node program as the `nobody` user; resolves with what it printed. */
async function runAsNobody(program: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', program, ...args], {
    uid: NOBODY,
    gid: NOBODY,
    cwd: '/',
  });
  return stdout.trim();
}

const codecall = () => newCodecall({ builtinTools: [] });

describe('serve --http on a Unix socket', () => {
  it('creates a socket only its owner can open, serves MCP through it, and removes it at close', async () => {
    const path = join(newFolder(), 'codecall.sock');
    const server = await serveHttp(codecall(), { socketPath: path, token: TOKEN });
    try {
      expect(server.socketPath).toBe(path);
      expect(server.port).toBeUndefined();
      const stats = lstatSync(path);
      expect(stats.isSocket()).toBe(true);
      expect(stats.mode & 0o777).toBe(0o600);
      expect(stats.uid).toBe(process.getuid?.());
      const client = new Client({ name: 'codecall-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url), {
          fetch: unixSocketFetch(path),
          requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
        }),
      );
      const result = (await client.callTool({
        name: 'execute_code',
        arguments: { code: 'print(7 * 6)' },
      })) as CallToolResult;
      expect(result.content[0]).toEqual({ type: 'text', text: '42\n' });
      await client.close();
      // The token is still required through the socket.
      const anonymous = await rawRequest({ url: server.url, socketPath: path }, { body: initializeBody() });
      expect(anonymous.status).toBe(401);
    } finally {
      await server.close();
    }
    expect(existsSync(path)).toBe(false);
  });

  it('creates the socket private even under a umask of 0, and restores the umask', async () => {
    const path = join(newFolder(), 'umask.sock');
    const previous = process.umask(0);
    try {
      const server = await serveHttp(codecall(), { socketPath: path });
      expect(lstatSync(path).mode & 0o777).toBe(0o600);
      expect(process.umask()).toBe(0);
      await server.close();
    } finally {
      process.umask(previous);
    }
  });

  it.skipIf(!asRoot)('keeps another local user out: no connection to the socket, 401 over TCP', async () => {
    const path = join(newFolder(), 'private.sock');
    const socketServer = await serveHttp(codecall(), { socketPath: path, token: TOKEN });
    const tcpServer = await serveHttp(codecall(), { port: 0, token: TOKEN });
    try {
      const connect = [
        "import { connect } from 'node:net';",
        'const socket = connect(process.argv[1]);',
        "socket.once('connect', () => { console.log('connected'); socket.destroy(); });",
        "socket.once('error', (error) => console.log(error.code));",
      ].join('\n');
      expect(await runAsNobody(connect, path)).toBe('EACCES');
      // What a local attacker would send without the token: initialize, then a call.
      const post = [
        'const response = await fetch(process.argv[1], {',
        "  method: 'POST',",
        "  headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },",
        'body: process.argv[2] });',
        'console.log(response.status);',
      ].join('\n');
      expect(await runAsNobody(post, tcpServer.url, initializeBody('intruder'))).toBe('401');
    } finally {
      await socketServer.close();
      await tcpServer.close();
    }
  });

  it('refuses a path that is a file, a folder or a link, leaving it as it was', async () => {
    const folder = newFolder();
    const file = join(folder, 'file');
    writeFileSync(file, 'precious\n');
    const link = join(folder, 'link');
    symlinkSync(file, link);
    const danglingLink = join(folder, 'dangling');
    symlinkSync(join(folder, 'nowhere.sock'), danglingLink);
    const directory = join(folder, 'directory');
    mkdirSync(directory);
    for (const path of [file, link, danglingLink, directory]) {
      await expect(serveHttp(codecall(), { socketPath: path })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining('exists and is not a socket'),
      });
    }
    expect(readFileSync(file, 'utf8')).toBe('precious\n');
    expect(readlinkSync(link)).toBe(file);
    expect(readlinkSync(danglingLink)).toBe(join(folder, 'nowhere.sock'));
    expect(existsSync(join(folder, 'nowhere.sock'))).toBe(false);
  });

  it('refuses a socket another server listens on, and replaces a dead one of ours', async () => {
    const folder = newFolder();
    const live = join(folder, 'live.sock');
    const other = createServer(() => {});
    await new Promise<void>((resolve) => other.listen(live, resolve));
    try {
      await expect(serveHttp(codecall(), { socketPath: live })).rejects.toMatchObject({
        message: expect.stringContaining('another server is listening on it'),
      });
      expect(lstatSync(live).isSocket()).toBe(true);
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
    const dead = join(folder, 'dead.sock');
    await deadSocket(dead);
    const server = await serveHttp(codecall(), { socketPath: dead, token: TOKEN });
    try {
      const answer = await rawRequest(
        { url: server.url, socketPath: dead },
        {
          headers: { Authorization: `Bearer ${TOKEN}` },
          body: initializeBody(),
        },
      );
      expect(answer.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('refuses folders another user could replace the socket in', async () => {
    const open = newFolder(0o777);
    await expect(serveHttp(codecall(), { socketPath: join(open, 's.sock') })).rejects.toMatchObject({
      message: expect.stringContaining('other users can write to the folder'),
    });
    const groupWritable = newFolder(0o775);
    await expect(serveHttp(codecall(), { socketPath: join(groupWritable, 's.sock') })).rejects.toMatchObject({
      message: expect.stringContaining('other users can write to the folder'),
    });
    // A folder inside a writable one: the parent could be renamed away.
    const nested = join(open, 'inner');
    mkdirSync(nested, { mode: 0o700 });
    await expect(serveHttp(codecall(), { socketPath: join(nested, 's.sock') })).rejects.toMatchObject({
      message: expect.stringContaining(`other users can write to the folder ${open}`),
    });
    // Sticky, like /tmp: others cannot remove or rename what is ours.
    const sticky = newFolder(0o1777);
    const server = await serveHttp(codecall(), { socketPath: join(sticky, 's.sock') });
    await server.close();
    expect(existsSync(join(open, 's.sock'))).toBe(false);
  });

  it.skipIf(!asRoot)('refuses a folder or a dead socket belonging to another user', async () => {
    const theirs = newFolder(0o755);
    chownSync(theirs, NOBODY, NOBODY);
    await expect(serveHttp(codecall(), { socketPath: join(theirs, 's.sock') })).rejects.toMatchObject({
      message: expect.stringContaining('belongs to another user (uid 65534)'),
    });
    const folder = newFolder();
    const theirSocket = join(folder, 'theirs.sock');
    await deadSocket(theirSocket);
    chownSync(theirSocket, NOBODY, NOBODY);
    await expect(serveHttp(codecall(), { socketPath: theirSocket })).rejects.toMatchObject({
      message: expect.stringContaining('a socket of another user (uid 65534)'),
    });
    expect(lstatSync(theirSocket).uid).toBe(NOBODY);
  });

  it('refuses a missing folder and a path too long for a socket', async () => {
    await expect(serveHttp(codecall(), { socketPath: join(base, 'missing', 's.sock') })).rejects.toMatchObject({
      message: expect.stringContaining('its folder cannot be used (ENOENT)'),
    });
    await expect(serveHttp(codecall(), { socketPath: join(newFolder(), 'x'.repeat(120)) })).rejects.toMatchObject({
      message: expect.stringContaining('longer than the 107 bytes'),
    });
    await expect(serveHttp(codecall(), { socketPath: join(newFolder(), 's.sock'), port: 0 })).rejects.toMatchObject({
      message: expect.stringContaining('either a port or a socketPath'),
    });
  });
});
