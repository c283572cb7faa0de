import { close, open, writev } from 'node:fs';

/**
 * Bytes gathered before the next write of a saved output: a script printing megabytes costs one trip to the thread
 * pool per MiB, not one per chunk read from its pipe (each a wake-up of a pool thread and of the event loop).
 */
export const SAVED_OUTPUT_BATCH_BYTES = 1 << 20;

/** Batch buffers a saved output keeps for reuse once written (one fills while the other is written). */
const SPARE_BATCHES = 2;

/**
 * A new file (created exclusively, mode 0600) that takes chunks in order, copies them into batch buffers of
 * `batchBytes` it reuses, and writes full batches one write at a time. Any failure (the file cannot be created, a
 * write fails or writes short) ends the writing: later chunks are dropped and {@link SavedOutputFile.end} says the
 * file is not complete.
 */
export class SavedOutputFile {
  readonly #batchBytes: number;
  #descriptor: number | undefined;
  /** The batch being filled, and how much of it is. */
  #batch: Buffer | undefined;
  #batchFilled = 0;
  /** Full batches (views of their buffers) waiting for the write in flight. */
  #queued: Buffer[] = [];
  #queuedBytes = 0;
  readonly #spare: Buffer[] = [];
  #writing = false;
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
    });
  }

  /** Copies the next chunk into the batch (the chunk may be reused once this returns); full batches are written. */
  write(chunk: Buffer): void {
    if (this.#failed || this.#ending !== undefined) return;
    let offset = 0;
    while (offset < chunk.length) {
      if (this.#batch === undefined) {
        this.#batch = this.#spare.pop() ?? Buffer.allocUnsafeSlow(this.#batchBytes);
        this.#batchFilled = 0;
      }
      const copied = chunk.copy(this.#batch, this.#batchFilled, offset);
      this.#batchFilled += copied;
      offset += copied;
      if (this.#batchFilled === this.#batchBytes) this.#queueBatch();
    }
    if (this.#queued.length > 0) this.#writeQueued();
  }

  /** Writes what is queued and closes the file; resolves whether every chunk was written. */
  end(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#ending = resolve;
      if (this.#failed) {
        this.#close();
        return;
      }
      if (this.#batchFilled > 0) this.#queueBatch();
      this.#writeQueued();
    });
  }

  #queueBatch(): void {
    const batch = this.#batch;
    if (batch === undefined) return;
    this.#queued.push(batch.subarray(0, this.#batchFilled));
    this.#queuedBytes += this.#batchFilled;
    this.#batch = undefined;
    this.#batchFilled = 0;
  }

  #writeQueued(): void {
    const descriptor = this.#descriptor;
    if (this.#writing || descriptor === undefined || this.#failed) return;
    if (this.#queued.length === 0) {
      if (this.#ending !== undefined) this.#close();
      return;
    }
    const batches = this.#queued;
    const bytes = this.#queuedBytes;
    this.#queued = [];
    this.#queuedBytes = 0;
    this.#writing = true;
    writev(descriptor, batches, (error, written) => {
      this.#writing = false;
      if (error !== null || written !== bytes) {
        this.#fail();
        return;
      }
      for (const batch of batches) {
        if (this.#spare.length < SPARE_BATCHES)
          this.#spare.push(Buffer.from(batch.buffer, batch.byteOffset, this.#batchBytes));
      }
      this.#writeQueued();
    });
  }

  #fail(): void {
    this.#failed = true;
    this.#batch = undefined;
    this.#batchFilled = 0;
    this.#queued = [];
    this.#queuedBytes = 0;
    if (this.#ending !== undefined) this.#close();
  }

  #close(): void {
    const ending = this.#ending;
    if (ending === undefined || this.#writing) return;
    this.#ending = undefined;
    const descriptor = this.#descriptor;
    this.#descriptor = undefined;
    const complete = !this.#failed;
    if (descriptor === undefined) {
      ending(complete);
      return;
    }
    close(descriptor, () => ending(complete));
  }
}
