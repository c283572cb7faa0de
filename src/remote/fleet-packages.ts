import { CodecallError } from '../core/errors.js';
import { importModule } from '../core/module-import.js';

/** The two optional packages a fleet needs, loaded on first use so that nothing else ever imports them. */
export interface FleetPackages {
  readonly bullmq: typeof import('bullmq');
  readonly ioredis: typeof import('ioredis');
}

let loaded: Promise<FleetPackages> | undefined;

/**
 * Loads `bullmq` and `ioredis` (optional peer dependencies), once.
 * @throws CodecallError `INVALID_CONFIG` naming the package to install when one is missing.
 */
export function loadFleetPackages(): Promise<FleetPackages> {
  loaded ??= Promise.all([
    importPackage<typeof import('bullmq')>('bullmq'),
    importPackage<typeof import('ioredis')>('ioredis'),
  ])
    .then(([bullmq, ioredis]) => ({ bullmq, ioredis }))
    .catch((error: unknown) => {
      loaded = undefined;
      throw error;
    });
  return loaded;
}

async function importPackage<T>(name: 'bullmq' | 'ioredis'): Promise<T> {
  try {
    return await importModule<T>(name);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new CodecallError(
        'INVALID_CONFIG',
        `remote runs need the package ${name}, which is not installed; install it beside codecall: npm install bullmq ioredis`,
        { package: name },
        { cause: error },
      );
    }
    throw error;
  }
}
