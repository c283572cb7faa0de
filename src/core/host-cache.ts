import {
  closeSync,
  constants,
  lstatSync,
  openSync,
  readdirSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { readOwnedFile } from './owned-file.js';
import { makeOwnedDirectory } from './state-folders.js';

/**
 * Facts that are slow to find out and stable across processes (the real interpreter behind a version-manager shim,
 * whether bubblewrap works here), kept as small JSON files in a folder of the state folder that only this user can
 * enter. Every fact carries the key it was found under (what would change the fact: paths, sizes, modification
 * times, the kernel release...); a fact whose key differs, or a file that cannot be read, parsed or trusted, is
 * ignored. A file keeps the facts of the last few keys, so hosts that alternate (two projects whose folders choose
 * different interpreters, two installs of codecall) do not each throw the other's fact away.
 */

/** Name of the cache folder inside the state folder. */
export const HOST_CACHE_FOLDER = 'cache';
/** Largest cache file read; a bigger one is not an entry this code wrote. */
export const MAX_HOST_CACHE_BYTES = 4 * 1024 * 1024;
/** Facts kept in one entry file, the most recently stored first; older ones are dropped. */
export const MAX_HOST_CACHE_FACTS = 8;
/** Version of the entry format: entries of another version are ignored. */
const FORMAT_VERSION = 2;

/** One stored fact: the key it was found under, and its value. */
interface StoredFact {
  readonly key: unknown;
  readonly value: unknown;
}

/** The cache folder of a state folder, created private (0700) on first use; undefined when it cannot be trusted. */
export function hostCacheDirectory(stateRoot: string): string | undefined {
  const directory = join(stateRoot, HOST_CACHE_FOLDER);
  try {
    // What the cache holds is trusted (an interpreter path the host starts): no one else may write into the folder.
    if (!makeOwnedDirectory(directory, 0o700) || (lstatSync(directory).mode & 0o022) !== 0) return undefined;
    return directory;
  } catch {
    return undefined;
  }
}

/**
 * Reads the entry `name` and returns the value stored under exactly `key`; undefined otherwise (missing, corrupt,
 * stored under other keys only, not a regular file of this user, writable by others).
 */
export function readHostCache<Value>(directory: string, name: string, key: unknown): Value | undefined {
  const wanted = JSON.stringify(key);
  return readFacts(directory, name)?.find((fact) => JSON.stringify(fact.key) === wanted)?.value as Value | undefined;
}

/** The facts of the entry `name`, or undefined when there is no entry this code wrote and this user alone may. */
function readFacts(directory: string, name: string): readonly StoredFact[] | undefined {
  const bytes = readOwnedFile(join(directory, fileName(name)), MAX_HOST_CACHE_BYTES);
  if (bytes === undefined) return undefined;
  try {
    const entry: unknown = JSON.parse(bytes.toString('utf8'));
    if (typeof entry !== 'object' || entry === null) return undefined;
    const { version, facts } = entry as { version?: unknown; facts?: unknown };
    if (version !== FORMAT_VERSION || !Array.isArray(facts)) return undefined;
    return facts.filter((fact): fact is StoredFact => typeof fact === 'object' && fact !== null && 'key' in fact);
  } catch {
    return undefined;
  }
}

/**
 * Stores `value` under `key` in the entry `name`, first among the facts kept there (at most
 * {@link MAX_HOST_CACHE_FACTS}; one of the same key is replaced), atomically (a private temporary file renamed over the
 * entry), so a reader sees the old entry or the new one, never half of one. Two hosts storing at once may lose one of
 * the two facts: it is found out again. A failure to write is ignored: the cache only saves time.
 */
export function writeHostCache(directory: string, name: string, key: unknown, value: unknown): void {
  const stored = JSON.stringify(key);
  const kept = (readFacts(directory, name) ?? []).filter((fact) => JSON.stringify(fact.key) !== stored);
  const facts = [{ key, value }, ...kept].slice(0, MAX_HOST_CACHE_FACTS);
  const target = join(directory, fileName(name));
  const temporary = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  let descriptor: number | undefined;
  try {
    descriptor = openSync(
      temporary,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    writeSync(descriptor, JSON.stringify({ version: FORMAT_VERSION, facts }));
    closeSync(descriptor);
    descriptor = undefined;
    renameSync(temporary, target);
  } catch {
    if (descriptor !== undefined) closeSync(descriptor);
    try {
      unlinkSync(temporary);
    } catch {
      // Nothing was created.
    }
  }
}

/**
 * Keeps at most `keep` entries whose names start with `prefix` (a family of entries named after what they are for,
 * such as one per input): the least recently written ones go. Failures are ignored.
 */
export function trimHostCacheEntries(directory: string, prefix: string, keep: number): void {
  const start = fileName(prefix).slice(0, -'.json'.length);
  try {
    const entries = readdirSync(directory).filter((name) => name.startsWith(start) && name.endsWith('.json'));
    if (entries.length <= keep) return;
    const byAge = entries
      .map((name) => ({ name, modified: lstatSync(join(directory, name)).mtimeMs }))
      .sort((first, second) => second.modified - first.modified);
    for (const { name } of byAge.slice(keep)) unlinkSync(join(directory, name));
  } catch {
    // The cache only saves time.
  }
}

/**
 * What identifies a file's content for a cache key without reading it: device, inode, size, modification and change
 * times (following links); undefined when it does not exist.
 */
export function fileSignature(path: string): string | undefined {
  try {
    const stats = statSync(path, { bigint: true });
    return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`;
  } catch {
    return undefined;
  }
}

// Entry names are chosen by the code (never by a script), but keep them to one plain file name anyway.
function fileName(name: string): string {
  return `${name.replace(/[^A-Za-z0-9._-]/g, '_')}.json`;
}
