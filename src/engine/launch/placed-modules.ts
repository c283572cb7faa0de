import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import type { GeneratedPythonModule } from '../../codegen/python-module.js';
import { fingerprint } from '../../core/fingerprint.js';
import { readHostCache, trimHostCacheEntries, writeHostCache } from '../../core/host-cache.js';

/**
 * Which module folder an earlier process placed for an exact input, kept in the host cache, so that a one-shot
 * process neither generates the module again nor reads the folder back to compare it byte for byte. A record is
 * found only under the whole input, compared in full (its fingerprint only names the entry), and used only while its
 * folder is the very directory it named then (device, inode, change time): a folder removed and made again under
 * the same name, maybe by content that shares its fingerprint (see `module-cache.ts`), is not the one recorded. The
 * input holds what decides the output: the generator's input, the interpreter, the modules folder and the code
 * that generates (the caller's to gather).
 */

/** Prefix of the host-cache entries of placed modules, one entry per fingerprint of the input. */
const ENTRY_PREFIX = 'placed-module-';
/** Records kept at most (tool lists that change, other interpreters): the least recently written go. */
const MAX_PLACED_RECORDS = 32;

/** A directory's identity: device, inode and change time; undefined when it is not a directory. */
function folderIdentity(folder: string): string | undefined {
  try {
    const stats = lstatSync(folder, { bigint: true });
    return stats.isDirectory() ? `${stats.dev}:${stats.ino}:${stats.ctimeNs}` : undefined;
  } catch {
    return undefined;
  }
}

/** A module folder placed for an input, and the module generated for it. */
export interface PlacedModule {
  readonly folder: string;
  readonly generated: GeneratedPythonModule;
}

function entryName(input: string): string {
  return `${ENTRY_PREFIX}${fingerprint([input])}`;
}

/** The record kept for exactly `input`, when its folder lies in `modulesRoot` and is still the one recorded. */
function findRecord(
  cacheDirectory: string,
  modulesRoot: string,
  input: string,
): { readonly folder: string; readonly record: Record<string, unknown> } | undefined {
  const value = readHostCache<unknown>(cacheDirectory, entryName(input), input);
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const { folder, identity } = record;
  if (typeof folder !== 'string' || dirname(folder) !== modulesRoot || typeof identity !== 'string') return undefined;
  return folderIdentity(folder) === identity ? { folder, record } : undefined;
}

function writeRecord(cacheDirectory: string, input: string, folder: string, extra: Record<string, unknown>): void {
  const identity = folderIdentity(folder);
  if (identity === undefined) return;
  writeHostCache(cacheDirectory, entryName(input), input, { folder, identity, ...extra });
  trimHostCacheEntries(cacheDirectory, ENTRY_PREFIX, MAX_PLACED_RECORDS);
}

/**
 * The module placed for exactly `input` in `modulesRoot` by an earlier process, while its folder is the one it
 * placed; undefined otherwise.
 */
export function findPlacedModule(cacheDirectory: string, modulesRoot: string, input: string): PlacedModule | undefined {
  const found = findRecord(cacheDirectory, modulesRoot, input);
  const generated = found?.record.generated;
  return found !== undefined && isGeneratedModule(generated) ? { folder: found.folder, generated } : undefined;
}

/** Records the folder placed (found identical, or written) for `input` and the module generated, for later processes. */
export function recordPlacedModule(cacheDirectory: string, input: string, placed: PlacedModule): void {
  writeRecord(cacheDirectory, input, placed.folder, { generated: placed.generated });
}

/** The folder placed for exactly `input` (files that need no generating: the shipped runtime), as {@link findPlacedModule}. */
export function findPlacedFolder(cacheDirectory: string, modulesRoot: string, input: string): string | undefined {
  return findRecord(cacheDirectory, modulesRoot, input)?.folder;
}

/** Records the folder placed for `input`, as {@link recordPlacedModule}. */
export function recordPlacedFolder(cacheDirectory: string, input: string, folder: string): void {
  writeRecord(cacheDirectory, input, folder, {});
}

function isGeneratedModule(value: unknown): value is GeneratedPythonModule {
  if (typeof value !== 'object' || value === null) return false;
  const { files, functions, submodules } = value as Record<string, unknown>;
  const allStrings = (item: unknown, keys: readonly string[]) =>
    typeof item === 'object' &&
    item !== null &&
    keys.every((key) => typeof (item as Record<string, unknown>)[key] === 'string');
  return (
    Array.isArray(files) &&
    files.every((file) => allStrings(file, ['path', 'content'])) &&
    Array.isArray(functions) &&
    functions.every((fn) => allStrings(fn, ['module', 'pythonName', 'wireName', 'signature', 'summary'])) &&
    Array.isArray(submodules) &&
    submodules.every((submodule) => allStrings(submodule, ['module', 'configuredName']))
  );
}
