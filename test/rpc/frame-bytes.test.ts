import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { ChannelErrorCode } from '../../src/rpc/protocol.js';
import { ToolCallServer } from '../../src/rpc/tool-call-server.js';
import { createToolRegistry, registerTool } from '../../src/tools/registry.js';
import type { Tool } from '../../src/tools/types.js';

/**
 * The frame limit counts bytes on the wire, not characters of a JavaScript string: a frame of multi-byte UTF-8 text
 * must not slip past it either way. Tried on a real pair of connected Unix domain sockets, reading the raw bytes.
 */

const MAX_FRAME_BYTES = 1_024;
const folder = mkdtempSync(join(tmpdir(), 'codecall-frame-bytes-'));
const opened: { server: Server; sockets: Socket[]; channel?: ToolCallServer }[] = [];

afterEach(() => {
  for (const entry of opened.splice(0)) {
    entry.channel?.end();
    for (const socket of entry.sockets) socket.destroy();
    entry.server.close();
  }
});
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** Two connected Unix domain sockets: the host's end and the script's. */
async function socketPair(): Promise<{ host: Socket; script: Socket; entry: (typeof opened)[number] }> {
  const path = join(folder, `pair-${opened.length}-${process.hrtime.bigint()}.sock`);
  const server = createServer();
  const entry: (typeof opened)[number] = { server, sockets: [] };
  opened.push(entry);
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(path, resolve));
  const script = createConnection(path);
  const host = await accepted;
  entry.sockets.push(host, script);
  return { host, script, entry };
}

/** The reply frames the script reads, each as its raw bytes. */
function frames(script: Socket): { next(): Promise<Buffer> } {
  const complete: Buffer[] = [];
  let partial = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  script.on('data', (chunk: Buffer) => {
    partial = Buffer.concat([partial, chunk]);
    for (let newline = partial.indexOf(10); newline !== -1; newline = partial.indexOf(10)) {
      complete.push(partial.subarray(0, newline + 1));
      partial = partial.subarray(newline + 1);
    }
    wake?.();
  });
  return {
    async next() {
      while (complete.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      return complete.shift() as Buffer;
    },
  };
}

async function startChannel(tools: readonly Tool[]) {
  const { host, script, entry } = await socketPair();
  entry.channel = new ToolCallServer({
    socket: host,
    tools: createToolRegistry(tools.map((tool) => registerTool(tool))),
    runId: 'run-bytes',
    artifactsDir: join(folder, 'artifacts'),
    maxToolCalls: 100,
    toolCallTimeoutMs: 10_000,
    maxFrameBytes: MAX_FRAME_BYTES,
    maxConcurrentToolCalls: 4,
  });
  return { script, replies: frames(script) };
}

const euros = (count: number) => '€'.repeat(count);
const textTool = (name: string, value: string): Tool => ({
  name,
  description: `Returns ${name}.`,
  inputSchema: { type: 'object' },
  execute: () => value,
});

describe('the frame limit in bytes, on a real socket pair', () => {
  it('refuses a result whose characters fit but whose UTF-8 bytes do not, and every frame sent stays within it', async () => {
    // 400 euro signs: a JSON string of 402 characters, 1,202 bytes.
    const { script, replies } = await startChannel([textTool('wide', euros(400)), textTool('fits', euros(300))]);
    script.write(`${JSON.stringify({ id: 1, method: 'wide', params: {} })}\n`);
    const refused = await replies.next();
    expect(refused.length).toBeLessThanOrEqual(MAX_FRAME_BYTES);
    const reply = JSON.parse(refused.toString('utf8'));
    expect(reply).toMatchObject({ id: 1, error: { code: ChannelErrorCode.frameTooLarge } });
    expect(reply.error.message).toMatch(/^wide: the result is 1202 bytes, over the channel limit of 1024 bytes/);

    // 300 of them (902 bytes) fit with the reply around them.
    script.write(`${JSON.stringify({ id: 2, method: 'fits', params: {} })}\n`);
    const sent = await replies.next();
    expect(sent.length).toBeLessThanOrEqual(MAX_FRAME_BYTES);
    expect(JSON.parse(sent.toString('utf8'))).toEqual({ id: 2, result: euros(300) });
  });

  it('refuses a call frame whose characters fit but whose bytes do not, without calling the handler', async () => {
    const execute = vi.fn(() => 'called');
    const { script, replies } = await startChannel([
      { name: 'take', description: 'Takes text.', inputSchema: { type: 'object' }, execute },
    ]);
    const frame = `${JSON.stringify({ id: 1, method: 'take', params: { text: euros(400) } })}\n`;
    expect(frame.length).toBeLessThan(MAX_FRAME_BYTES);
    expect(Buffer.byteLength(frame)).toBeGreaterThan(MAX_FRAME_BYTES);
    script.write(frame);
    script.write(`${JSON.stringify({ id: 2, method: 'take', params: {} })}\n`);
    const refused = JSON.parse((await replies.next()).toString('utf8'));
    expect(refused).toMatchObject({ error: { code: ChannelErrorCode.frameTooLarge } });
    expect(JSON.parse((await replies.next()).toString('utf8'))).toEqual({ id: 2, result: 'called' });
    expect(execute).toHaveBeenCalledTimes(1);
  });
});
