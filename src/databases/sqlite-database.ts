import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { ResolvedSqliteDatabase } from './database-config.js';
import { missingDriverError } from './database-config.js';
import type { DatabaseConnection, StatementRequest } from './database-connection.js';
import { abortReason, formatDuration, RequestQueue } from './database-connection.js';
import { sqliteParameters } from './query-parameters.js';
import type { ColumnEntry, QueryResult, TableDescription, TableEntry } from './query-result.js';
import { buildQueryResult, MAX_RESULT_BYTES, resultTooLargeMessage } from './query-result.js';
import type { SqliteReply, SqliteRequest, SqliteWorkerData } from './sqlite-worker.js';
import { SQLITE_WORKER_SOURCE } from './sqlite-worker.js';

/**
 * Largest SQLite file codecall opens: sql.js (SQLite compiled to WebAssembly) reads the whole file into memory, so
 * a bigger database belongs on a server.
 */
export const SQLITE_MAX_FILE_BYTES = 256 * 1024 * 1024;
/** Prepared statements kept per SQLite database, by SQL text (a loop of the same query prepares it once). */
export const SQLITE_STATEMENT_CACHE_SIZE = 64;

const require = createRequire(import.meta.url);

const TABLES_SQL = `SELECT 'main' AS schema, name, type FROM sqlite_schema
WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`;
const DESCRIBE_SQL = `SELECT p.name, p.type, NOT p."notnull" AS nullable, p.dflt_value AS "default", p.pk > 0 AS pk
FROM sqlite_schema AS s, pragma_table_info(s.name) AS p
WHERE s.type IN ('table', 'view') AND s.name = ? COLLATE NOCASE ORDER BY p.cid`;

/**
 * Opens a SQLite database file through sql.js in a worker thread of its own. Nothing is read until the first
 * statement; the file is read again whenever it changed (inode, size, mtime or ctime) since it was last read.
 * @throws CodecallError `INVALID_CONFIG` when sql.js is not installed.
 */
export function openSqliteDatabase(database: ResolvedSqliteDatabase): DatabaseConnection {
  let sqlJsPath: string;
  try {
    sqlJsPath = require.resolve('sql.js');
  } catch {
    throw missingDriverError(database);
  }
  return new SqliteDatabase(database, sqlJsPath);
}

interface PendingRequest {
  readonly id: number;
  resolve(reply: SqliteReply): void;
  reject(error: unknown): void;
}

interface LiveWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
}

class SqliteDatabase implements DatabaseConnection {
  readonly #database: ResolvedSqliteDatabase;
  readonly #workerData: SqliteWorkerData;
  readonly #queue = new RequestQueue();
  #live: LiveWorker | undefined;
  #pending: PendingRequest | undefined;
  #nextId = 1;
  #closed = false;

