import { exceedsJsonNesting } from '../core/json-nesting.js';

/** What the splitter found in the byte stream. */
export interface LineSplitterHandlers {
  /** A complete frame, without its newline, decoded as UTF-8 (invalid sequences become U+FFFD). */
  line(line: string): void;
  /** A frame longer than the limit was skipped up to its newline (reported once, when it starts). */
  oversized(limitBytes: number): void;
  /** A frame nesting arrays and objects deeper than the limit was dropped without being decoded or parsed. */
  tooDeep(maxDepth: number): void;
}

/** Limits of a {@link LineSplitter}. */
export interface LineSplitterLimits {
  /** Largest frame, newline included. */
  readonly maxFrameBytes: number;
  /** Deepest nesting of arrays and objects in a frame (see `exceedsJsonNesting`). */
  readonly maxNestingDepth: number;
}

/**
 * Splits a byte stream into newline-terminated JSON frames of at most `maxFrameBytes` (newline included) nesting at
 * most `maxNestingDepth` deep. An oversized frame is discarded as it streams in, never buffered whole; a deep one is
 * dropped before it is decoded, so no parser ever sees it.
 */
export class LineSplitter {
  readonly #maxFrameBytes: number;
  readonly #maxNestingDepth: number;
  readonly #handlers: LineSplitterHandlers;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  #discarding = false;

  constructor(limits: LineSplitterLimits, handlers: LineSplitterHandlers) {
    this.#maxFrameBytes = limits.maxFrameBytes;
    this.#maxNestingDepth = limits.maxNestingDepth;
    this.#handlers = handlers;
  }

  /**
   * Feeds the next chunk of the stream: `chunk[0, end)`. The splitter keeps no reference to `chunk` (it copies what it
   * keeps of a frame not complete yet), so the caller may reuse it at once.
   */
  push(buffer: Buffer, end: number = buffer.length): void {
    // One view per read, so that the search for newlines stops at its end (not in old bytes of a reused buffer).
    const chunk = end === buffer.length ? buffer : buffer.subarray(0, end);
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        this.#keep(chunk, start, end);
        return;
      }
      if (this.#discarding) {
        this.#discarding = false;
      } else if (this.#partialBytes + (newline - start) + 1 > this.#maxFrameBytes) {
        this.#reset();
        this.#handlers.oversized(this.#maxFrameBytes);
      } else if (this.#partialBytes === 0) {
        // Checked and decoded straight from the chunk: no Buffer view per frame on every call's hot path.
        if (newline > start) this.#emit(chunk, start, newline);
      } else {
        this.#partial.push(chunk.subarray(start, newline));
        const line = Buffer.concat(this.#partial, this.#partialBytes + (newline - start));
        this.#reset();
        this.#emit(line, 0, line.length);
      }
      start = newline + 1;
    }
  }

  #emit(bytes: Buffer, start: number, end: number): void {
    if (exceedsJsonNesting(bytes, this.#maxNestingDepth, start, end)) {
      this.#handlers.tooDeep(this.#maxNestingDepth);
      return;
    }
    this.#handlers.line(bytes.toString('utf8', start, end));
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
    // A copy: the chunk may be a read buffer that the next read overwrites.
    this.#partial.push(Buffer.from(chunk.subarray(start, end)));
  }

  #reset(): void {
    this.#partial = [];
    this.#partialBytes = 0;
  }
}
