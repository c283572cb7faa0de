import { writeSync, writevSync } from 'node:fs';
import { Socket, type SocketConstructorOpts } from 'node:net';
import type { Duplex } from 'node:stream';

/** Bytes one read of a direct channel takes from the kernel, into the one buffer every read reuses. */
export const DIRECT_READ_BUFFER_BYTES = 64 * 1024;

// One read buffer for every direct channel of the process: each read is handed to its receiver before the next read
// can start (both run on the one JavaScript thread), and receivers copy what they keep, so a buffer per channel would
// only add its pages to the memory every concurrent run holds.
let sharedReadBuffer: Buffer | undefined;

/**
 * Receives the bytes of one read: `bytes[0, length)`. On a direct channel `bytes` is the read buffer all direct channels
 * share, valid only during the call (and only up to `length`): whatever the receiver keeps for later, it copies.
 */
export type ChannelReceiver = (bytes: Buffer, length: number) => void;

/** What a reply written to the channel is: a frame, or a frame and the raw bytes that follow it. */
export type ChannelFrame = string | readonly (string | Buffer)[];

// EAGAIN (the kernel's buffer is full) or any error of a direct write: nothing was written, and the stream writes it
// all (and meets the error itself, if it is one).
const NOTHING_WRITTEN = 0;

/** The parts of a libuv stream handle this module uses (not in Node's public types). */
interface StreamHandle {
  readonly fd?: number;
  useUserBuffer?: unknown;
}

/** Options of `net.Socket` that Node 20 takes and its type declarations leave out (`handle` is internal). */
interface DirectSocketOptions {
  readonly handle: StreamHandle;
  readonly onread: { readonly buffer: Uint8Array; readonly callback: (length: number, buffer: Uint8Array) => boolean };
}

/** The read side of a direct channel: who receives its bytes, and what came while no one did. */
class DirectReader {
  receiver: ChannelReceiver | undefined;
  /** Copies of bytes read while no receiver was there, in order. */
  pending: Buffer[] = [];

  /** The socket's `onread` callback; returning false stops reading (the bytes wait in the kernel). */
  deliver(length: number, buffer: Uint8Array): boolean {
    const receiver = this.receiver;
    if (receiver === undefined) {
      this.pending.push(Buffer.from(buffer.subarray(0, length)));
      return false;
    }
    receiver(buffer as Buffer, length);
    return true;
  }
}

/** The sockets {@link openDirectChannel} made, with their readers. */
const directReaders = new WeakMap<Duplex, DirectReader>();

function handleOf(stream: Duplex): StreamHandle | undefined {
  return ((stream as unknown as { _handle?: StreamHandle | null })._handle ?? undefined) as StreamHandle | undefined;
}

/**
 * Moves the handle of a freshly made socket (e.g. a child's `'pipe'` stdio slot, before anything was read from it)
 * into a socket that reads with `onread` into the one shared read buffer and hands each read straight to its receiver: no
 * Buffer, no stream events and no ticks per read. The old socket is left without a handle and is destroyed when the
 * new one closes (so a child process still sees its stdio close). Any other stream (no handle, or data already read)
 * is returned as it is. Read it with {@link receiveFromChannel}, write it with {@link writeToChannel}.
 */
export function openDirectChannel(stream: Duplex): Duplex {
  if (
    !(stream instanceof Socket) ||
    stream.destroyed ||
    stream.readableLength > 0 ||
    stream.listenerCount('data') > 0
  ) {
    return stream;
  }
  const handle = handleOf(stream);
  if (handle === undefined || typeof handle.useUserBuffer !== 'function') return stream;
  const reader = new DirectReader();
  sharedReadBuffer ??= Buffer.allocUnsafeSlow(DIRECT_READ_BUFFER_BYTES);
  const buffer = sharedReadBuffer;
  (stream as unknown as { _handle: StreamHandle | null })._handle = null;
  const options: DirectSocketOptions = {
    handle,
    onread: {
      buffer,
      callback: (length, buffer) => reader.deliver(length, buffer),
    },
  };
  const socket = new Socket(options as SocketConstructorOpts);
  socket.once('close', () => stream.destroy());
  directReaders.set(socket, reader);
  return socket;
}

