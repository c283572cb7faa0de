import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CodecallError } from '../../core/errors.js';
import { readHostCache, writeHostCache } from '../../core/host-cache.js';
import { checkKnownKeys, knownKeys } from '../../core/option-checks.js';
import type { ExecuteResult } from '../../core/result.js';
import { nextTurn } from '../../core/waiting.js';

/**
 * What finished runs leave in the state folder's `outputs/` (full stdout files, artifacts) is kept within bounds:
 * entries older than `maxAgeMs` go, then the oldest until at most `maxRuns` entries and `maxBytes` remain.
 */
export interface OutputsRetention {
  /** Total bytes of saved outputs kept at most (default 512 MiB). */
  readonly maxBytes: number;
  /** Age after which a run's saved outputs are removed, in milliseconds (default 24 hours). */
  readonly maxAgeMs: number;
  /** Saved entries (a full stdout file or a run's artifacts folder) kept at most (default 500). */
  readonly maxRuns: number;
}

/** Defaults of {@link OutputsRetention}. */
export const DEFAULT_OUTPUTS_RETENTION: OutputsRetention = Object.freeze({
  maxBytes: 512 * 1024 * 1024,
  maxAgeMs: 24 * 60 * 60 * 1000,
  maxRuns: 500,
});

/**
 * Least time between two prunes of one outputs folder, by one process or by several in a row (one-shot commands):
 * pruning is a listing, never a run's critical path.
 */
export const OUTPUTS_PRUNE_INTERVAL_MS = 10_000;

/**
 * Most files a prune measures or removes in one turn of the event loop, by synchronous calls: a prune of 500 entries
 * costs its system calls, not ~2,000 round trips through the thread pool.
 */
export const PRUNE_FILES_PER_TURN = 32;

/**
 * Time after which a prune yields to the event loop even before {@link PRUNE_FILES_PER_TURN} files (a removal can
 * cost a hundred microseconds a file): with the entry in hand, a turn blocks the loop about a millisecond at most.
 */
export const PRUNE_TURN_MS = 0.5;

/** Entry of the host cache that records the last prune of an outputs folder (see {@link OutputsPruner}). */
export const OUTPUTS_PRUNE_STAMP = 'outputs-pruned';

const RETENTION_KEYS = knownKeys<keyof OutputsRetention>({ maxBytes: true, maxAgeMs: true, maxRuns: true });

/** Validates the `outputs` option (every field optional) and fills in the defaults. */
export function resolveOutputsRetention(value: unknown): OutputsRetention {
  if (value === undefined) return DEFAULT_OUTPUTS_RETENTION;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `"outputs" must be an object such as { "maxBytes": 536870912 }`, {
      value,
    });
  }
  checkKnownKeys(value, 'outputs', RETENTION_KEYS);
  const resolved: Record<string, number> = { ...DEFAULT_OUTPUTS_RETENTION };
  for (const [key, field] of Object.entries(value)) {
    if (field === undefined) continue;
    if (typeof field !== 'number' || !Number.isSafeInteger(field) || field < 0) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `outputs.${key} must be a whole number of ${key === 'maxAgeMs' ? 'milliseconds' : key === 'maxBytes' ? 'bytes' : 'entries'} ≥ 0 (got ${JSON.stringify(field)})`,
        { key, value: field },
      );
    }
    resolved[key] = field;
  }
  return resolved as unknown as OutputsRetention;
}

interface SavedEntry {
  readonly path: string;
  readonly bytes: number;
  readonly modifiedMs: number;
  /** Files looked at to measure it (the entry and, for a folder, its children): what removing it costs too. */
  readonly files: number;
}

/**
 * Bytes of one saved entry: a file, or a folder of files (artifacts are one level deep, written by the host). Never
 * follows a link: the entry and its children are measured with lstat.
 */
