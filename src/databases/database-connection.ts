import type { QueryResult, TableDescription, TableEntry } from './query-result.js';

/** One statement as the script sends it. */
export interface StatementRequest {
  readonly sql: string;
  /** As the script passed it (checked and converted by the driver). */
  readonly params: unknown;
  /** Rows returned at most. */
  readonly maxRows: number;
}

/**
 * An open database, the same for every engine: each method runs within the database's statement timeout and stops
 * (cancelling the statement on the server, or terminating the SQLite worker) when `signal` aborts. Errors are plain
 * `Error`s whose message is meant for the script, before secrets are scrubbed.
 */
export interface DatabaseConnection {
  /** Runs one statement. */
  query(request: StatementRequest, signal: AbortSignal): Promise<QueryResult>;
  /** Tables and views, system ones left out. */
  tables(signal: AbortSignal): Promise<TableEntry[]>;
  /** Columns of one table or view. */
  describe(table: string, signal: AbortSignal): Promise<TableDescription>;
  /** Closes connections and threads; calls still running fail. */
  close(): Promise<void>;
}

/** The reason an aborted signal carries, as an error. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error('the tool call was stopped');
}

/** 30000 → "30 s", 1500 → "1500 ms". */
export function formatDuration(milliseconds: number): string {
  return milliseconds % 1000 === 0 ? `${milliseconds / 1000} s` : `${milliseconds} ms`;
}

/** Lets one request through at a time, in arrival order; a waiting request leaves the line when its signal aborts. */
export class RequestQueue {
  readonly #waiting: (() => void)[] = [];
  #busy = false;

  /** Resolves when it is the caller's turn; rejects with the abort reason if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    if (!this.#busy) {
      this.#busy = true;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onTurn = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        const index = this.#waiting.indexOf(onTurn);
        if (index >= 0) this.#waiting.splice(index, 1);
        reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(onTurn);
    });
  }

  /** Ends the current turn and starts the next waiting one. */
  release(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#busy = false;
    else next();
  }
}
