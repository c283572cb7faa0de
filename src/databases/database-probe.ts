import type { ResolvedDatabase } from './database-config.js';
import { DATABASE_DRIVERS, scrubSecrets } from './database-config.js';
import { createDatabaseToolSource } from './database-tool-source.js';
import { errorMessage } from './query-result.js';

/** Time `codecall doctor` gives a database to answer. */
export const DATABASE_PROBE_TIMEOUT_MS = 15_000;

/** What `codecall doctor` says about one database. */
export interface DatabaseProbe {
  readonly ok: boolean;
  /** e.g. `SQLite /srv/data/sales.db, read-only: 3 tables or views` or `PostgreSQL ...: FAILED: ...`. */
  readonly text: string;
}

/**
 * Opens a database as its tools would, lists its tables, and closes it again: the driver is installed, the file is
 * there or the server answers, the credentials work. Never throws; the text has no password.
 */
export async function probeDatabase(database: ResolvedDatabase): Promise<DatabaseProbe> {
  const source = createDatabaseToolSource(database);
  const heading = `${DATABASE_DRIVERS[database.kind].engine} ${database.location}, ${
    database.readOnly ? 'read-only' : 'read-write'
  }`;
  try {
    const listing = await source.load();
    const tables = listing.tools.find((tool) => tool.descriptor.name === `${database.name}/tables`);
    if (tables === undefined) throw new Error('the database has no tables tool');
    const found = (await tables.invoke(
      {},
      {
        signal: AbortSignal.timeout(DATABASE_PROBE_TIMEOUT_MS),
        runId: 'doctor',
        toolName: tables.descriptor.name,
        artifactsDir: '',
      },
    )) as unknown[];
    const plural = found.length === 1 ? '' : 's';
    return { ok: true, text: `${heading}: ${found.length} table${plural} or view${plural}` };
  } catch (error) {
    const message = errorMessage(error);
    return {
      ok: false,
      text: `${heading}: FAILED: ${database.kind === 'postgres' ? scrubSecrets(message, database.secrets) : message}`,
    };
  } finally {
    await source.close();
  }
}
