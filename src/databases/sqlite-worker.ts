/** What the SQLite worker is started with. */
export interface SqliteWorkerData {
  /** Resolved path of the sql.js package's entry (loaded with `require` in the worker). */
  readonly sqlJsPath: string;
  /** Absolute path of the database file. */
  readonly path: string;
  /** Largest file the worker loads. */
  readonly maxFileBytes: number;
  /** Statements that write are refused (`PRAGMA query_only`), and the file is never written. */
  readonly readOnly: boolean;
  /** Prepared statements kept per database, by SQL text. */
  readonly statementCacheSize: number;
  /** Bytes of values one statement may return before it is stopped. */
  readonly maxResultBytes: number;
  /** The error message of a statement stopped at `maxResultBytes`, with `{rows}` for the rows read. */
  readonly resultTooLargeMessage: string;
}

/** A value bound to a placeholder, after the host checked and converted it. */
export type SqliteBoundValue = string | number | bigint | boolean | null | Uint8Array;

/** One statement to run. */
export interface SqliteRequest {
  readonly id: number;
  readonly sql: string;
  /** Positional values, or named values keyed with their prefix (`:name`, `@name`, `$name`). */
  readonly params: readonly SqliteBoundValue[] | Readonly<Record<string, SqliteBoundValue>> | null;
  readonly maxRows: number;
}

/** The worker's answer to a {@link SqliteRequest}, or to its start (`id` 0). */
export type SqliteReply =
  | {
      readonly id: number;
      readonly ok: true;
      readonly columns: readonly string[];
      /** Rows as arrays of converted values, in column order. */
      readonly rows: readonly (readonly unknown[])[];
      /** Rows returned, or for a statement without result columns, rows it changed. */
      readonly rowCount: number;
      readonly truncated: boolean;
    }
  | { readonly id: number; readonly ok: false; readonly message: string };

/**
 * Source of the worker thread that owns one SQLite database (run with `new Worker(source, { eval: true })`, so it
 * works from the compiled package and from the TypeScript sources alike). sql.js runs a statement synchronously, so
 * it runs here, away from the host's event loop, which stays free to time it out and terminate the worker.
 */
export const SQLITE_WORKER_SOURCE = `(${sqliteWorkerMain.toString()})(require);`;

