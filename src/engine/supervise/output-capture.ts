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
 */
export class OutputCapture {
  readonly #headLimit: number;
  readonly #tailLimit: number;
  readonly #options: OutputCaptureOptions;
  #head: Buffer[] = [];
  #headBytes = 0;
  #tail: Buffer[] = [];
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

  /** Takes the next chunk of the stream. */
  push(chunk: Buffer): void {
    this.#totalBytes += chunk.length;
    if (this.#file === undefined && this.#totalBytes > this.#options.keepBytes && this.#options.fullOutputPath) {
      this.#openFile(this.#options.fullOutputPath);
    }
    if (this.#file !== undefined) this.#writeFile(chunk);
    let rest = chunk;
    if (this.#headBytes < this.#headLimit) {
      const take = Math.min(this.#headLimit - this.#headBytes, rest.length);
      this.#head.push(rest.subarray(0, take));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.#tail.push(rest);
    this.#tailBytes += rest.length;
    while (this.#tailBytes - (this.#tail[0]?.length ?? 0) >= this.#tailLimit) {
      this.#tailBytes -= this.#tail.shift()?.length ?? 0;
    }
  }

  /** Ends the capture; waits for the saved file to be written. */
  async finish(): Promise<CapturedOutput> {
    const head = Buffer.concat(this.#head, this.#headBytes);
    let tail = Buffer.concat(this.#tail, this.#tailBytes);
    const keptBytes = head.length + tail.length;
    const truncated = this.#totalBytes > keptBytes || tail.length > this.#tailLimit;
    if (tail.length > this.#tailLimit) tail = tail.subarray(tail.length - this.#tailLimit);
    const file = this.#file;
    if (file !== undefined && !(await file.end())) this.#fileComplete = false;
    return {
      head,
      tail,
      totalBytes: this.#totalBytes,
      truncated,
      fullOutputPath: file === undefined ? undefined : this.#options.fullOutputPath,
      fullOutputComplete: this.#fileComplete,
    };
  }

  #openFile(path: string): void {
    this.#file = new SavedOutputFile(path);
    // Everything printed so far is still in memory: the head and tail together cover it all.
    for (const piece of [...this.#head, ...this.#tail]) this.#writeFile(piece);
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
