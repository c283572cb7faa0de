import { Worker } from 'node:worker_threads';

/** Heap of the worker that runs a search's regular expression. */
export const SEARCH_WORKER_HEAP_MB = 256;

/** One matching line of a text. */
export interface LineMatch {
  /** 1-based line number. */
  readonly line: number;
  /** The line without its line ending, cut to the configured length. */
  readonly text: string;
}

/** Options of {@link startLineSearch}. */
export interface LineSearchOptions {
  /** The regular expression, already known to compile. */
  readonly pattern: RegExp;
  /** Longest line text returned; longer lines are cut and end with `…`. */
  readonly maxLineChars: number;
}

/** Outcome of searching one text: its matches, or `timedOut` when the deadline passed first. */
export type LineSearchOutcome =
  | { readonly timedOut: false; readonly matches: readonly LineMatch[] }
  | { readonly timedOut: true };

/** A regular-expression matcher running off the main thread. */
export interface LineSearch {
  /** Matches `text` line by line, returning at most `maxMatches`; gives up (and stops the worker) at `deadline`. */
  search(text: string, maxMatches: number, deadline: number): Promise<LineSearchOutcome>;
  /** Stops the worker. */
  close(): Promise<void>;
}

// The worker's code (CommonJS, run with eval): the expression comes from the script, so a catastrophically
// backtracking one must burn a worker that can be terminated, never the host's event loop.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const pattern = new RegExp(workerData.source, workerData.flags);
const maxLineChars = workerData.maxLineChars;
parentPort.on('message', ({ id, text, maxMatches }) => {
  const matches = [];
  let line = 0;
  let start = 0;
  while (start < text.length && matches.length < maxMatches) {
    let end = text.indexOf('\\n', start);
    if (end === -1) end = text.length;
    line += 1;
    let content = text.slice(start, end);
    if (content.endsWith('\\r')) content = content.slice(0, -1);
    if (pattern.test(content)) {
      matches.push({ line, text: content.length > maxLineChars ? content.slice(0, maxLineChars) + '\\u2026' : content });
    }
    start = end + 1;
  }
  parentPort.postMessage({ id, matches });
});
`;

/** Starts a worker thread that matches `pattern` against texts; close it when done. */
export function startLineSearch(options: LineSearchOptions): LineSearch {
  const { pattern, maxLineChars } = options;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { source: pattern.source, flags: pattern.flags.replace(/[gy]/g, ''), maxLineChars },
    resourceLimits: { maxOldGenerationSizeMb: SEARCH_WORKER_HEAP_MB },
    stdout: true,
    stderr: true,
  });
  worker.unref();
  let nextId = 0;
  let failure: Error | undefined;
  const pending = new Map<number, (outcome: LineSearchOutcome | Error) => void>();
  const failAll = (error: Error): void => {
    failure ??= error;
    for (const settle of pending.values()) settle(error);
    pending.clear();
  };
  worker.on('message', (message: { id: number; matches: LineMatch[] }) => {
    const settle = pending.get(message.id);
    pending.delete(message.id);
    settle?.({ timedOut: false, matches: message.matches });
  });
  worker.on('error', (error) => failAll(error));
  worker.on('exit', (code) => failAll(new Error(`the search worker stopped (exit code ${code})`)));

  return {
    async search(text, maxMatches, deadline) {
      if (failure !== undefined) throw failure;
      const id = nextId;
      nextId += 1;
      const outcome = await new Promise<LineSearchOutcome | Error>((resolve) => {
        const timer = setTimeout(
          () => {
            pending.delete(id);
            resolve({ timedOut: true });
          },
          Math.max(0, deadline - Date.now()),
        );
        pending.set(id, (result) => {
          clearTimeout(timer);
          resolve(result);
        });
        worker.postMessage({ id, text, maxMatches });
      });
      if (outcome instanceof Error) throw outcome;
      if (outcome.timedOut) await worker.terminate();
      return outcome;
    },
    async close() {
      pending.clear();
      await worker.terminate();
    },
  };
}
