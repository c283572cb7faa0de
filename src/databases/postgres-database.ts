import { createConnection } from 'node:net';
import type { Pool, PoolClient } from 'pg';
import { importModule } from '../core/module-import.js';
import type { ResolvedPostgresDatabase } from './database-config.js';
import { missingDriverError } from './database-config.js';
import type { DatabaseConnection, StatementRequest } from './database-connection.js';
import { abortReason, formatDuration } from './database-connection.js';
import { POSTGRES_TYPES } from './postgres-values.js';
import { postgresParameters } from './query-parameters.js';
import type { ColumnEntry, QueryResult, TableDescription, TableEntry } from './query-result.js';
import { buildQueryResult, errorMessage, MAX_RESULT_BYTES, resultTooLargeMessage } from './query-result.js';

/** Connections one PostgreSQL database keeps at most (the script's concurrent calls share them). */
export const POSTGRES_MAX_CONNECTIONS = 4;
/** Time to open a connection (TCP, TLS and authentication) before the call fails. */
export const POSTGRES_CONNECT_TIMEOUT_MS = 10_000;
/** An unused connection is closed after this long. */
export const POSTGRES_IDLE_TIMEOUT_MS = 30_000;

/** Largest row count of an Execute message (a signed 32-bit integer). */
const MAX_PROTOCOL_ROWS = 2 ** 31 - 1;
/** The protocol's CancelRequest code (1234 in the high 16 bits, 5678 in the low). */
const CANCEL_REQUEST_CODE = 80_877_102;

/** SQLSTATE codes the tools explain in their own words. */
const SQLSTATE = {
  readOnlyTransaction: '25006',
  queryCanceled: '57014',
  syntaxError: '42601',
} as const;

const TABLES_SQL = `SELECT n.nspname AS schema, c.relname AS name,
  CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE 'table' END
FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'
  AND n.nspname NOT LIKE 'pg\\_temp%'
ORDER BY 1, 2`;
const DESCRIBE_SQL = `SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
  pg_catalog.pg_get_expr(d.adbin, d.adrelid), COALESCE(a.attnum = ANY (i.indkey), false)
FROM pg_catalog.pg_attribute AS a
LEFT JOIN pg_catalog.pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_catalog.pg_index AS i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`;

/** What pg reports for a statement run with `rowMode: 'array'`. */
interface ArrayResult {
  readonly fields: readonly { readonly name: string }[];
  readonly rows: readonly (readonly unknown[])[];
  readonly rowCount: number | null;
  readonly command: string | null;
}

/** What a cancel request needs of a connected pg client. */
interface CancelTarget {
  readonly host: string;
  readonly port: number;
  readonly processID: number;
  readonly secretKey: number;
}

/**
 * Asks the server to cancel what a connection is running: a CancelRequest on a new connection, as psql sends on
 * Ctrl-C. It needs no authentication and gets no answer; the cancelled statement fails with SQLSTATE 57014.
 */
function sendCancelRequest(target: CancelTarget): void {
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  packet.writeInt32BE(target.processID, 8);
  packet.writeInt32BE(target.secretKey, 12);
  const socket = target.host.startsWith('/')
    ? createConnection(`${target.host}/.s.PGSQL.${target.port}`)
    : createConnection(target.port, target.host);
  socket.on('error', () => undefined);
  socket.setTimeout(POSTGRES_CONNECT_TIMEOUT_MS, () => socket.destroy());
  socket.on('connect', () => socket.end(packet));
}