  constructor(database: ResolvedSqliteDatabase, sqlJsPath: string) {
    this.#database = database;
    this.#workerData = {
      sqlJsPath,
      path: database.path,
      maxFileBytes: SQLITE_MAX_FILE_BYTES,
      readOnly: database.readOnly,
      statementCacheSize: SQLITE_STATEMENT_CACHE_SIZE,
      maxResultBytes: MAX_RESULT_BYTES,
      resultTooLargeMessage: resultTooLargeMessage('{rows}'),
    };
  }

  async query(request: StatementRequest, signal: AbortSignal): Promise<QueryResult> {
    const params = sqliteParameters(request.params);
    const reply = await this.#run({ sql: request.sql, params, maxRows: request.maxRows }, signal);
    return buildQueryResult({
      columnNames: reply.columns,
      rows: reply.rows,
      rowCount: reply.rowCount,
      truncated: reply.truncated,
    });
  }

  async tables(signal: AbortSignal): Promise<TableEntry[]> {
    const reply = await this.#run({ sql: TABLES_SQL, params: null, maxRows: Number.MAX_SAFE_INTEGER }, signal);
    return reply.rows.map(([schema, name, type]) => ({
      schema: String(schema),
      name: String(name),
      type: String(type),
    }));
  }

  async describe(table: string, signal: AbortSignal): Promise<TableDescription> {
    const reply = await this.#run({ sql: DESCRIBE_SQL, params: [table], maxRows: Number.MAX_SAFE_INTEGER }, signal);
    if (reply.rows.length === 0) {
      const names = (await this.tables(signal)).map((entry) => entry.name);
      throw new Error(
        `no table or view named ${JSON.stringify(table)}; ${names.length === 0 ? 'the database has none' : `there are: ${names.join(', ')}`}`,
      );
    }
    const columns: ColumnEntry[] = reply.rows.map(([name, type, nullable, defaultValue, primaryKey]) => ({
      name: String(name),
      type: String(type ?? ''),
      nullable: Boolean(nullable),
      default: defaultValue === null || defaultValue === undefined ? null : String(defaultValue),
      primaryKey: Boolean(primaryKey),
    }));
    return { table, columns };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#stopWorker(new Error(`database "${this.#database.name}" was closed`));
  }

  /** Runs one request in the worker, one at a time, stopped at the statement timeout or when `signal` aborts. */
  async #run(request: Omit<SqliteRequest, 'id'>, signal: AbortSignal): Promise<SqliteReply & { ok: true }> {
    await this.#queue.acquire(signal);
    try {
      if (this.#closed) throw new Error(`database "${this.#database.name}" was closed`);
      const live = this.#startWorker();
      await waitOrAbort(live.ready, signal);
      const reply = await this.#send(live, { id: this.#nextId++, ...request }, signal);
      if (!reply.ok) throw new Error(this.#explain(reply.message));
      return reply;
    } finally {
      this.#queue.release();
    }
  }

  #send(live: LiveWorker, request: SqliteRequest, signal: AbortSignal): Promise<SqliteReply> {
    const timeoutMs = this.#database.statementTimeoutMs;
    return new Promise<SqliteReply>((resolve, reject) => {
      const finish = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#pending = undefined;
      };
      // A statement cannot be interrupted inside sql.js: stopping it means terminating its thread.
      const timer = setTimeout(() => {
        finish();
        this.#stopWorker(undefined);
        reject(
          new Error(
            `the statement ran longer than ${formatDuration(timeoutMs)} (statementTimeoutMs of database ` +
              `"${this.#database.name}") and was stopped`,
          ),
        );
      }, timeoutMs);
      const onAbort = (): void => {
        finish();
        this.#stopWorker(undefined);
        reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#pending = {
        id: request.id,
        resolve: (reply) => {
          finish();
          resolve(reply);
        },
        reject: (error) => {
          finish();
          reject(error);
        },
      };
      live.worker.postMessage(request);
    });
  }

  #explain(message: string): string {
    if (this.#database.readOnly && /attempt to write a readonly database/.test(message)) {
      return (
        `database "${this.#database.name}" is read-only: ${message} (write access is opted into with ` +
        '"readOnly": false in its configuration)'
      );
    }
    return message;
  }

  #startWorker(): LiveWorker {
    if (this.#live !== undefined) return this.#live;
    const worker = new Worker(SQLITE_WORKER_SOURCE, { eval: true, workerData: this.#workerData });
    // An idle database must not keep the host process alive; a run in progress does that.
    worker.unref();
    let markReady: () => void = () => {};
    let failStart: (error: Error) => void = () => {};
    const ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failStart = reject;
    });
    // Handled where it is awaited; this keeps a start failure nobody awaits from being unhandled.
    ready.catch(() => undefined);
    const live: LiveWorker = { worker, ready };
    worker.on('message', (reply: SqliteReply) => {
      if (reply.id === 0) {
        if (reply.ok) markReady();
        else failStart(new Error(`sql.js failed to start: ${reply.message}`));
        return;
      }
      if (this.#pending?.id === reply.id) this.#pending.resolve(reply);
    });
    const onEnd = (error: Error): void => {
      if (this.#live === live) this.#live = undefined;
      failStart(error);
      this.#pending?.reject(error);
    };
    worker.on('error', (error) => onEnd(new Error(`the SQLite worker failed: ${error.message}`)));
    worker.on('exit', (code) => onEnd(new Error(`the SQLite worker stopped (exit code ${code})`)));
    this.#live = live;
    return live;
  }

  #stopWorker(error: Error | undefined): void {
    const live = this.#live;
    this.#live = undefined;
    if (error !== undefined) this.#pending?.reject(error);
    if (live !== undefined) void live.worker.terminate();
  }
}

async function waitOrAbort(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw abortReason(signal);
  let onAbort: () => void = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
