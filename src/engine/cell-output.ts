/** What a {@link CellOutputSplitter} finds in one output stream of a session interpreter. */
export interface CellOutputHandlers {
  /** The cell's begin marker went by: the interpreter started the cell. */
  began(): void;
  /** Bytes written while the cell ran (between its begin and end markers). */
  output(chunk: Buffer): void;
  /** Bytes written outside any cell (e.g. by a background thread between cells, or before the first begin marker). */
  outside(chunk: Buffer): void;
  /** The cell's end marker went by: its output on this stream is complete. */
  ended(): void;
}

/** The markers the session boot writes around a cell's output on stdout and stderr. */
export function cellMarkers(nonce: string): { readonly begin: Buffer; readonly end: Buffer } {
  return {
    begin: Buffer.from(`\0codecall-cell-${nonce}-begin\0`, 'latin1'),
    end: Buffer.from(`\0codecall-cell-${nonce}-end\0`, 'latin1'),
  };
}

/**
 * Splits one output stream of a session interpreter into cells. The boot writes a begin and an end marker (with a
 * random nonce per cell, sent in `$cell`) straight to the file descriptor around each cell, so a cell's output is
 * exactly what reached the pipe between them, whichever thread or subprocess wrote it, and nothing of a later cell.
 * Markers split across chunks are found; bytes that could start a marker are held back until the next chunk.
 */
export class CellOutputSplitter {
  readonly #handlers: CellOutputHandlers;
  #begin: Buffer | undefined;
  #end: Buffer | undefined;
  #inside = false;
  #carry: Buffer | undefined;

  constructor(handlers: CellOutputHandlers) {
    this.#handlers = handlers;
  }

  /** Starts looking for the cell with this nonce; whatever comes before its begin marker is outside any cell. */
  expect(nonce: string): void {
    const markers = cellMarkers(nonce);
    this.#begin = markers.begin;
    this.#end = markers.end;
    this.#inside = false;
    if (this.#carry !== undefined) this.#handlers.outside(this.#carry);
    this.#carry = undefined;
  }

  /** Feeds the next chunk of the stream. */
  push(chunk: Buffer): void {
    let data = chunk;
    if (this.#carry !== undefined) {
      data = Buffer.concat([this.#carry, chunk]);
      this.#carry = undefined;
    }
    while (data.length > 0) {
      if (!this.#inside) {
        const begin = this.#begin;
        const index = begin === undefined ? -1 : data.indexOf(begin);
        if (begin === undefined || index === -1) {
          const held = begin === undefined ? 0 : markerPrefixLength(data, begin);
          if (data.length > held) this.#handlers.outside(data.subarray(0, data.length - held));
          if (held > 0) this.#carry = data.subarray(data.length - held);
          return;
        }
        if (index > 0) this.#handlers.outside(data.subarray(0, index));
        data = data.subarray(index + begin.length);
        this.#inside = true;
        this.#handlers.began();
        continue;
      }
      const end = this.#end as Buffer;
      const index = data.indexOf(end);
      if (index === -1) {
        const held = markerPrefixLength(data, end);
        if (data.length > held) this.#handlers.output(data.subarray(0, data.length - held));
        if (held > 0) this.#carry = data.subarray(data.length - held);
        return;
      }
      if (index > 0) this.#handlers.output(data.subarray(0, index));
      data = data.subarray(index + end.length);
      this.#inside = false;
      // One cell per nonce: a second begin marker with it (the script replaying it) is not a new cell.
      this.#begin = undefined;
      this.#handlers.ended();
    }
  }

  /** The stream ended: bytes held back as a possible marker are the cell's output after all. */
  flush(): void {
    const carry = this.#carry;
    this.#carry = undefined;
    if (carry === undefined) return;
    if (this.#inside) this.#handlers.output(carry);
    else this.#handlers.outside(carry);
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
