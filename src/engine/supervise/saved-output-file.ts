import { close, open, writev } from 'node:fs';

/**
 * Bytes gathered before the next write of a saved output: a script printing megabytes costs one trip to the thread
 * pool per 256 KiB, not one per chunk read from its pipe (each a wake-up of a pool thread and of the event loop).
 */
export const SAVED_OUTPUT_BATCH_BYTES = 256 * 1024;

/**
 * Written batches kept for the next batches of any saved output of the process. A page written for the first time
 * costs a fault, and so does each page the host writes first after a fork (every spawn is one): a few batches used
 * in turn fault a few hundred times less per run printing megabytes than a fresh buffer per batch.
 */
const SPARE_BATCHES = 4;
const spareBatches: Buffer[] = [];

function takeBatch(bytes: number): Buffer {
  const spare = spareBatches.pop();
  return spare !== undefined && spare.length === bytes ? spare : Buffer.allocUnsafeSlow(bytes);
}

function keepBatch(batch: Buffer): void {
  if (spareBatches.length < SPARE_BATCHES) spareBatches.push(batch);
}

/**
 * Writes of one saved output in flight at once: while the run goes on, one at a time (a flood of output does not
 * take every thread of the pool); its end writes the last batch at once, beside a write still in flight, instead of
 * waiting for it.
 */
const WRITES_IN_FLIGHT_AT_END = 2;

/**
 * A new file (created exclusively, mode 0600) that takes chunks in order, copies them into batch buffers of
 * `batchBytes` it reuses, and writes full batches, each at its own offset. Any failure (the file cannot be created, a
 * write fails or writes short) ends the writing: later chunks are dropped and {@link SavedOutputFile.end} says the
 * file is not complete.
 */
export class SavedOutputFile {
  readonly #batchBytes: number;
  #descriptor: number | undefined;
  /** The batch being filled, and how much of it is. */
  #batch: Buffer | undefined;
  #batchFilled = 0;
  /** Full batches (views of their buffers) waiting for a write, in order. */
  #queued: Buffer[] = [];
  /** Where in the file the next write starts. */
  #position = 0;
  #writesInFlight = 0;
  #failed = false;
  #ending: ((complete: boolean) => void) | undefined;

  constructor(path: string, batchBytes = SAVED_OUTPUT_BATCH_BYTES) {
    this.#batchBytes = batchBytes;
    open(path, 'wx', 0o600, (error, descriptor) => {
      if (error !== null) {
        this.#fail();
        return;
      }
      this.#descriptor = descriptor;
      this.#writeQueued();
      this.#settle();
    });
  }

  /** Copies the next chunk into the batch (the chunk may be reused once this returns); full batches are written. */
  write(chunk: Buffer): void {
    if (this.#failed || this.#ending !== undefined) return;
    let offset = 0;
    while (offset < chunk.length) {
      if (this.#batch === undefined) {
        this.#batch = takeBatch(this.#batchBytes);
        this.#batchFilled = 0;
      }
      const copied = chunk.copy(this.#batch, this.#batchFilled, offset);
      this.#batchFilled += copied;
      offset += copied;
      if (this.#batchFilled === this.#batchBytes) this.#queueBatch();
    }
    if (this.#queued.length > 0) this.#writeQueued();
  }

  /**
   * Writes what is left; resolves whether every chunk was written, once every write is done. The file is closed
   * after that, without holding up the caller: what was written is in it already.
   */
  end(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#ending = resolve;
      if (!this.#failed && this.#batchFilled > 0) this.#queueBatch();
      this.#writeQueued();
      this.#settle();
    });
  }

  #queueBatch(): void {
    const batch = this.#batch;
    if (batch === undefined) return;
    this.#queued.push(batch.subarray(0, this.#batchFilled));
    this.#batch = undefined;
    this.#batchFilled = 0;
  }

  #writeQueued(): void {
    const descriptor = this.#descriptor;
    if (descriptor === undefined || this.#failed || this.#queued.length === 0) return;
    if (this.#writesInFlight >= (this.#ending === undefined ? 1 : WRITES_IN_FLIGHT_AT_END)) return;
    const batches = this.#queued;
    this.#queued = [];
    let bytes = 0;
    for (const batch of batches) bytes += batch.length;
    const position = this.#position;
    this.#position += bytes;
    this.#writesInFlight += 1;
    writev(descriptor, batches, position, (error, written) => {
      this.#writesInFlight -= 1;
      if (error !== null || written !== bytes) {
        this.#fail();
        return;
      }
      for (const batch of batches) keepBatch(Buffer.from(batch.buffer, batch.byteOffset, this.#batchBytes));
      this.#writeQueued();
      this.#settle();
    });
  }

  #fail(): void {
    this.#failed = true;
    this.#batch = undefined;
    this.#batchFilled = 0;
    this.#queued = [];
    this.#settle();
  }

  /** Resolves `end` once nothing is left to write (or the writing failed) and no write is in flight; closes the file. */
  #settle(): void {
    const ending = this.#ending;
    if (ending === undefined || this.#writesInFlight > 0) return;
    // Still being opened: the open's callback settles.
    if (!this.#failed && (this.#descriptor === undefined || this.#queued.length > 0)) return;
    this.#ending = undefined;
    const descriptor = this.#descriptor;
    this.#descriptor = undefined;
    if (descriptor !== undefined) close(descriptor, ignoreCloseFailure);
    ending(!this.#failed);
  }
}

// Every byte was written before the close: its failure loses nothing.
function ignoreCloseFailure(): void {}
