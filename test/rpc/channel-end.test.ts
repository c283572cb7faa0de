import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectSocket, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Duplex, PassThrough } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  DIRECT_READ_BUFFER_BYTES,
  openDirectChannel,
  receiveFromChannel,
  writeToChannel,
} from '../../src/rpc/channel-end.js';
import { LineSplitter } from '../../src/rpc/line-splitter.js';

// The host end of a run's tool channel, read with `onread` into one reused buffer and written with write(2) while
// nothing is queued. These tests run it on a real Unix socket, as the run's socketpair is one.

let base: string;
let server: Server | undefined;
const opened: Duplex[] = [];

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'codecall-channel-end-'));
});

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

afterEach(async () => {
  for (const stream of opened.splice(0)) stream.destroy();
  const listening = server;
  server = undefined;
  await new Promise<void>((resolve) => (listening === undefined ? resolve() : listening.close(() => resolve())));
});

/** A direct channel on the accepted end of a Unix socket, and the other end (the script's). */
async function openPair(): Promise<{ channel: Duplex; script: Socket }> {
  const listening = createServer();
  server = listening;
  const accepted = new Promise<Socket>((resolve) => listening.once('connection', resolve));
  const path = join(base, `channel-${opened.length}.sock`);
  await new Promise<void>((resolve) => listening.listen(path, resolve));
  const script = connectSocket(path);
  const socket = await accepted;
  const channel = openDirectChannel(socket);
  expect(channel).not.toBe(socket);
  // As the run's launch does: an error on the channel is its end, not a crash.
  channel.on('error', () => {});
  opened.push(channel, script);
  return { channel, script };
}

/** Collects the lines a splitter finds in the channel's reads. */
function collectLines(channel: Duplex): {
  lines: string[];
  reads: number[];
  /** The memory each read landed in. */
  buffers: ArrayBufferLike[];
  next(count: number): Promise<void>;
} {
  const lines: string[] = [];
  const reads: number[] = [];
  const buffers: ArrayBufferLike[] = [];
  let waiting: { count: number; resolve: () => void } | undefined;
  const splitter = new LineSplitter(
    { maxFrameBytes: 1024 * 1024, maxNestingDepth: 64 },
    {
      line: (line) => {
        lines.push(line);
        if (waiting !== undefined && lines.length >= waiting.count) waiting.resolve();
      },
      oversized: () => lines.push('<oversized>'),
      tooDeep: () => lines.push('<too deep>'),
    },
  );
  receiveFromChannel(channel, (bytes, length) => {
    reads.push(length);
    buffers.push(bytes.buffer);
    splitter.push(bytes, length);
  });
  return {
    lines,
    reads,
    buffers,
    next: (count) =>
      new Promise<void>((resolve) => {
        if (lines.length >= count) resolve();
        else waiting = { count, resolve };
      }),
  };
}

/** Reads everything the script's end receives until `bytes` bytes have come. */
function readBytes(script: Socket, bytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      total += chunk.length;
      if (total >= bytes) {
        script.off('data', onData);
        resolve(Buffer.concat(chunks));
      }
    };
    script.on('data', onData);
    script.once('error', reject);
  });
}

function waitFor(condition: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = () => (condition() ? resolve() : setImmediate(check));
    check();
  });
}