// Runs inside the worker: everything it uses is required here, nothing comes from this module's scope. `require`
// comes in as `load`: a bundler rewrites calls of a free `require`, which the text of this function would carry.
function sqliteWorkerMain(load: NodeJS.Require): void {
  interface Statement {
    bind(values?: unknown): boolean;
    step(): boolean;
    get(params: null, config: { useBigInt: boolean }): unknown[];
    getColumnNames(): string[];
    reset(): void;
    free(): boolean;
  }
  interface StatementIterator {
    next(): { done: boolean; value: Statement };
    return(): void;
  }
  interface Database {
    exec(sql: string): unknown;
    prepare(sql: string): Statement;
    iterateStatements(sql: string): StatementIterator;
    export(): Uint8Array;
    close(): void;
  }
  interface FileIdentity {
    readonly dev: bigint;
    readonly ino: bigint;
    readonly size: bigint;
    readonly mtimeNs: bigint;
    readonly ctimeNs: bigint;
  }
  class RequestError extends Error {}

  const { parentPort, workerData } = load('node:worker_threads') as typeof import('node:worker_threads');
  const fs = load('node:fs') as typeof import('node:fs');
  const data = workerData as SqliteWorkerData;
  const port = parentPort as NonNullable<typeof parentPort>;
  const cache = new Map<string, Statement>();
  let SQL: { Database: new (data?: Uint8Array) => Database } | undefined;
  let db: Database | undefined;
  let loaded: FileIdentity | undefined;
  // Set when something was prepared since `PRAGMA query_only = 1` was last run (preparing applies PRAGMA flags).
  let queryOnlyStale = true;

  const sameFile = (left: FileIdentity, right: FileIdentity): boolean =>
    left.dev === right.dev &&
    left.ino === right.ino &&
    left.size === right.size &&
    left.mtimeNs === right.mtimeNs &&
    left.ctimeNs === right.ctimeNs;

  const clearCache = (): void => {
    for (const statement of cache.values()) statement.free();
    cache.clear();
  };

  const mebibytes = (bytes: number | bigint): string => `${(Number(bytes) / 1024 / 1024).toFixed(1)} MiB`;

  // sql.js works on a copy of the file in memory: (re)load it when the file changed since it was read.
  const ensureLoaded = (): Database => {
    const current = fs.statSync(data.path, { bigint: true });
    if (db !== undefined && loaded !== undefined && sameFile(loaded, current)) return db;
    // Non-blocking, so that a FIFO put in the file's place cannot hang the thread in open(); fstat refuses it next.
    const descriptor = fs.openSync(data.path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    let bytes: Uint8Array;
    let identity: FileIdentity;
    try {
      const stats = fs.fstatSync(descriptor, { bigint: true });
      if (!stats.isFile()) throw new RequestError(`${data.path} is not a regular file`);
      if (stats.size > BigInt(data.maxFileBytes)) {
        throw new RequestError(
          `${data.path} is ${mebibytes(stats.size)}, over the ${mebibytes(data.maxFileBytes)} a SQLite database may ` +
            'have here (sql.js loads the whole file into memory)',
        );
      }
      bytes = new Uint8Array(Number(stats.size));
      let offset = 0;
      while (offset < bytes.length) {
        const read = fs.readSync(descriptor, bytes, offset, bytes.length - offset, offset);
        if (read === 0) break;
        offset += read;
      }
      bytes = bytes.subarray(0, offset);
      identity = stats;
    } finally {
      fs.closeSync(descriptor);
    }
    clearCache();
    db?.close();
    db = undefined;
    loaded = undefined;
    queryOnlyStale = true;
    const opened = new (SQL as NonNullable<typeof SQL>).Database(bytes);
    // One connection, nobody else on its in-memory file: keeping the lock keeps the page cache between statements.
    opened.exec('PRAGMA locking_mode = EXCLUSIVE');
    db = opened;
    loaded = identity;
    return opened;
  };

  const prepareOne = (database: Database, sql: string): Statement => {
    const cached = cache.get(sql);
    if (cached !== undefined) {
      cache.delete(sql);
      cache.set(sql, cached);
      return cached;
    }
    queryOnlyStale = true;
    // The iterator frees each statement when it moves on, so it only counts; the one statement is prepared after.
    const iterator = database.iterateStatements(sql);
    let count = 0;
    try {
      while (!iterator.next().done) {
        count += 1;
        if (count > 1) break;
      }
    } finally {
      iterator.return();
    }
    if (count === 0) throw new RequestError('the SQL text holds no statement');
    if (count > 1) {
      throw new RequestError(
        'query runs one SQL statement per call, and this text holds several; send them one call at a time',
      );
    }
    const statement = database.prepare(sql);
    cache.set(sql, statement);
    if (cache.size > data.statementCacheSize) {
      const [oldestSql, oldest] = cache.entries().next().value as [string, Statement];
      cache.delete(oldestSql);
      oldest.free();
    }
    return statement;
  };

  const convert = (value: unknown): unknown => {
    if (typeof value === 'bigint') {
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(value)
        : value.toString();
    }
    // JSON cannot carry NaN or the infinities.
    if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
    if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString('base64') };
    return value;
  };

  // Rows changed so far, and the header fields DDL and pragmas change: what tells that a statement wrote.
  const counters = (database: Database): { changes: number; header: string } => {
    const results = database.exec('SELECT total_changes(); PRAGMA schema_version; PRAGMA user_version') as {
      values: unknown[][];
    }[];
    const values = results.map((result) => result.values[0]?.[0]);
    return { changes: Number(values[0]), header: JSON.stringify(values.slice(1)) };
  };

  const writeBack = (database: Database): void => {
    const bytes = database.export();
    // export() closes and reopens the database: its prepared statements are gone, and so are its pragmas.
    cache.clear();
    database.exec('PRAGMA locking_mode = EXCLUSIVE');
    const original = fs.statSync(data.path);
    const temporary = `${data.path}.codecall-${process.pid}-${Date.now()}.tmp`;
    fs.writeFileSync(temporary, bytes, { mode: original.mode & 0o7777, flag: 'wx' });
    try {
      // The file replaces the original: as root, keep its owner rather than hand it to root.
      if (process.getuid?.() === 0) fs.chownSync(temporary, original.uid, original.gid);
      fs.renameSync(temporary, data.path);
    } catch (error) {
      fs.rmSync(temporary, { force: true });
      throw error;
    }
    loaded = fs.statSync(data.path, { bigint: true });
  };

  const run = (request: SqliteRequest): SqliteReply => {
    const database = ensureLoaded();
    const statement = prepareOne(database, request.sql);
    // Preparing a statement applies PRAGMA flags at once (`PRAGMA query_only = 0` included): set it again after.
    // A cached statement needs no new setting: its first run started under query_only = 1, and SQLite refuses a
    // statement that opens a write transaction as it starts, whatever the rows; so a cached statement never writes,
    // even after it switched the flag off (SQLite prepares it again when a setting or the schema changed).
    if (data.readOnly && queryOnlyStale) {
      database.exec('PRAGMA query_only = 1');
      queryOnlyStale = false;
    }
    const before = data.readOnly ? undefined : counters(database);
    const rows: unknown[][] = [];
    let truncated = false;
    let columns: string[];
    try {
      statement.bind(request.params ?? []);
      columns = statement.getColumnNames();
      const rowOverhead = columns.reduce((total, name) => total + name.length + 4, 2);
      let bytes = 0;
      while (statement.step()) {
        if (rows.length === request.maxRows) {
          truncated = true;
          break;
        }
        const row = statement.get(null, { useBigInt: true }).map(convert);
        bytes += row.reduce((total: number, value) => total + weigh(value), rowOverhead);
        if (bytes > data.maxResultBytes) {
          throw new RequestError(data.resultTooLargeMessage.replace('{rows}', String(rows.length)));
        }
        rows.push(row);
      }
      statement.reset();
    } catch (error) {
      cache.delete(request.sql);
      statement.free();
      throw error;
    }
    let rowCount = rows.length;
    if (before !== undefined) {
      const after = counters(database);
      if (columns.length === 0) rowCount = after.changes - before.changes;
      if (after.changes !== before.changes || after.header !== before.header) writeBack(database);
    }
    return { id: request.id, ok: true, columns, rows, rowCount, truncated };
  };

  const reply = (id: number, error: unknown): SqliteReply => ({
    id,
    ok: false,
    message: error instanceof Error ? error.message : String(error),
  });

  // About what a value weighs in the result (its JSON size for text and bytes).
  const weigh = (value: unknown): number => {
    if (typeof value === 'string') return value.length + 2;
    if (typeof value === 'object' && value !== null) return String((value as { base64: string }).base64).length + 12;
    return 8;
  };

  port.on('message', (request: SqliteRequest) => {
    let answer: SqliteReply;
    try {
      answer = run(request);
    } catch (error) {
      answer = reply(request.id, error);
    }
    port.postMessage(answer);
  });

  const initSqlJs = load(data.sqlJsPath) as () => Promise<NonNullable<typeof SQL>>;
  initSqlJs().then(
    (module) => {
      SQL = module;
      port.postMessage({ id: 0, ok: true, columns: [], rows: [], rowCount: 0, truncated: false });
    },
    (error: unknown) => port.postMessage(reply(0, error)),
  );
}
