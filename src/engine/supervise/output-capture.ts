import { HEAD_SHARE } from '../../core/text-truncation.js';
import { SavedOutputFile } from './saved-output-file.js';

/** What a capture kept of a stream. */
export interface CapturedOutput {
  /** The kept bytes: everything, or head + tail with the omitted middle removed. */
  readonly head: Buffer;
  readonly tail: Buffer;
  /** Bytes the stream carried in all. */
  readonly totalBytes: number;
  /** Whether the middle was dropped. */
  readonly truncated: boolean;
  /** Where the complete output was saved (only when truncated and a path was given). */
  readonly fullOutputPath?: string | undefined;
  /** Whether the saved file is the complete output (false when the run printed more than the file may hold). */
  readonly fullOutputComplete: boolean;
}

/** Options of {@link OutputCapture}. */
export interface OutputCaptureOptions {
  /** Bytes kept in memory: 40 % head, 60 % tail. */
  readonly keepBytes: number;
  /** When set, the complete output is saved there once it outgrows `keepBytes`. */
  readonly fullOutputPath?: string | undefined;
  /** Cap of the saved file. */
  readonly maxFullOutputBytes?: number | undefined;
}

/**
 * Keeps the head and tail of a stream within a byte budget, in constant memory however much the script prints.
 * The complete stream goes to a file only once it outgrows the budget (until then all of it is in memory).
 * It copies what it keeps: a chunk it is given may be a read buffer that the next read overwrites.
 */
export class OutputCapture {
  readonly #headLimit: number;
  readonly #tailLimit: number;
  readonly #options: OutputCaptureOptions;
  #head: Buffer[] = [];
  #headBytes = 0;
  // The last bytes past the head, in a ring of `#tailLimit` bytes made on first use: a script printing megabytes
  // costs one buffer, not fresh memory per chunk.
  #tailRing: Buffer | undefined;
  #tailStart = 0;
  #tailBytes = 0;
  #totalBytes = 0;
  #file: SavedOutputFile | undefined;
  #fileBytes = 0;
  #fileComplete = true;

  constructor(options: OutputCaptureOptions) {
    this.#options = options;
    this.#headLimit = Math.floor(options.keepBytes * HEAD_SHARE);
    this.#tailLimit = options.keepBytes - this.#headLimit;
  }

  /** Bytes seen so far. */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** Takes the next chunk of the stream (read only during the call). */
  push(chunk: Buffer): void {
    this.#totalBytes += chunk.length;
    if (this.#file === undefined && this.#totalBytes > this.#options.keepBytes && this.#options.fullOutputPath) {
      this.#openFile(this.#options.fullOutputPath);
    }
    if (this.#file !== undefined) this.#writeFile(chunk);
    let rest = chunk;
    if (this.#headBytes < this.#headLimit) {
      const take = Math.min(this.#headLimit - this.#headBytes, rest.length);
      this.#head.push(Buffer.from(rest.subarray(0, take)));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length > 0) this.#pushTail(rest);
  }

  /** Ends the capture; waits for the saved file to be written. */
  async finish(): Promise<CapturedOutput> {
    const file = this.#file;
    if (file !== undefined && !(await file.end())) this.#fileComplete = false;
    return this.#captured();
  }

  /**
   * Ends the capture at once when the stream stayed within the budget (no saved file to wait for, as most runs and
   * cells); undefined otherwise, when {@link finish} ends it.
   */
  finishInMemory(): CapturedOutput | undefined {
    return this.#file === undefined ? this.#captured() : undefined;
  }

  #captured(): CapturedOutput {
    const head = Buffer.concat(this.#head, this.#headBytes);
    const tail = this.#tail();
    const file = this.#file;
    return {
      head,
      tail,
      totalBytes: this.#totalBytes,
      truncated: this.#totalBytes > head.length + tail.length,
      fullOutputPath: file === undefined ? undefined : this.#options.fullOutputPath,
      fullOutputComplete: this.#fileComplete,
    };
  }

  #pushTail(chunk: Buffer): void {
    const limit = this.#tailLimit;
    if (limit === 0) return;
    this.#tailRing ??= Buffer.allocUnsafe(limit);
    const ring = this.#tailRing;
    if (chunk.length >= limit) {
      chunk.copy(ring, 0, chunk.length - limit);
      this.#tailStart = 0;
      this.#tailBytes = limit;
      return;
    }
    const at = (this.#tailStart + this.#tailBytes) % limit;
    const first = Math.min(chunk.length, limit - at);
    chunk.copy(ring, at, 0, first);
    if (first < chunk.length) chunk.copy(ring, 0, first);
    const held = this.#tailBytes + chunk.length;
    if (held > limit) {
      this.#tailStart = (this.#tailStart + held - limit) % limit;
      this.#tailBytes = limit;
    } else {
      this.#tailBytes = held;
    }
  }

  /** The tail's bytes in order. */
  #tail(): Buffer {
    const ring = this.#tailRing;
    if (ring === undefined || this.#tailBytes === 0) return Buffer.alloc(0);
    const end = this.#tailStart + this.#tailBytes;
    if (end <= ring.length) return ring.subarray(this.#tailStart, end);
    return Buffer.concat([ring.subarray(this.#tailStart), ring.subarray(0, end - ring.length)], this.#tailBytes);
  }

  #openFile(path: string): void {
    this.#file = new SavedOutputFile(path);
    // Everything printed before this chunk is still in memory: it fitted in the budget, so the head and tail hold it.
    for (const piece of this.#head) this.#writeFile(piece);
    if (this.#tailBytes > 0) this.#writeFile(this.#tail());
  }

  #writeFile(chunk: Buffer): void {
    const limit = this.#options.maxFullOutputBytes ?? Number.POSITIVE_INFINITY;
    const room = limit - this.#fileBytes;
    if (room <= 0) {
      this.#fileComplete = false;
      return;
    }
    const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (piece.length < chunk.length) this.#fileComplete = false;
    this.#fileBytes += piece.length;
    this.#file?.write(piece);
  }
}