describe('a direct channel reads', () => {
  it('a frame split across reads whole, though the next read overwrites the buffer the first part was in', async () => {
    const { channel, script } = await openPair();
    const collected = collectLines(channel);
    script.write('{"first":"aaaaaaaaaa');
    await waitFor(() => collected.reads.length === 1);
    // Each later read lands at the start of the same buffer, over the first part of the frame.
    script.write('bbbbbbbbbb');
    await waitFor(() => collected.reads.length === 2);
    script.write('"}\n{"second":2}\n');
    await collected.next(2);
    expect(collected.lines).toEqual(['{"first":"aaaaaaaaaabbbbbbbbbb"}', '{"second":2}']);
  });

  it('frames of two channels split across reads, each whole, though both channels read into the same buffer', async () => {
    const one = await openPair();
    const firstServer = server;
    const two = await openPair();
    try {
      const first = collectLines(one.channel);
      const second = collectLines(two.channel);
      one.script.write('{"run":"one","text":"aaaa');
      await waitFor(() => first.reads.length === 1);
      two.script.write('{"run":"two","text":"bbbb');
      await waitFor(() => second.reads.length === 1);
      one.script.write('cccc"}\n');
      two.script.write('dddd"}\n');
      await first.next(1);
      await second.next(1);
      expect(first.lines).toEqual(['{"run":"one","text":"aaaacccc"}']);
      expect(second.lines).toEqual(['{"run":"two","text":"bbbbdddd"}']);
      // Every read of both channels landed in the same memory.
      expect(new Set([...first.buffers, ...second.buffers]).size).toBe(1);
    } finally {
      // Closes once afterEach has destroyed the pair's sockets.
      firstServer?.close();
    }
  });

  it('many frames of one read, in order', async () => {
    const { channel, script } = await openPair();
    const collected = collectLines(channel);
    const frames = Array.from({ length: 500 }, (_, index) => `{"id":${index + 1},"method":"echo"}`);
    script.write(`${frames.join('\n')}\n`);
    await collected.next(frames.length);
    expect(collected.lines).toEqual(frames);
    expect(collected.reads.length).toBeLessThan(frames.length);
  });

  it('a frame longer than its read buffer', async () => {
    const { channel, script } = await openPair();
    const collected = collectLines(channel);
    const text = Array.from({ length: 40_000 }, (_, index) => String(index % 10)).join('');
    const frame = JSON.stringify({ text: text + text + text + text + text });
    expect(frame.length).toBeGreaterThan(DIRECT_READ_BUFFER_BYTES * 2);
    script.write(`${frame}\n{"after":true}\n`);
    await collected.next(2);
    expect(collected.lines[0] === frame, 'the long frame, whole').toBe(true);
    expect(collected.lines[1]).toBe('{"after":true}');
  });

  it('what came before anyone received, once a receiver is there', async () => {
    const { channel, script } = await openPair();
    script.write('{"early":1}\n');
    // The read that finds no receiver keeps a copy and stops reading: the rest waits in the kernel.
    await new Promise((resolve) => setTimeout(resolve, 50));
    script.write('{"later":2}\n');
    const collected = collectLines(channel);
    await collected.next(2);
    expect(collected.lines).toEqual(['{"early":1}', '{"later":2}']);
  });

  it('to the end of the stream (the script closed its end), then ends and closes', async () => {
    const { channel, script } = await openPair();
    const collected = collectLines(channel);
    const ended = new Promise<void>((resolve) => channel.once('end', resolve));
    const closed = new Promise<void>((resolve) => channel.once('close', resolve));
    script.end('{"last":true}\n');
    await ended;
    await closed;
    expect(collected.lines).toEqual(['{"last":true}']);
  });

  it('until the peer is destroyed: the channel closes', async () => {
    const { channel, script } = await openPair();
    collectLines(channel);
    const closed = new Promise<void>((resolve) => channel.once('close', resolve));
    script.destroy();
    await closed;
    expect(channel.destroyed).toBe(true);
  });

  it('nothing more once the receiver stopped and the channel was paused; a new receiver gets the rest', async () => {
    const { channel, script } = await openPair();
    const first: string[] = [];
    const stop = receiveFromChannel(channel, (bytes, length) => first.push(bytes.toString('utf8', 0, length)));
    script.write('one\n');
    await waitFor(() => first.length === 1);
    stop();
    channel.pause();
    script.write('two\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second: string[] = [];
    receiveFromChannel(channel, (bytes, length) => second.push(bytes.toString('utf8', 0, length)));
    // A paused channel stays paused until it is resumed, as a stream with a new 'data' listener would.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(second).toEqual([]);
    channel.resume();
    await waitFor(() => second.length === 1);
    expect(first).toEqual(['one\n']);
    expect(second).toEqual(['two\n']);
  });
});

describe('a direct channel writes', () => {
  it('a frame with nothing queued at once, and says so before returning', async () => {
    const { channel, script } = await openPair();
    const received = readBytes(script, 14);
    let written = false;
    writeToChannel(channel, '{"id":1,"r":2}', () => {
      written = true;
    });
    expect(written).toBe(true);
    expect(channel.writableLength).toBe(0);
    expect((await received).toString()).toBe('{"id":1,"r":2}');
  });

  it('what the kernel does not take through the stream, and every later frame behind it, in order', async () => {
    const { channel, script } = await openPair();
    script.pause();
    // Far more than a Unix socket's buffers hold while the script does not read.
    const large = Buffer.alloc(8 * 1024 * 1024, 'x');
    let largeWritten = false;
    writeToChannel(channel, ['{"id":1}\n', large], () => {
      largeWritten = true;
    });
    expect(largeWritten, 'a partial write gives its buffers back only once the stream took the rest').toBe(false);
    expect(channel.writableLength).toBeGreaterThan(0);
    let smallWritten = false;
    writeToChannel(channel, '\n{"id":2}\n', () => {
      smallWritten = true;
    });
    expect(smallWritten).toBe(false);
    const received = readBytes(script, large.length + 19);
    script.resume();
    const bytes = await received;
    await waitFor(() => smallWritten);
    expect(largeWritten).toBe(true);
    expect(bytes.length).toBe(large.length + 19);
    expect(bytes.toString('utf8', 0, 9)).toBe('{"id":1}\n');
    expect(bytes.subarray(9, 9 + large.length).equals(large)).toBe(true);
    expect(bytes.toString('utf8', 9 + large.length)).toBe('\n{"id":2}\n');
  });

  it('to a peer that is gone without throwing, and lets go of every frame', async () => {
    const { channel, script } = await openPair();
    // Not reading, the channel has not seen the end yet when it writes.
    channel.pause();
    const closed = new Promise<void>((resolve) => channel.once('close', resolve));
    script.destroy();
    await new Promise((resolve) => script.once('close', resolve));
    let written = 0;
    for (let index = 0; index < 3; index += 1) {
      writeToChannel(channel, `{"id":${index}}\n`, () => {
        written += 1;
      });
    }
    await closed;
    await waitFor(() => written === 3);
    expect(channel.destroyed).toBe(true);
  });
});

describe('any other stream', () => {
  it('is left as it is, read through its data events and written through the stream', async () => {
    const stream = new PassThrough();
    expect(openDirectChannel(stream)).toBe(stream);
    const reads: string[] = [];
    const stop = receiveFromChannel(stream, (bytes, length) => reads.push(bytes.toString('utf8', 0, length)));
    let written = false;
    writeToChannel(stream, ['{"id":1}', '\n'], () => {
      written = true;
    });
    await waitFor(() => reads.length > 0 && written);
    stop();
    expect(reads.join('')).toBe('{"id":1}\n');
  });
});
