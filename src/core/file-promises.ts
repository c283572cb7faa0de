import type * as FilePromises from 'node:fs/promises';
import { createRequire } from 'node:module';

/**
 * `node:fs/promises`, loaded on first use. Loading it costs a one-shot `codecall run` more than a millisecond and
 * about ninety fresh pages before its launch (the module brings the directory, watcher and readline modules with it),
 * while a run whose caches are warm calls none of it before the launch, or at all. Modules that need a promise file
 * function ask for it here when they call it, not when they are loaded.
 */

let loaded: typeof FilePromises | undefined;

/** The `node:fs/promises` module, required the first time it is asked for. */
export function filePromises(): typeof FilePromises {
  loaded ??= createRequire(import.meta.url)('node:fs/promises') as typeof FilePromises;
  return loaded;
}
