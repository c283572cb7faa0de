import { close, open, writev } from 'node:fs';

/**
 * Bytes gathered before the next write of a saved output: a script printing megabytes costs one trip to the thread
 * pool per MiB, not one per chunk read from its pipe (each a wake-up of a pool thread and of the event loop).
 */
export const SAVED_OUTPUT_BATCH_BYTES = 1 << 20;

/**
 * A new file (created exclusively, mode 0600) that takes chunks in order and writes them in batches of
 * `batchBytes`, one write at a time. Any failure (the file cannot be created, a write fails or writes short) ends the
 * writing: later chunks are dropped and {@link SavedOutputFile.end} says the file is not complete.
 */
export class SavedOutputFile {
  readonly #batchBytes: number;
  #descriptor: number | undefined;
  #queued: Buffer[] = [];
  #queuedBytes = 0;
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

  /** Queues the next chunk; it is written with the next batch (the caller must not change it). */
  write(chunk: Buffer): void {
    if (this.#failed || this.#ending !== undefined) return;
    this.#queued.push(chunk);
    this.#queuedBytes += chunk.length;
    if (this.#queuedBytes >= this.#batchBytes) this.#writeQueued();
  }

  /** Writes what is queued and closes the file; resolves whether every chunk was written. */
  end(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#ending = resolve;
      if (this.#failed) this.#close();
      else this.#writeQueued();
    });
  }

  #writeQueued(): void {
    const descriptor = this.#descriptor;
    if (this.#writing || descriptor === undefined || this.#failed) return;
    if (this.#queued.length === 0) {
      if (this.#ending !== undefined) this.#close();
      return;
    }
    const batch = this.#queued;
    const bytes = this.#queuedBytes;
    this.#queued = [];
    this.#queuedBytes = 0;
    this.#writing = true;
    writev(descriptor, batch, (error, written) => {
      this.#writing = false;
      if (error !== null || written !== bytes) this.#fail();
      else this.#writeQueued();
    });
  }

  #fail(): void {
    this.#failed = true;
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