/**
 * Hands every read of `stream` to `receiver` from now on, until the returned function is called. A direct channel
 * starts reading at once unless it was paused (as a `'data'` listener would); any other stream gets a `'data'`
 * listener. One receiver at a time on a direct channel.
 */
export function receiveFromChannel(stream: Duplex, receiver: ChannelReceiver): () => void {
  const reader = directReaders.get(stream);
  if (reader === undefined) {
    const onData = (chunk: Buffer): void => receiver(chunk, chunk.length);
    stream.on('data', onData);
    return () => stream.off('data', onData);
  }
  reader.receiver = receiver;
  const pending = reader.pending;
  if (pending.length > 0) {
    reader.pending = [];
    for (const bytes of pending) {
      // A receiver earlier in the list may have stopped receiving: the rest waits for the next one.
      if (reader.receiver !== receiver) {
        reader.pending.push(bytes);
        continue;
      }
      receiver(bytes, bytes.length);
    }
  }
  if (stream.readableFlowing !== false) stream.resume();
  return () => {
    if (reader.receiver === receiver) reader.receiver = undefined;
  };
}

/**
 * Writes a frame (or a frame and the raw bytes after it) to the channel in order with every earlier write. On a direct
 * channel with nothing queued, it is one `write`/`writev` system call; what the kernel does not take at once (a
 * partial write, EAGAIN, an error) goes through the stream, and so does every later frame until the queue drains.
 * `written` is called once nothing refers to the frame's buffers any more: right after a complete direct write, else
 * when the stream's write calls back (done, failed, or dropped with the socket).
 */
export function writeToChannel(stream: Duplex, frame: ChannelFrame, written?: (() => void) | undefined): void {
  if (
    stream.writableLength === 0 &&
    stream.writableCorked === 0 &&
    !stream.writableEnded &&
    directReaders.has(stream)
  ) {
    const fd = handleOf(stream)?.fd;
    if (fd !== undefined && fd >= 0) {
      if (typeof frame === 'string') writeStringDirect(stream, fd, frame, written);
      else writeChunksDirect(stream, fd, frame, written);
      return;
    }
  }
  writeThroughStream(stream, frame, written);
}

function writeStringDirect(stream: Duplex, fd: number, frame: string, written: (() => void) | undefined): void {
  let sent: number;
  try {
    sent = writeSync(fd, frame);
  } catch {
    sent = NOTHING_WRITTEN;
  }
  const size = Buffer.byteLength(frame);
  if (sent === size) {
    written?.();
    return;
  }
  stream.write(sent === 0 ? frame : Buffer.from(frame).subarray(sent), written);
}

function writeChunksDirect(
  stream: Duplex,
  fd: number,
  frame: readonly (string | Buffer)[],
  written: (() => void) | undefined,
): void {
  const chunks = frame.map((chunk) => (typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
  let left: number;
  try {
    left = writevSync(fd, chunks);
  } catch {
    left = NOTHING_WRITTEN;
  }
  let first = 0;
  while (first < chunks.length) {
    const size = (chunks[first] as Buffer).length;
    if (left < size) break;
    left -= size;
    first += 1;
  }
  if (first === chunks.length) {
    written?.();
    return;
  }
  chunks[first] = (chunks[first] as Buffer).subarray(left);
  writeThroughStream(stream, first === 0 ? chunks : chunks.slice(first), written);
}

function writeThroughStream(stream: Duplex, frame: ChannelFrame, written: (() => void) | undefined): void {
  if (typeof frame === 'string') {
    stream.write(frame, written);
    return;
  }
  stream.cork();
  const last = frame.length - 1;
  for (let index = 0; index <= last; index += 1) {
    stream.write(frame[index] as string | Buffer, index === last ? written : undefined);
  }
  stream.uncork();
}
