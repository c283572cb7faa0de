/** What a {@link CellOutputSplitter} finds in one output stream of a session interpreter. */
export interface CellOutputHandlers {
  /** Bytes of the running cell. */
  output(chunk: Buffer): void;
  /** Bytes written while no cell runs (e.g. by a background thread between cells): dropped, only counted. */
  outside(chunk: Buffer): void;
  /** The cell's end marker went by: its output on this stream is complete. */
  ended(): void;
}

/** The marker the session boot writes at the end of a cell's output, on stdout and on stderr. */
export function cellEndMarker(nonce: string): Buffer {
  return Buffer.from(`\0codecall-cell-${nonce}-end\0`, 'latin1');
}

/**
 * Splits one output stream of a session interpreter into cells. A cell's output is what the stream carries from the
 * moment the host sends the cell (`expect`) to the end marker the boot writes straight to the file descriptor when
 * the cell is over (with a random nonce per cell, sent in `$cell`): whichever thread or subprocess wrote it, and
 * nothing of a later cell. A marker split across chunks is found; bytes that could start one are held back until
 * the next chunk.
 */
export class CellOutputSplitter {
  readonly #handlers: CellOutputHandlers;
  #end: Buffer | undefined;
  #carry: Buffer | undefined;

  constructor(handlers: CellOutputHandlers) {
    this.#handlers = handlers;
  }

  /** A cell with this nonce starts now: what follows is its output, up to its end marker. */
  expect(nonce: string): void {
    if (this.#carry !== undefined) this.#handlers.outside(this.#carry);
    this.#carry = undefined;
    this.#end = cellEndMarker(nonce);
  }

  /** Feeds the next chunk of the stream. */
  push(chunk: Buffer): void {
    const end = this.#end;
    if (end === undefined) {
      this.#handlers.outside(chunk);
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
      if (held > 0) this.#carry = data.subarray(data.length - held);
      return;
    }
    if (index > 0) this.#handlers.output(data.subarray(0, index));
    // One end per cell: what follows (and a replayed marker) is outside any cell until the next one starts.
    this.#end = undefined;
    this.#handlers.ended();
    const rest = data.subarray(index + end.length);
    if (rest.length > 0) this.#handlers.outside(rest);
  }

  /** The stream ended: bytes held back as a possible marker are the cell's output after all. */
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
