/** A session as the slot table sees it. */
export interface SlotHolder {
  /** Whether it is running a cell or starting its interpreter (never evicted then). */
  readonly busy: boolean;
  /** A closed holder stops waiting for a slot. */
  readonly closed: boolean;
  /** Stops its interpreter to free the slot (the session stays usable; its next cell starts fresh). */
  evict(): Promise<void>;
}

/**
 * The live session interpreters of one codecall, capped: a session that needs an interpreter when all slots are
 * taken evicts the least recently used idle one, or waits until one is idle.
 */
export class SessionSlots {
  readonly #capacity: number;
  /** Holders in least-recently-used-first order (a Map keeps insertion order). */
  readonly #holders = new Map<SlotHolder, true>();
  #waiters: (() => void)[] = [];

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Sessions holding a slot now. */
  get size(): number {
    return this.#holders.size;
  }

  /** Takes a slot for `holder` (or marks it used when it has one), evicting or waiting as needed. */
  async acquire(holder: SlotHolder): Promise<void> {
    for (;;) {
      if (holder.closed) return;
      if (this.#holders.has(holder)) {
        this.touch(holder);
        return;
      }
      if (this.#holders.size < this.#capacity) {
        this.#holders.set(holder, true);
        return;
      }
      const victim = [...this.#holders.keys()].find((candidate) => !candidate.busy);
      if (victim !== undefined) {
        this.#holders.delete(victim);
        await victim.evict();
        continue;
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Marks `holder` as the most recently used. */
  touch(holder: SlotHolder): void {
    if (!this.#holders.delete(holder)) return;
    this.#holders.set(holder, true);
  }

  /** Frees the slot of `holder` (its interpreter is gone). */
  release(holder: SlotHolder): void {
    this.#holders.delete(holder);
    this.#wake();
  }

  /** Tells waiting sessions that a holder became idle, so it may be evicted now. */
  idle(): void {
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}