function measureEntry(directory: string, name: string): SavedEntry | undefined {
  const path = join(directory, name);
  let stats: ReturnType<typeof lstatSync>;
  try {
    stats = lstatSync(path);
  } catch {
    return undefined;
  }
  let bytes = stats.isFile() ? stats.size : 0;
  let modifiedMs = stats.mtimeMs;
  let files = 1;
  if (stats.isDirectory()) {
    let children: string[] = [];
    try {
      children = readdirSync(path);
    } catch {
      // Gone or unreadable: measured as an empty folder.
    }
    for (const child of children) {
      files += 1;
      let childStats: ReturnType<typeof lstatSync>;
      try {
        childStats = lstatSync(join(path, child));
      } catch {
        continue;
      }
      bytes += childStats.isFile() ? childStats.size : 0;
      modifiedMs = Math.max(modifiedMs, childStats.mtimeMs);
    }
  }
  return { path, bytes, modifiedMs, files };
}

/**
 * Counts the files a prune touched and the time it took since the last turn; yields to the event loop after
 * {@link PRUNE_FILES_PER_TURN} files or {@link PRUNE_TURN_MS}, whichever comes first.
 */
class TurnBudget {
  #files = 0;
  #sliceStartedAt = performance.now();

  async spend(files: number): Promise<void> {
    this.#files += files;
    if (this.#files < PRUNE_FILES_PER_TURN && performance.now() - this.#sliceStartedAt < PRUNE_TURN_MS) return;
    await nextTurn();
    this.#files = 0;
    this.#sliceStartedAt = performance.now();
  }
}

/** What one prune did. */
export interface PruneReport {
  readonly removedEntries: number;
  readonly removedBytes: number;
  readonly keptEntries: number;
  readonly keptBytes: number;
}

/**
 * Removes saved outputs past the retention: every entry older than `maxAgeMs`, then the oldest ones until the rest
 * fits `maxRuns` and `maxBytes`. Removal never follows a link (`rm` removes a link, not its target). The work is done
 * by synchronous calls in bounded slices of the event loop (see {@link PRUNE_FILES_PER_TURN}, {@link PRUNE_TURN_MS}).
 */
export async function pruneOutputs(
  outputsDirectory: string,
  retention: OutputsRetention,
  now: number = Date.now(),
): Promise<PruneReport> {
  let names: string[] = [];
  try {
    names = readdirSync(outputsDirectory);
  } catch {
    // No outputs folder yet: nothing to prune.
  }
  const budget = new TurnBudget();
  const measured: SavedEntry[] = [];
  for (const name of names) {
    const saved = measureEntry(outputsDirectory, name);
    if (saved !== undefined) measured.push(saved);
    await budget.spend(saved?.files ?? 1);
  }
  // Newest first: what is kept is a prefix.
  measured.sort((first, second) => second.modifiedMs - first.modifiedMs);
  const kept: SavedEntry[] = [];
  const removed: SavedEntry[] = [];
  let keptBytes = 0;
  for (const saved of measured) {
    const tooOld = now - saved.modifiedMs > retention.maxAgeMs;
    const tooMany = kept.length >= retention.maxRuns;
    const tooLarge = keptBytes + saved.bytes > retention.maxBytes;
    if (tooOld || tooMany || tooLarge) {
      removed.push(saved);
      continue;
    }
    kept.push(saved);
    keptBytes += saved.bytes;
  }
  let removedBytes = 0;
  for (const saved of removed) {
    try {
      rmSync(saved.path, { recursive: true, force: true });
    } catch {
      // Removed meanwhile, or not removable: the next prune tries again.
    }
    removedBytes += saved.bytes;
    await budget.spend(saved.files);
  }
  return { removedEntries: removed.length, removedBytes, keptEntries: kept.length, keptBytes };
}

/**
 * Whether a run or cell left something in the outputs folder: artifacts, a full stdout file, or artifacts it sent
 * that were dropped (their folder may remain).
 */
export function leftSavedOutputs(result: ExecuteResult): boolean {
  return (
    (result.artifacts?.length ?? 0) > 0 || result.stdoutTruncated !== undefined || result.artifactsNote !== undefined
  );
}

/** Options of {@link OutputsPruner}. */
export interface OutputsPrunerOptions {
  /**
   * The state folder's host-only cache folder: the time of the last prune of the outputs folder is recorded there, so
   * that processes in a row (one-shot commands) do not each list the folder. Without it, each process prunes alone.
   */
  readonly stampDirectory?: string | undefined;
}

/**
 * Prunes one outputs folder after runs, in the background: at most one prune at a time and one per
 * {@link OUTPUTS_PRUNE_INTERVAL_MS}, so a burst of runs costs one listing, never a wait. A prune is skipped when
 * another process (or this one) pruned the folder under the same retention less than the interval ago and no run of
 * this process saved anything since this process last started one; `close()` prunes only when a run saved something
 * after the last prune started, so what it saved is within bounds when `close()` resolves.
 */
export class OutputsPruner {
  readonly #directory: string;
  readonly #retention: OutputsRetention;
  readonly #stampDirectory: string | undefined;
  #running: Promise<void> | undefined;
  #lastStartedAt = Number.NEGATIVE_INFINITY;
  // A run or cell that left outputs finished after the last prune started: the next prune may not be skipped.
  #savedSinceStart = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(directory: string, retention: OutputsRetention, options: OutputsPrunerOptions = {}) {
    this.#directory = directory;
    this.#retention = retention;
    this.#stampDirectory = options.stampDirectory;
  }

