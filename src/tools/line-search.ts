import { createRequire } from 'node:module';

/** Heap of the worker that runs a search's regular expression. */
export const SEARCH_WORKER_HEAP_MB = 256;

/** One matching line of a text. */
export interface LineMatch {
  /** 1-based line number. */
  readonly line: number;
  /** The line without its line ending, cut to the configured length. */
  readonly text: string;
}

/**
 * How a search matches: `linear` is V8's non-backtracking engine (time linear in the text, whatever the pattern),
 * `backtracking` the usual one, for what the linear engine cannot run (backreferences, lookaround, the `u` flag).
 */
export type RegExpEngine = 'linear' | 'backtracking';

/** Options of {@link startLineSearch}. */
export interface LineSearchOptions {
  /** The regular expression, already known to compile. */
  readonly pattern: RegExp;
  /** Longest line text returned; longer lines are cut and end with `…`. */
  readonly maxLineChars: number;
  /** Stops the worker at once when it fires: a search in progress then rejects. */
  readonly signal?: AbortSignal;
}

/** Outcome of searching one text: its matches, or `timedOut` when the deadline passed first. */
export type LineSearchOutcome =
  | { readonly timedOut: false; readonly matches: readonly LineMatch[] }
  | { readonly timedOut: true };

/** A regular-expression matcher running off the main thread. */
export interface LineSearch {
  /** The engine the pattern runs on. */
  readonly engine: RegExpEngine;
  /** Matches `text` line by line, returning at most `maxMatches`; gives up (and stops the worker) at `deadline`. */
  search(text: string, maxMatches: number, deadline: number): Promise<LineSearchOutcome>;
  /** Stops the worker. */
  close(): Promise<void>;
}

// The worker's code (CommonJS, run with eval): the expression comes from the script, so one the linear engine cannot
// run and that backtracks catastrophically must burn a worker that can be terminated, never the host's event loop.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const pattern = new RegExp(workerData.source, workerData.flags);
const maxLineChars = workerData.maxLineChars;
const lowerCase = workerData.lowerCaseText;
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
    if (pattern.test(lowerCase ? content.toLowerCase() : content)) {
      matches.push({ line, text: content.length > maxLineChars ? content.slice(0, maxLineChars) + '\\u2026' : content });
    }
    start = end + 1;
  }
  parentPort.postMessage({ id, matches });
});
`;

/** What the worker compiles: the pattern's source and flags, and whether lines are lower-cased before matching. */
interface CompiledForm {
  readonly source: string;
  readonly flags: string;
  readonly lowerCaseText: boolean;
  readonly engine: RegExpEngine;
}

const require = createRequire(import.meta.url);

/**
 * `node:worker_threads`, loaded by the first search: the modules it brings (workers, messaging, `node:v8`) are
 * several milliseconds of every one-shot run's start, and most runs search nothing.
 */
function workerThreads(): typeof import('node:worker_threads') {
  return require('node:worker_threads') as typeof import('node:worker_threads');
}

/** Starts a worker thread that matches `pattern` against texts; close it when done. */
export function startLineSearch(options: LineSearchOptions): LineSearch {
  const { pattern, maxLineChars, signal } = options;
  const form = compiledForm(pattern);
  const worker = new (workerThreads().Worker)(WORKER_SOURCE, {
    eval: true,
    workerData: { source: form.source, flags: form.flags, lowerCaseText: form.lowerCaseText, maxLineChars },
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
  // The call was cancelled (its run ended): stop matching now, not at the deadline.
  const onAbort = (): void => {
    failAll(new Error('the search was cancelled'));
    void worker.terminate();
  };
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });

  return {
    engine: form.engine,
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
      signal?.removeEventListener('abort', onAbort);
      pending.clear();
      await worker.terminate();
    },
  };
}

/**
 * The engine `pattern` will run on in {@link startLineSearch}: `linear` when V8's non-backtracking engine can run it
 * (possibly lower-casing lines instead of the `i` flag, which that engine lacks).
 */
export function regExpEngineFor(pattern: RegExp): RegExpEngine {
  return compiledForm(pattern).engine;
}

function compiledForm(pattern: RegExp): CompiledForm {
  const flags = pattern.flags.replace(/[gy]/g, '');
  const backtracking: CompiledForm = { source: pattern.source, flags, lowerCaseText: false, engine: 'backtracking' };
  if (!linearEngineAvailable()) return backtracking;
  if (!flags.includes('i')) {
    return compiles(pattern.source, `${flags}l`)
      ? { source: pattern.source, flags: `${flags}l`, lowerCaseText: false, engine: 'linear' }
      : backtracking;
  }
  const lowered = lowerCasePattern(pattern.source);
  const linearFlags = `${flags.replace('i', '')}l`;
  if (lowered === undefined || !compiles(lowered, linearFlags)) return backtracking;
  return { source: lowered, flags: linearFlags, lowerCaseText: true, engine: 'linear' };
}

let linearEngine: boolean | undefined;

// V8's linear-time engine (the `l` flag) is behind a flag. Turning it on only makes the `l` flag legal: no other
// regular expression of the process changes engine.
function linearEngineAvailable(): boolean {
  if (linearEngine === undefined) {
    linearEngine = compiles('a', 'l');
    if (!linearEngine) {
      (require('node:v8') as typeof import('node:v8')).setFlagsFromString('--enable-experimental-regexp-engine');
      linearEngine = compiles('a', 'l');
    }
  }
  return linearEngine;
}

function compiles(source: string, flags: string): boolean {
  try {
    new RegExp(source, flags);
    return true;
  } catch {
    return false;
  }
}

/**
 * Case-insensitive matching for the linear engine, which lacks the `i` flag: lines are lower-cased and so are the
 * pattern's letters. Only where that keeps the pattern's meaning: undefined for escapes that name a character by code
 * or a group by name (`\x41`, `\u0041`, `\cJ`, `\k<Name>`), for class ranges mixing letters of different case or
 * letters and other characters (`[A-z]`, `[0-Z]`), and for characters outside the Basic Multilingual Plane or whose
 * lower case is longer.
 */
export function lowerCasePattern(source: string): string | undefined {
  let result = '';
  let inClass = false;
  for (let index = 0; index < source.length; index += 1) {
    const character = source[index] as string;
    if (character === '\\') {
      const next = source[index + 1] ?? '';
      if (next === 'x' || next === 'u' || next === 'c' || next === 'k' || isSurrogate(next)) return undefined;
      result += character + next;
      index += 1;
      continue;
    }
    if (isSurrogate(character)) return undefined;
    if (inClass) {
      if (character === ']') inClass = false;
      else if (character === '-' && result.at(-1) !== '[' && source[index + 1] !== ']') {
        if (!sameCaseKind(source[index - 1] ?? '', source[index + 1] ?? '')) return undefined;
      }
    } else if (character === '[') {
      inClass = true;
      // `[]` and `[^]` are complete classes in JavaScript: a `]` right after the opening never belongs to it.
    }
    const lower = character.toLowerCase();
    if (lower.length !== 1) return undefined;
    result += lower;
  }
  return result;
}

function isSurrogate(character: string): boolean {
  const code = character.charCodeAt(0);
  return code >= 0xd800 && code <= 0xdfff;
}

// Both ends of a class range are upper-case letters, or both lower-case, or neither is a letter.
function sameCaseKind(from: string, to: string): boolean {
  const kind = (character: string): 'upper' | 'lower' | 'other' =>
    character.toLowerCase() !== character ? 'upper' : character.toUpperCase() !== character ? 'lower' : 'other';
  return kind(from) === kind(to);
}
