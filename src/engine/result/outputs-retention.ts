import type { Dirent } from 'node:fs';
import { lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CodecallError } from '../../core/errors.js';
import { checkKnownKeys, knownKeys } from '../../core/option-checks.js';

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

/** Least time between two prunes of one outputs folder: pruning is a listing, never a run's critical path. */
export const OUTPUTS_PRUNE_INTERVAL_MS = 10_000;

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
}

/** Bytes of one saved entry: a file, or a folder of files (artifacts are one level deep, written by the host). */
async function measureEntry(directory: string, entry: Dirent): Promise<SavedEntry | undefined> {
  const path = join(directory, entry.name);
  const stats = await lstat(path).catch(() => undefined);
  if (stats === undefined) return undefined;
  let bytes = stats.isFile() ? stats.size : 0;
  let modifiedMs = stats.mtimeMs;
  if (stats.isDirectory()) {
    const children = await readdir(path, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const child of children) {
      const childStats = await lstat(join(path, child.name)).catch(() => undefined);
      if (childStats === undefined) continue;
      bytes += childStats.isFile() ? childStats.size : 0;
      modifiedMs = Math.max(modifiedMs, childStats.mtimeMs);
    }
  }
  return { path, bytes, modifiedMs };
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
 * fits `maxRuns` and `maxBytes`. Removal never follows a link (`rm` removes a link, not its target).
 */
export async function pruneOutputs(
  outputsDirectory: string,
  retention: OutputsRetention,
  now: number = Date.now(),
): Promise<PruneReport> {
  const entries = await readdir(outputsDirectory, { withFileTypes: true }).catch(() => [] as Dirent[]);
  const measured: SavedEntry[] = [];
  for (const entry of entries) {
    const saved = await measureEntry(outputsDirectory, entry);
    if (saved !== undefined) measured.push(saved);
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
    await rm(saved.path, { recursive: true, force: true }).catch(() => {});
    removedBytes += saved.bytes;
  }
  return { removedEntries: removed.length, removedBytes, keptEntries: kept.length, keptBytes };
}

/**
 * Prunes one outputs folder after runs, in the background: at most one prune at a time and one per
 * {@link OUTPUTS_PRUNE_INTERVAL_MS}, so a burst of runs costs one listing, never a wait.
 */
export class OutputsPruner {
  readonly #directory: string;
  readonly #retention: OutputsRetention;
  #running: Promise<void> | undefined;
  #lastStartedAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;

  constructor(directory: string, retention: OutputsRetention) {
    this.#directory = directory;
    this.#retention = retention;
  }

  /** Asks for a prune soon; cheap to call after every run. */
  schedule(): void {
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

  /** Prunes now (waiting for a prune in progress first); resolves when done. */
  async pruneNow(): Promise<void> {
    await this.#running;
    this.#start();
    await this.#running;
  }

  /** Stops a scheduled prune; one in progress finishes. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  #start(): void {
    this.#lastStartedAt = performance.now();
    this.#running = pruneOutputs(this.#directory, this.#retention)
      .then(
        () => {},
        () => {},
      )
      .finally(() => {
        this.#running = undefined;
      });
  }
}
