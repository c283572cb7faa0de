/** Options of {@link SearchBudget}. */
export interface SearchBudgetOptions {
  /** Searches of one run that work at once; the others wait their turn, in order. */
  readonly maxConcurrentPerRun: number;
  /** Host time the searches of one run (or session) may take together before they must wait for it to refill. */
  readonly timePerRunMs: number;
  /**
   * Search time a run gets back per millisecond that passes (0.2: one second every five), so a long session is not
   * refused forever while a flood still costs the host at most this share of a thread once the budget is spent.
   */
  readonly refillRatio: number;
  /** Time one search may take, in milliseconds. */
  readonly callTimeoutMs: number;
  /** Runs whose spent time is remembered; past it the least recently used idle ones are forgotten. */
  readonly maxRememberedRuns: number;
}

/** One search's turn: it may work until `deadline`, then must call `end`. */
export interface SearchTurn {
  /** `Date.now()` time the search must stop at: its own time limit or what is left of its run's, whichever is first. */
  readonly deadline: number;
  /** True when the run's remaining time, not the per-call limit, set the deadline. */
  readonly limitedByRun: boolean;
  /** Records the time the turn took and lets the next waiting search of the run start. Idempotent. */
  end(): void;
}

/** Why a search could not start. */
export type SearchRefusal = 'cancelled' | 'exhausted';

/** Thrown by {@link SearchBudget.begin} when the call was cancelled while waiting, or its run has no time left. */
export class SearchRefusedError extends Error {
  readonly reason: SearchRefusal;
  constructor(reason: SearchRefusal, message: string) {
    super(message);
    this.name = 'SearchRefusedError';
    this.reason = reason;
  }
}

/** A search waiting for its run's turn. */
type Waiter = () => void;

interface RunAccount {
  running: number;
  /** Search time spent and not yet refilled, as of `updatedAt`. */
  spentMs: number;
  /** `performance.now()` when `spentMs` was last brought up to date. */
  updatedAt: number;
  readonly waiting: Waiter[];
}

/** Search time left below which a run is refused: a turn shorter than this could not do anything useful. */
const MIN_TURN_MS = 1;

/**
 * Host work the searches of each run may do: a few at once per run (the rest queue), and a time budget per run that
 * refills slowly, so a script firing many expensive searches costs the host at most a few threads for a bounded
 * time, and its waiting searches give up when their call is cancelled (the run ended, the call timed out).
 */
export class SearchBudget {
  readonly #options: SearchBudgetOptions;
  // Insertion order is use order: an account is moved to the end on each use, so the first ones are the oldest.
  readonly #accounts = new Map<string, RunAccount>();

  constructor(options: SearchBudgetOptions) {
    this.#options = options;
  }

  /** Milliseconds of search time the run has left now. */
  remainingMs(runId: string): number {
    const account = this.#accounts.get(runId);
    if (account !== undefined) this.#refill(account);
    return Math.max(0, this.#options.timePerRunMs - (account?.spentMs ?? 0));
  }

  /** Searches of the run working now, and waiting. */
  activity(runId: string): { readonly running: number; readonly waiting: number } {
    const account = this.#accounts.get(runId);
    return { running: account?.running ?? 0, waiting: account?.waiting.length ?? 0 };
  }

  /**
   * Waits for the run's turn. Rejects with {@link SearchRefusedError} when `signal` fires first, or when the run has
   * spent its time.
   */
  begin(runId: string, signal: AbortSignal): Promise<SearchTurn> {
    const account = this.#account(runId);
    if (signal.aborted) return Promise.reject(cancelled());
    if (this.#exhausted(account)) return Promise.reject(this.#exhaustedError());
    if (account.running < this.#options.maxConcurrentPerRun && account.waiting.length === 0) {
      return Promise.resolve(this.#startTurn(runId, account));
    }
    return new Promise<SearchTurn>((resolve, reject) => {
      const onAbort = (): void => {
        const index = account.waiting.indexOf(waiter);
        if (index !== -1) account.waiting.splice(index, 1);
        reject(cancelled());
      };
      const waiter: Waiter = () => {
        signal.removeEventListener('abort', onAbort);
        if (this.#exhausted(account)) reject(this.#exhaustedError());
        else resolve(this.#startTurn(runId, account));
      };
      account.waiting.push(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #startTurn(runId: string, account: RunAccount): SearchTurn {
    account.running += 1;
    const started = performance.now();
    const left = this.#options.timePerRunMs - account.spentMs;
    let ended = false;
    return {
      deadline: Date.now() + Math.min(left, this.#options.callTimeoutMs),
      limitedByRun: left < this.#options.callTimeoutMs,
      end: () => {
        if (ended) return;
        ended = true;
        this.#refill(account);
        account.running -= 1;
        account.spentMs += performance.now() - started;
        this.#startWaiting(account);
        this.#forgetOldest(runId);
      },
    };
  }

  #startWaiting(account: RunAccount): void {
    while (account.running < this.#options.maxConcurrentPerRun && account.waiting.length > 0) {
      (account.waiting.shift() as Waiter)();
    }
  }

  #exhausted(account: RunAccount): boolean {
    this.#refill(account);
    return this.#options.timePerRunMs - account.spentMs < MIN_TURN_MS;
  }

  #refill(account: RunAccount): void {
    const now = performance.now();
    account.spentMs = Math.max(0, account.spentMs - (now - account.updatedAt) * this.#options.refillRatio);
    account.updatedAt = now;
  }

  #account(runId: string): RunAccount {
    let account = this.#accounts.get(runId);
    if (account === undefined) account = { running: 0, spentMs: 0, updatedAt: performance.now(), waiting: [] };
    else this.#accounts.delete(runId);
    this.#accounts.set(runId, account);
    this.#forgetOldest(runId);
    return account;
  }

  // Only idle accounts are forgotten (a busy one still has searches to account for).
  #forgetOldest(keep: string): void {
    if (this.#accounts.size <= this.#options.maxRememberedRuns) return;
    for (const [runId, account] of this.#accounts) {
      if (this.#accounts.size <= this.#options.maxRememberedRuns) return;
      if (runId !== keep && account.running === 0 && account.waiting.length === 0) this.#accounts.delete(runId);
    }
  }

  #exhaustedError(): SearchRefusedError {
    const refill = this.#options.refillRatio > 0 ? `; it comes back at ${formatRatio(this.#options.refillRatio)}` : '';
    return new SearchRefusedError(
      'exhausted',
      `this run has used its ${this.#options.timePerRunMs / 1000} s of search time${refill}: search a narrower path ` +
        'with a simpler pattern, or read the files with read_file',
    );
  }
}

function cancelled(): SearchRefusedError {
  return new SearchRefusedError('cancelled', 'the call was cancelled before its search could start');
}

function formatRatio(ratio: number): string {
  return ratio >= 1 ? 'the rate time passes' : `1 s every ${Number((1 / ratio).toFixed(1))} s`;
}
