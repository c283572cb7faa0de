import { outputEndMarker } from '../../rpc/protocol.js';

/** What an {@link OutputSplitter} finds in one output stream of an interpreter. */
export interface OutputSplitterHandlers {
  /** Bytes of the running script or cell (valid only during the call: what a handler keeps, it copies). */
  output(chunk: Buffer): void;
  /** Bytes written while nothing runs (e.g. by a background thread between cells, or after the end): dropped. */
  outside(chunk: Buffer): void;
  /** The end marker went by: the output on this stream is complete. */
  ended(): void;
}

/**
 * Splits one output stream of an interpreter at end markers. The output of a script (or of a session's cell) is what
 * the stream carries from the moment the host expects it (`expect`) to the end marker the boot writes when it is
 * over, with a random nonce per script or cell: whichever thread or subprocess wrote it, and nothing written later.
 * The host need not wait for the pipes to close (under a sandbox that is the sandbox's teardown). A marker split
 * across chunks is found; bytes that could start one are held back until the next chunk.
 */
export class OutputSplitter {
  readonly #handlers: OutputSplitterHandlers;
  #end: Buffer | undefined;
  #carry: Buffer | undefined;
  /** Expecting output without an end marker: all of it is output. */
  #unmarked = false;

  constructor(handlers: OutputSplitterHandlers) {
    this.#handlers = handlers;
  }

  /**
   * A script or cell with this nonce starts now: what follows is its output, up to its end marker. Without a nonce
   * (a boot that writes no marker) everything up to the stream's close is its output.
   */
  expect(nonce: string | undefined): void {
    if (this.#carry !== undefined) this.#handlers.outside(this.#carry);
    this.#carry = undefined;
    this.#end = nonce === undefined ? undefined : outputEndMarker(nonce);
    this.#unmarked = nonce === undefined;
  }

  /** Feeds the next chunk of the stream (read only during the call: it may be a read buffer the next read reuses). */
  push(chunk: Buffer): void {
    const end = this.#end;
    if (end === undefined) {
      if (this.#unmarked) this.#handlers.output(chunk);
      else this.#handlers.outside(chunk);
      return;
    }
    let data = chunk;
    if (this.#carry !== undefined) {
      data = Buffer.concat([this.#carry, chunk]);
      this.#carry = undefined;
    }
    const index = data.indexOf(end);
    if (index === -1) {
      const held = markerPrefixLength(data, end);
      if (data.length > held) this.#handlers.output(data.subarray(0, data.length - held));
      // A copy: `data` may be the caller's read buffer.
      if (held > 0) this.#carry = Buffer.from(data.subarray(data.length - held));
      return;
    }
    if (index > 0) this.#handlers.output(data.subarray(0, index));
    // One end per script or cell: what follows (and a replayed marker) is outside until the next one starts.
    this.#end = undefined;
    this.#handlers.ended();
    const rest = data.subarray(index + end.length);
    if (rest.length > 0) this.#handlers.outside(rest);
  }

  /** The stream ended: bytes held back as a possible marker are output after all. */
  flush(): void {
    const carry = this.#carry;
    this.#carry = undefined;
    if (carry !== undefined) this.#handlers.output(carry);
  }
}

/** Length of the longest end of `data` that is the start of `marker` (shorter than the marker). */
function markerPrefixLength(data: Buffer, marker: Buffer): number {
  const first = marker[0];
  for (let start = Math.max(0, data.length - marker.length + 1); start < data.length; start += 1) {
    if (data[start] !== first) continue;
    const length = data.length - start;
    if (data.compare(marker, 0, length, start) === 0) return length;
  }
  return 0;
}