/** A pg `Query` that stops after its row limit (pg itself would page through every row). */
interface LimitedQuery {
  readonly truncated: boolean;
  /** Set when the rows grew past {@link MAX_RESULT_BYTES}: later rows were dropped as they came. */
  readonly tooLarge: boolean;
  /** Rows kept. */
  readonly rowCount: number;
  /** Called once when the result grows too large (to cancel the statement). */
  onTooLarge: (() => void) | undefined;
  on(event: 'end', listener: (result: ArrayResult) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
}

type LimitedQueryConstructor = new (config: {
  text: string;
  values: unknown[];
  rowMode: 'array';
  rows: number;
}) => LimitedQuery;

interface PgModule {
  readonly Pool: typeof Pool;
  readonly LimitedQuery: LimitedQueryConstructor;
}

let pgModule: Promise<PgModule> | undefined;

/** A statement whose rows grew past {@link MAX_RESULT_BYTES}. */
class ResultTooLargeError extends Error {}

/**
 * Loads pg (once) and derives the row-limited query from its `Query`.
 * @throws CodecallError `INVALID_CONFIG` naming `npm install pg` when pg is not installed.
 */
function loadPg(database: ResolvedPostgresDatabase): Promise<PgModule> {
  pgModule ??= importModule<typeof import('pg')>('pg').then(
    (module) => {
      const pg = module.default;
      // Internals of pg's Query (stable since pg 7; pg-cursor relies on the same ones).
      interface QueryInternals {
        rows: number;
        handleDataRow(message: { fields: (string | null)[] }): void;
        handlePortalSuspended(connection: { sync(): void }): void;
        handleError(error: Error, connection: { sync(): void }): void;
        prepare(connection: unknown): void;
      }
      const Base = pg.Query as unknown as new (config: object) => QueryInternals;
      class RowLimitedQuery extends Base {
        truncated = false;
        tooLarge = false;
        rowCount = 0;
        onTooLarge: (() => void) | undefined;
        #bytes = 0;
        #preparing = false;
        // Rows are weighed as they arrive; past the budget they are dropped and the statement is cancelled.
        override handleDataRow(message: { fields: (string | null)[] }): void {
          if (this.tooLarge) return;
          for (const field of message.fields) this.#bytes += field === null ? 4 : field.length + 2;
          if (this.#bytes > MAX_RESULT_BYTES) {
            this.tooLarge = true;
            this.onTooLarge?.();
            return;
          }
          this.rowCount += 1;
          super.handleDataRow(message);
        }
        // The portal has more rows than asked for: end the exchange instead of fetching the next page.
        override handlePortalSuspended(connection: { sync(): void }): void {
          this.truncated = true;
          connection.sync();
        }
        // With a row limit pg sends no Sync after Execute, so after an error the server waits for one.
        override handleError(error: Error, connection: { sync(): void }): void {
          if (!this.#preparing) connection.sync();
          super.handleError(error, connection);
        }
        override prepare(connection: unknown): void {
          this.#preparing = true;
          try {
            super.prepare(connection);
          } finally {
            this.#preparing = false;
          }
        }
      }
      return {
        Pool: pg.Pool,
        LimitedQuery: RowLimitedQuery as unknown as LimitedQueryConstructor,
      };
    },
    () => {
      pgModule = undefined;
      throw missingDriverError(database);
    },
  );
  return pgModule;
}

/**
 * Opens a PostgreSQL database: a small pool of connections, made on first use. Every statement runs in its own
 * transaction — `BEGIN READ ONLY` and rolled back for a read-only database, committed otherwise — with
 * `SET LOCAL statement_timeout`; when the call's signal aborts, the statement is cancelled on the server.
 */
export async function openPostgresDatabase(database: ResolvedPostgresDatabase): Promise<DatabaseConnection> {
  return new PostgresDatabase(database, await loadPg(database));
}

class PostgresDatabase implements DatabaseConnection {
  readonly #database: ResolvedPostgresDatabase;
  readonly #pg: PgModule;
  #pool: Pool | undefined;
  #closed = false;

  constructor(database: ResolvedPostgresDatabase, pg: PgModule) {
    this.#database = database;
    this.#pg = pg;
  }

  async query(request: StatementRequest, signal: AbortSignal): Promise<QueryResult> {
    const values = postgresParameters(request.params);
    const { result, truncated } = await this.#run(request.sql, values, request.maxRows, signal);
    const rows = truncated ? result.rows.slice(0, request.maxRows) : result.rows;
    return buildQueryResult({
      columnNames: result.fields.map((field) => field.name),
      rows,
      rowCount: result.fields.length === 0 ? (result.rowCount ?? 0) : rows.length,
      truncated,
    });
  }

  async tables(signal: AbortSignal): Promise<TableEntry[]> {
    const { result } = await this.#run(TABLES_SQL, [], MAX_PROTOCOL_ROWS, signal);
    return result.rows.map(([schema, name, type]) => ({
      schema: String(schema),
      name: String(name),
      type: String(type),
    }));
  }

  async describe(table: string, signal: AbortSignal): Promise<TableDescription> {
    let rows: readonly (readonly unknown[])[];
    try {
      ({
        result: { rows },
      } = await this.#run(DESCRIBE_SQL, [table], MAX_PROTOCOL_ROWS, signal));
    } catch (error) {
      // to_regclass refuses a name that is not even an identifier, e.g. 'a.b.c.d'.
      if (signal.aborted) throw error;
      rows = [];
    }
    if (rows.length === 0) {
      throw new Error(
        `no table or view named ${JSON.stringify(table)} (a name like "orders" or "sales.orders"; tables() lists them)`,
      );
    }
    const columns: ColumnEntry[] = rows.map(([name, type, nullable, defaultValue, primaryKey]) => ({
      name: String(name),
      type: String(type),
      nullable: nullable === true,
      default: typeof defaultValue === 'string' ? defaultValue : null,
      primaryKey: primaryKey === true,
    }));
    return { table, columns };
  }

  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.end();
  }

  #open(): Pool {
    if (this.#pool === undefined) {
      const pool = new this.#pg.Pool({
        connectionString: this.#database.url,
        max: POSTGRES_MAX_CONNECTIONS,
        connectionTimeoutMillis: POSTGRES_CONNECT_TIMEOUT_MS,
        idleTimeoutMillis: POSTGRES_IDLE_TIMEOUT_MS,
        allowExitOnIdle: true,
        application_name: 'codecall',
        types: POSTGRES_TYPES as never,
      });
      // An idle connection that breaks (server restart) is dropped by the pool; without a listener it would throw.
      pool.on('error', () => undefined);
      this.#pool = pool;
    }
    return this.#pool;
  }

  /** Runs one statement in a transaction of its own and ends the transaction (rollback when read-only). */
  async #run(
    sql: string,
    values: unknown[],
    maxRows: number,
    signal: AbortSignal,
  ): Promise<{ result: ArrayResult; truncated: boolean }> {
    if (this.#closed) throw new Error(`database "${this.#database.name}" was closed`);
    if (signal.aborted) throw abortReason(signal);
    const pg = this.#pg;
    const client = await this.#connect(this.#open(), signal);
    // A checked-out connection that breaks emits 'error' on the client: the query's rejection reports it.
    const ignoreClientError = (): void => undefined;
    client.on('error', ignoreClientError);
    let broken = false;
    try {
      const readOnly = this.#database.readOnly;
      await client.query(
        `BEGIN${readOnly ? ' READ ONLY' : ''}; SET LOCAL statement_timeout = ${this.#database.statementTimeoutMs}; ` +
          "SET LOCAL datestyle = 'ISO, YMD'; SET LOCAL bytea_output = 'hex'",
      );
      // One row more than asked for tells whether there were more; the protocol counts rows in 32 bits.
      const rows = Math.min(maxRows + 1, MAX_PROTOCOL_ROWS);
      const query = new pg.LimitedQuery({ text: sql, values, rowMode: 'array', rows });
      let result: ArrayResult;
      try {
        result = await this.#execute(client, query, signal);
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw query.tooLarge ? new ResultTooLargeError(resultTooLargeMessage(query.rowCount)) : error;
      }
      if (query.tooLarge) {
        // The cancel may land on what runs next on this connection: it is not given to another call.
        broken = true;
        await client.query('ROLLBACK').catch(() => undefined);
        throw new ResultTooLargeError(resultTooLargeMessage(query.rowCount));
      }
      await client.query(readOnly ? 'ROLLBACK' : 'COMMIT');
      return { result, truncated: query.truncated };
    } catch (error) {
      if (error instanceof ResultTooLargeError) {
        broken = true;
        throw error;
      }
      // After a cancel the connection might still be finishing something: it is not given to the next call.
      if (signal.aborted) {
        broken = true;
        throw abortReason(signal);
      }
      throw this.#explain(error);
    } finally {
      client.off('error', ignoreClientError);
      client.release(broken);
    }
  }

  /** Resolves with the statement's result; when `signal` aborts, cancels the statement on the server first. */
  #execute(client: PoolClient, query: LimitedQuery, signal: AbortSignal): Promise<ArrayResult> {
    return new Promise<ArrayResult>((resolve, reject) => {
      const onAbort = (): void => sendCancelRequest(client as unknown as CancelTarget);
      query.onTooLarge = onAbort;
      query.on('end', (result) => {
        signal.removeEventListener('abort', onAbort);
        resolve(result);
      });
      query.on('error', (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      });
      signal.addEventListener('abort', onAbort, { once: true });
      client.query(query as never);
    });
  }

  /** A pooled connection; when `signal` aborts first, the call stops waiting and the connection goes back unused. */
  #connect(pool: Pool, signal: AbortSignal): Promise<PoolClient> {
    return new Promise<PoolClient>((resolve, reject) => {
      const onAbort = (): void => reject(abortReason(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      pool.connect().then(
        (client) => {
          signal.removeEventListener('abort', onAbort);
          if (signal.aborted) client.release();
          else resolve(client);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(this.#connectionError(error));
        },
      );
    });
  }

  #connectionError(error: unknown): Error {
    const code = (error as { code?: unknown }).code;
    const message = errorMessage(error);
    // Node reports a refused connection to every address of a host as an AggregateError without a message.
    const reason = message === '' ? String(code ?? 'unknown error') : message;
    return new Error(`cannot connect to ${this.#database.location}: ${reason}`);
  }

  #explain(error: unknown): Error {
    const code = (error as { code?: unknown }).code;
    const message = errorMessage(error);
    if (code === SQLSTATE.readOnlyTransaction) {
      return new Error(
        `database "${this.#database.name}" is read-only: ${message} (write access is opted into with ` +
          '"readOnly": false in its configuration)',
      );
    }
    if (code === SQLSTATE.queryCanceled && /statement timeout/.test(message)) {
      return new Error(
        `the statement ran longer than ${formatDuration(this.#database.statementTimeoutMs)} (statementTimeoutMs of database ` +
          `"${this.#database.name}") and was cancelled`,
      );
    }
    if (code === SQLSTATE.syntaxError && /multiple commands/.test(message)) {
      return new Error(
        'query runs one SQL statement per call, and this text holds several; send them one call at a time',
      );
    }
    return error instanceof Error ? error : new Error(message);
  }
}
