/**
 * Idle buffers of one size, kept for whichever {@link ReplyBufferPool} lends one next: one list may serve every server
 * of the process, so a run finds the buffers the runs before it faulted in, and a burst finds those of the burst
 * before it. A buffer still holds the bytes its last reader left in it: one that goes to another pool than the one
 * that gave it back is zeroed first, so no run's file contents stay in memory another run's reads are lent.
 */
export class IdleBufferList {
  /** Bytes of each buffer. */
  readonly bufferBytes: number;
  readonly #maxBuffers: number;
  readonly #buffers: Buffer[] = [];
  /** The pool that gave each kept buffer back. */
  readonly #givenBackBy = new WeakMap<Buffer, object>();

  /** Keeps at most `maxBuffers` buffers of `bufferBytes` bytes each. */
  constructor(bufferBytes: number, maxBuffers: number) {
    this.bufferBytes = bufferBytes;
    this.#maxBuffers = maxBuffers;
  }

  /** Buffers kept now. */
  get size(): number {
    return this.#buffers.length;
  }

  /**
   * The buffer kept last (its pages most likely still in the cache), or none; zeroed when another pool than `taker`
   * gave it back.
   */
  take(taker: object): Buffer | undefined {
    const buffer = this.#buffers.pop();
    if (buffer !== undefined && this.#givenBackBy.get(buffer) !== taker) buffer.fill(0);
    return buffer;
  }

  /**
   * Keeps a buffer nothing refers to any more, given back by `giver`, unless the list is full (it is then left to the
   * collector).
   */
  keep(buffer: Buffer, giver: object): void {
    if (this.#buffers.length >= this.#maxBuffers) return;
    this.#givenBackBy.set(buffer, giver);
    this.#buffers.push(buffer);
  }
}

/** Someone waiting for a buffer (see {@link ReplyBufferPool.waitFor}): called with it, now lent to them. */
export type BufferWaiter = (buffer: Buffer) => void;

/**
 * Buffers of one size that a tool-call server lends to built-in tools reading into them (see `BufferedRead`) and takes
 * back once its socket has taken every byte of the reply: the next read reuses memory already in place. A fresh
 * buffer per read costs page faults (several µs each on a VM) and garbage collections of the whole heap driven by
 * the memory held outside it, more than reading the file itself. At most `maxLentBuffers` are lent at once; past
 * that, whoever wants one waits for one given back, in order.
 */
export class ReplyBufferPool {
  readonly #idle: IdleBufferList;
  readonly #maxLentBuffers: number;
  /** Buffers lent and not given back yet. */
  readonly #lent = new Set<Buffer>();
  /** Who waits for a buffer, oldest first (a Set keeps the order and forgets a waiter that stops waiting at once). */
  readonly #waiters = new Set<BufferWaiter>();
  #closed = false;

  /** Lends at most `maxLentBuffers` buffers at once, taken from and given back to `idle`. */
  constructor(idle: IdleBufferList, maxLentBuffers: number) {
    this.#idle = idle;
    this.#maxLentBuffers = maxLentBuffers;
  }

  /** Buffers lent and not given back yet. */
  get lentBuffers(): number {
    return this.#lent.size;
  }

  /** Waiters that have no buffer yet. */
  get waiters(): number {
    return this.#waiters.size;
  }

  /**
   * A buffer nothing else uses until it is given back (its old bytes still in it), reused or new; none when
   * `maxLentBuffers` are lent already, or someone waits for one before the caller (see {@link waitFor}).
   */
  take(): Buffer | undefined {
    if (this.#lent.size >= this.#maxLentBuffers || this.#waiters.size > 0) return undefined;
    const buffer = this.#idle.take(this) ?? Buffer.allocUnsafeSlow(this.#idle.bufferBytes);
    this.#lent.add(buffer);
    return buffer;
  }

  /**
   * Calls `waiter` with the next buffer given back, after those who waited before it; until then {@link cancel} stops
   * the wait. Waiters are dropped, never called, once the pool is closed.
   */
  waitFor(waiter: BufferWaiter): void {
    if (!this.#closed) this.#waiters.add(waiter);
  }

  /** Stops a wait of {@link waitFor} (it never gets a buffer); a waiter that was called or never waited is ignored. */
  cancel(waiter: BufferWaiter): void {
    this.#waiters.delete(waiter);
  }

  /**
   * Takes back a buffer from {@link take} (or handed to a waiter) that nothing reads or writes any more: the oldest
   * waiter gets it at once, else it goes back to the idle list. A buffer given back twice, or not lent by this pool, is
   * ignored.
   */
  give(buffer: Buffer): void {
    if (!this.#lent.delete(buffer) || this.#closed) return;
    for (const waiter of this.#waiters) {
      this.#waiters.delete(waiter);
      this.#lent.add(buffer);
      waiter(buffer);
      return;
    }
    this.#idle.keep(buffer, this);
  }

  /**
   * Ends the pool (the server ended): waiters are dropped, and buffers given back from now on (by a read still
   * running, or a write its destroyed socket dropped) are left to the collector, not kept for other servers.
   */
  close(): void {
    this.#closed = true;
    this.#waiters.clear();
  }
}
