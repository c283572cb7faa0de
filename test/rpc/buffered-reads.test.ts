import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectSocket, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDirectChannel } from '../../src/rpc/channel-end.js';
import { ChannelErrorCode, RAW_TEXT_FIELD } from '../../src/rpc/protocol.js';
import { MAX_LENT_REPLY_BUFFERS, ToolCallServer } from '../../src/rpc/tool-call-server.js';
import { bufferedReadOf, defineBufferedRead, LENT_BUFFER_BYTES } from '../../src/tools/buffered-read.js';
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
  readonly error?: { readonly code: number; readonly message: string };
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

/** How {@link connect} sets up its server. */
interface ConnectOptions {
  readonly toolCallTimeoutMs?: number;
  /** Called with each buffer the server lends to a read of read_file, as the read starts. */
  readonly onBufferedRead?: (buffer: Buffer) => void;
}

/**
 * A tool-call server with the file tools on the host end of a real Unix socket (as a stream, or as the direct channel
 * a run's interpreter gets), and the script's end.
 */
async function connect(
  direct: boolean,
  onCallEnd: () => void,
  options: ConnectOptions = {},
): Promise<{ host: Duplex; script: Socket; toolServer: ToolCallServer }> {
  const fileTools = createFileTools({ workspace });
  const onBufferedRead = options.onBufferedRead;
  const readFile = fileTools.find((tool) => tool.name === 'read_file');
  const read = readFile === undefined ? undefined : bufferedReadOf(readFile);
  if (onBufferedRead !== undefined && readFile !== undefined && read !== undefined) {
    // Watches the real read (it still does the reading) before the tool is registered, which takes its read along.
    defineBufferedRead(readFile, (args, context, buffer) => {
      onBufferedRead(buffer);
      return read(args, context, buffer);
    });
  }
  const registry = createToolRegistry(fileTools.map((tool) => registerTool(tool)));
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
    toolCallTimeoutMs: options.toolCallTimeoutMs ?? 30_000,
    maxFrameBytes: 16 * 1024 * 1024,
    maxConcurrentToolCalls: 64,
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

/** Counts the calls that end: `reached` resolves once `count` of them have. */
function countCallEnds(count: number): {
  readonly onCallEnd: () => void;
  readonly reached: Promise<void>;
  ended(): number;
} {
  let ended = 0;
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  return {
    onCallEnd: () => {
      ended += 1;
      if (ended === count) reach();
    },
    reached,
    ended: () => ended,
  };
}

/**
 * Checks the replies to `calls` reads cut while they waited for a buffer (`code`) and to one read sent after them
 * (id `calls + 1`): every call answered once, some cut, the rest read in full, the last one among those read.
 */
function expectCutThenRead(received: Reply[], calls: number, code: number): Reply[] {
  expect(new Set(received.map((reply) => reply.id)).size).toBe(calls + 1);
  const cut = received.filter((reply) => reply.error?.code === code);
  expect(cut.length).toBeGreaterThan(0);
  const read = received.filter((reply) => reply.error === undefined);
  expect(read.length + cut.length).toBe(calls + 1);
  for (const reply of read) expectContent(reply);
  expect(read.map((reply) => reply.id)).toContain(calls + 1);
  return cut;
}

describe.each([
  ['a stream socket', false],
  ['a direct channel (write(2) first, a partial write queues the rest)', true],
])("read_file's buffers lent by the tool-call server on %s", (_name, direct) => {
  it('are not lent again while the replies holding their bytes still wait to be written', async () => {
    expect(FILE_BYTES + 1).toBeLessThanOrEqual(LENT_BUFFER_BYTES);
    const lentSet = countCallEnds(MAX_LENT_REPLY_BUFFERS);
    const { host, script } = await connect(direct, lentSet.onCallEnd);
    // The script reads nothing until every buffer the server lends has been read into: most replies wait in the
    // host's socket, holding the buffers they were read into. There are more calls than buffers: the calls past them
    // wait for a buffer the socket gives back, which must not be one whose reply still waits.
    script.pause();
    sendReads(script, FILES * 2);
    await lentSet.reached;
    expect(host.writableLength).toBeGreaterThan(FILE_BYTES * 4);
    const replies = readReplies(script, FILES * 2);
    script.resume();
    const received = await replies;
    expect(received.map((reply) => reply.id)).toEqual(Array.from({ length: FILES * 2 }, (_, index) => index + 1));
    for (const reply of received) expectContent(reply);
  });

  it('read a burst of more files than they are into those buffers alone, every reply in full', async () => {
    const calls = 40;
    const lent = new Set<Buffer>();
    let buffered = 0;
    const { script } = await connect(direct, () => {}, {
      onBufferedRead: (buffer) => {
        buffered += 1;
        lent.add(buffer);
      },
    });
    const replies = readReplies(script, calls);
    sendReads(script, calls);
    const received = await replies;
    expect(new Set(received.map((reply) => reply.id)).size).toBe(calls);
    for (const reply of received) expectContent(reply);
    // Every read went through a lent buffer (none into fresh memory), and the burst reused a bounded set of them.
    expect(buffered).toBe(calls);
    expect(lent.size).toBeLessThanOrEqual(MAX_LENT_REPLY_BUFFERS);
  });

  it('leave the reads waiting for one to the timeout of their calls, which then never read', async () => {
    const calls = 40;
    const everyCall = countCallEnds(calls);
    let buffered = 0;
    const { script } = await connect(direct, everyCall.onCallEnd, {
      toolCallTimeoutMs: 300,
      onBufferedRead: () => (buffered += 1),
    });
    // The script reads nothing until every call has ended: the reads without a buffer can only time out.
    script.pause();
    sendReads(script, calls);
    await everyCall.reached;
    const readsBefore = buffered;
    const replies = readReplies(script, calls + 1);
    script.resume();
    // A last read after the script took every reply: the timed-out calls' waits must not take the buffers before it.
    sendReads(script, 1, calls + 1);
    expectCutThenRead(await replies, calls, ChannelErrorCode.toolCallTimeout);
    // The last read alone started since: no call that ended while waiting got a buffer.
    expect(buffered - readsBefore).toBe(1);
  });

  it('leave the reads waiting for one to be answered when the cell ends, once, and never read', async () => {
    const calls = 40;
    const lentSet = countCallEnds(MAX_LENT_REPLY_BUFFERS);
    let buffered = 0;
    const { script, toolServer } = await connect(direct, lentSet.onCallEnd, {
      onBufferedRead: () => (buffered += 1),
    });
    script.pause();
    sendReads(script, calls);
    await lentSet.reached;
    toolServer.refuseCalls('the cell ended');
    expect(lentSet.ended()).toBe(calls);
    const readsBefore = buffered;
    toolServer.startBudget({ maxToolCalls: 1_000, toolCallTimeoutMs: 30_000, maxConcurrentToolCalls: 64 });
    const replies = readReplies(script, calls + 1);
    script.resume();
    sendReads(script, 1, calls + 1);
    const cut = expectCutThenRead(await replies, calls, ChannelErrorCode.runEnded);
    for (const reply of cut) expect(reply.error?.message).toBe('read_file: the cell ended');
    // The last read alone started since: no call that ended while waiting got a buffer.
    expect(buffered - readsBefore).toBe(1);
  });
});

describe('the idle read buffers', () => {
  it('are kept for the next server of the process', async () => {
    const buffers: Buffer[] = [];
    for (let run = 0; run < 2; run += 1) {
      const { script, toolServer } = await connect(true, () => {}, {
        onBufferedRead: (buffer) => buffers.push(buffer),
      });
      const replies = readReplies(script, 1);
      sendReads(script, 1);
      for (const reply of await replies) expectContent(reply);
      toolServer.end();
      script.destroy();
      const listening = server;
      server = undefined;
      await new Promise<void>((resolve) => listening?.close(() => resolve()));
    }
    expect(buffers).toHaveLength(2);
    // Compared as objects, without printing 256 KiB on failure.
    expect(buffers[1] === buffers[0], 'the second run reads into the buffer the first gave back').toBe(true);
  });
});

/** Sends `count` calls of read_file from the script, ids from `firstId` on, each file in turn. */
function sendReads(script: Socket, count: number, firstId = 1): void {
  for (let index = 0; index < count; index += 1) {
    const id = firstId + index;
    script.write(`${JSON.stringify({ id, method: 'read_file', params: { path: `f${(id - 1) % FILES}.txt` } })}\n`);
  }
}

/** Checks a reply of {@link sendReads} came back whole: the text of its file. */
function expectContent(reply: Reply): void {
  expect(reply.error).toBeUndefined();
  const index = (reply.id - 1) % FILES;
  // Compared without printing 200 KB on failure.
  expect(reply.result?.content === expected[index], `content of reply ${reply.id}`).toBe(true);
  expect(reply.result?.path).toBe(`f${index}.txt`);
}
