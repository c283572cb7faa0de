import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectSocket, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDirectChannel } from '../../src/rpc/channel-end.js';
import { RAW_TEXT_FIELD } from '../../src/rpc/protocol.js';
import { ToolCallServer } from '../../src/rpc/tool-call-server.js';
import { LENT_BUFFER_BYTES } from '../../src/tools/buffered-read.js';
import { createFileTools } from '../../src/tools/builtin-files.js';
import { createToolRegistry, registerTool } from '../../src/tools/registry.js';

// The built-in read_file reads into buffers its tool-call server lends it (on a real socket only) and takes back once
// the socket has taken the reply. These tests run the server on a real Unix socket and read its replies as raw bytes.

/** Files of the tests: each of a size that fits a lent buffer, each with its own text. */
const FILES = 12;
const FILE_BYTES = 200 * 1024;

let base: string;
let workspace: string;
let server: Server | undefined;
let socketPath: string;
const expected: string[] = [];

function textOf(index: number): string {
  const line = `file ${index}: ${'é中😀'.repeat(index + 1)} ${String(index).repeat(20)}\n`;
  let text = line.repeat(Math.floor(FILE_BYTES / Buffer.byteLength(line)));
  text += 'z'.repeat(FILE_BYTES - Buffer.byteLength(text));
  return text;
}

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'codecall-buffered-'));
  workspace = join(base, 'workspace');
  mkdirSync(workspace);
  for (let index = 0; index < FILES; index += 1) {
    const text = textOf(index);
    expected.push(text);
    writeFileSync(join(workspace, `f${index}.txt`), text);
  }
  socketPath = join(base, 'channel.sock');
});

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

const toolServers: ToolCallServer[] = [];

afterEach(async () => {
  for (const toolServer of toolServers.splice(0)) toolServer.end();
  const listening = server;
  server = undefined;
  await new Promise<void>((resolve) => (listening === undefined ? resolve() : listening.close(() => resolve())));
});

/** A reply as the script reads it, with its raw text put in place. */
interface Reply {
  readonly id: number;
  readonly result?: Record<string, unknown>;
  readonly error?: { readonly message: string };
}

/** Parses every complete reply in `bytes`; returns them and the bytes left over. */
function parseReplies(bytes: Buffer): { replies: Reply[]; rest: Buffer } {
  const replies: Reply[] = [];
  let rest = bytes;
  for (;;) {
    const newline = rest.indexOf(10);
    if (newline === -1) break;
    const frame = JSON.parse(rest.toString('utf8', 0, newline)) as Reply & {
      [RAW_TEXT_FIELD]?: [string | null, number][];
    };
    const segments = frame[RAW_TEXT_FIELD] ?? [];
    const rawBytes = segments.reduce((sum, [, size]) => sum + size, 0);
    if (rest.length < newline + 1 + rawBytes) break;
    let position = newline + 1;
    for (const [key, size] of segments) {
      (frame.result as Record<string, unknown>)[key as string] = rest.toString('utf8', position, position + size);
      position += size;
    }
    replies.push(frame);
    rest = rest.subarray(position);
  }
  return { replies, rest };
}

/**
 * A tool-call server with the file tools on the host end of a real Unix socket (as a stream, or as the direct channel
 * a run's interpreter gets), and the script's end.
 */
async function connect(
  direct: boolean,
  onCallEnd: () => void,
): Promise<{ host: Duplex; script: Socket; toolServer: ToolCallServer }> {
  const registry = createToolRegistry(createFileTools({ workspace }).map((tool) => registerTool(tool)));
  const listening = createServer();
  server = listening;
  const accepted = new Promise<Socket>((resolve) => listening.once('connection', resolve));
  await new Promise<void>((resolve) => listening.listen(socketPath, resolve));
  const script = connectSocket(socketPath);
  const socket = await accepted;
  const host = direct ? openDirectChannel(socket) : socket;
  if (direct) expect(host, 'the socket was opened as a direct channel').not.toBe(socket);
  const toolServer = new ToolCallServer({
    socket: host,
    tools: registry,
    runId: 'run-1',
    artifactsDir: join(base, 'artifacts'),
    maxToolCalls: 1_000,
    toolCallTimeoutMs: 30_000,
    maxFrameBytes: 16 * 1024 * 1024,
    maxConcurrentToolCalls: 16,
    onCallEnd,
  });
  toolServers.push(toolServer);
  return { host, script, toolServer };
}

/** Reads replies from `script` until `count` have come. */
function readReplies(script: Socket, count: number): Promise<Reply[]> {
  return new Promise((resolve, reject) => {
    const replies: Reply[] = [];
    let pending: Buffer = Buffer.alloc(0);
    script.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const parsed = parseReplies(pending);
      replies.push(...parsed.replies);
      pending = parsed.rest;
      if (replies.length >= count) resolve(replies);
    });
    script.once('error', reject);
    script.once('close', () => reject(new Error(`the channel closed after ${replies.length} replies`)));
  });
}

describe.each([
  ['a stream socket', false],
  ['a direct channel (write(2) first, a partial write queues the rest)', true],
])("read_file's buffers lent by the tool-call server on %s", (_name, direct) => {
  it('are not lent again while the replies holding their bytes still wait to be written', async () => {
    expect(FILE_BYTES + 1).toBeLessThanOrEqual(LENT_BUFFER_BYTES);
    let ended = 0;
    let allEnded: () => void = () => {};
    const everyCallEnded = new Promise<void>((resolve) => {
      allEnded = resolve;
    });
    const { host, script } = await connect(direct, () => {
      ended += 1;
      if (ended === FILES * 2) allEnded();
    });
    // The script reads nothing until every call has been answered: most replies wait in the host's socket, holding
    // the buffers they were read into. There are more calls than the 16 buffers a server lends at once: the calls
    // past that read into fresh memory.
    script.pause();
    for (let index = 0; index < FILES * 2; index += 1) {
      script.write(
        `${JSON.stringify({ id: index + 1, method: 'read_file', params: { path: `f${index % FILES}.txt` } })}\n`,
      );
    }
    await everyCallEnded;
    expect(host.writableLength).toBeGreaterThan(FILE_BYTES * 4);
    const replies = readReplies(script, FILES * 2);
    script.resume();
    const received = await replies;
    expect(received.map((reply) => reply.id)).toEqual(Array.from({ length: FILES * 2 }, (_, index) => index + 1));
    for (const reply of received) {
      expect(reply.error).toBeUndefined();
      const index = (reply.id - 1) % FILES;
      // Compared without printing 200 KB on failure.
      expect(reply.result?.content === expected[index], `content of reply ${reply.id}`).toBe(true);
      expect(reply.result?.path).toBe(`f${index}.txt`);
    }
  });
});
