/**
 * Buffers of one size that a tool-call server lends to built-in tools reading into them (see `BufferedRead`) and takes
 * back once its socket has taken every byte of the reply: the next read reuses memory already in place. A fresh
 * buffer per read costs page faults (several µs each on a VM) and garbage collections of the whole heap driven by
 * the memory held outside it, more than reading the file itself.
 */
export class ReplyBufferPool {
  readonly #bufferBytes: number;
  readonly #maxIdleBuffers: number;
  readonly #idle: Buffer[] = [];
  /** Buffers lent and not given back yet. */
  readonly #lent = new Set<Buffer>();
  #closed = false;

  /** Buffers of `bufferBytes` bytes each; at most `maxIdleBuffers` are kept while unused. */
  constructor(bufferBytes: number, maxIdleBuffers: number) {
    this.#bufferBytes = bufferBytes;
    this.#maxIdleBuffers = maxIdleBuffers;
  }

  /** Buffers lent and not given back yet. */
  get lentBuffers(): number {
    return this.#lent.size;
  }

  /** A buffer nothing else uses until it is given back (its old bytes still in it), reused or new. */
  take(): Buffer {
    const buffer = this.#idle.pop() ?? Buffer.allocUnsafeSlow(this.#bufferBytes);
    this.#lent.add(buffer);
    return buffer;
  }

  /**
   * Takes back a buffer from {@link take} that nothing reads or writes any more; it may be lent again at once. A
   * buffer given back twice, or not lent by this pool, is ignored.
   */
  give(buffer: Buffer): void {
    if (!this.#lent.delete(buffer)) return;
    if (!this.#closed && this.#idle.length < this.#maxIdleBuffers) this.#idle.push(buffer);
  }

  /** Drops the idle buffers for good (the server ended): buffers given back later are not kept either. */
  close(): void {
    this.#closed = true;
    this.#idle.length = 0;
  }
}
