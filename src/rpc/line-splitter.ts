/** What the splitter found in the byte stream. */
export interface LineSplitterHandlers {
  /** A complete frame, without its newline, decoded as UTF-8 (invalid sequences become U+FFFD). */
  line(line: string): void;
  /** A frame longer than the limit was skipped up to its newline (reported once, when it starts). */
  oversized(limitBytes: number): void;
}

/**
 * Splits a byte stream into newline-terminated frames of at most `maxFrameBytes` (newline included). An oversized
 * frame is discarded as it streams in, never buffered whole.
 */
export class LineSplitter {
  readonly #maxFrameBytes: number;
  readonly #handlers: LineSplitterHandlers;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  #discarding = false;

  constructor(maxFrameBytes: number, handlers: LineSplitterHandlers) {
    this.#maxFrameBytes = maxFrameBytes;
    this.#handlers = handlers;
  }

  /** Feeds the next chunk of the stream. */
  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        this.#keep(chunk, start, chunk.length);
        return;
      }
      if (this.#discarding) {
        this.#discarding = false;
      } else if (this.#partialBytes + (newline - start) + 1 > this.#maxFrameBytes) {
        this.#reset();
        this.#handlers.oversized(this.#maxFrameBytes);
      } else if (this.#partialBytes === 0) {
        // Decoded straight from the chunk: no Buffer view per frame on every call's hot path.
        if (newline > start) this.#handlers.line(chunk.toString('utf8', start, newline));
      } else {
        this.#partial.push(chunk.subarray(start, newline));
        const line = Buffer.concat(this.#partial, this.#partialBytes + (newline - start));
        this.#reset();
        this.#handlers.line(line.toString('utf8'));
      }
      start = newline + 1;
    }
  }

  #keep(chunk: Buffer, start: number, end: number): void {
    if (this.#discarding || start === end) return;
    this.#partialBytes += end - start;
    if (this.#partialBytes >= this.#maxFrameBytes) {
      this.#reset();
      this.#discarding = true;
      this.#handlers.oversized(this.#maxFrameBytes);
      return;
    }
    this.#partial.push(chunk.subarray(start, end));
  }

  #reset(): void {
    this.#partial = [];
    this.#partialBytes = 0;
  }
}