  /**
   * A run or cell finished (or a session started its interpreter): asks for a prune soon; cheap to call after every
   * run. `saved` says it left something in the outputs folder (see {@link leftSavedOutputs}).
   */
  schedule(saved: boolean): void {
    if (saved) this.#savedSinceStart = true;
    if (this.#running !== undefined || this.#timer !== undefined) return;
    const wait = this.#lastStartedAt + OUTPUTS_PRUNE_INTERVAL_MS - performance.now();
    if (wait <= 0) {
      this.#start();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#start();
    }, wait);
    this.#timer.unref();
  }

  /**
   * Stops a scheduled prune and waits for one in progress; then prunes once more only when a run saved something
   * after the last prune started, or `options.saved` says something this pruner was not told of may have been saved
   * (a session's cells). Resolves when the folder is within bounds.
   */
  async close(options: { readonly saved?: boolean } = {}): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
    if (!this.#savedSinceStart && options.saved !== true) return;
    this.#start();
    await this.#running;
  }

  #start(): void {
    this.#lastStartedAt = performance.now();
    const saved = this.#savedSinceStart;
    this.#savedSinceStart = false;
    this.#running = this.#prune(saved)
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        this.#running = undefined;
      });
  }

  async #prune(saved: boolean): Promise<void> {
    const startedAt = Date.now();
    if (!saved && this.#prunedRecently(startedAt)) return;
    await pruneOutputs(this.#directory, this.#retention, startedAt);
    if (this.#stampDirectory !== undefined) {
      writeHostCache(this.#stampDirectory, OUTPUTS_PRUNE_STAMP, this.#stampKey(), startedAt);
    }
  }

  /** The recorded last prune started less than the interval ago; a stamp in the future or not a time is stale. */
  #prunedRecently(now: number): boolean {
    if (this.#stampDirectory === undefined) return false;
    const prunedAt = readHostCache<unknown>(this.#stampDirectory, OUTPUTS_PRUNE_STAMP, this.#stampKey());
    if (typeof prunedAt !== 'number' || !Number.isFinite(prunedAt) || prunedAt > now) return false;
    return now - prunedAt < OUTPUTS_PRUNE_INTERVAL_MS;
  }

  // A prune under another retention (or of another folder) does not stand for one under this retention.
  #stampKey(): unknown {
    const { maxBytes, maxAgeMs, maxRuns } = this.#retention;
    return { directory: this.#directory, maxBytes, maxAgeMs, maxRuns };
  }
}
