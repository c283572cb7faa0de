/**
 * Bytes of values one statement may return (text and bytes counted by length): past it the statement is stopped,
 * so a few thousand large rows cannot fill the host's memory before the channel's frame limit would refuse them.
 */
export const MAX_RESULT_BYTES = 64 * 1024 * 1024;

/** The message of a result stopped at {@link MAX_RESULT_BYTES} after `rowCount` rows. */
export function resultTooLargeMessage(rowCount: number | string): string {
  return (
    `the result grew past ${MAX_RESULT_BYTES / 1024 / 1024} MiB after ${rowCount} rows and the statement was ` +
    'stopped; select fewer rows or columns, or aggregate in SQL'
  );
}

/** What `query` returns to the script. */
export interface QueryResult {
  /** Keys of every row, in column order (a repeated column name gets a suffix: `id`, `id_2`). */
  readonly columns: readonly string[];
  /** One dict per row, keyed by `columns`. */
  readonly rows: readonly Record<string, unknown>[];
  /** Rows returned; for a statement that returns no columns (an INSERT without RETURNING), rows it changed. */
  readonly rowCount: number;
  /** True when the statement had more rows than `maxRows` and only the first `maxRows` came back. */
  readonly truncated: boolean;
}

/** One table or view, as `tables()` lists it. */
export interface TableEntry {
  /** Schema (PostgreSQL) or attached database (`main` for SQLite). */
  readonly schema: string;
  readonly name: string;
  /** `table`, `view`, `materialized view` or `foreign table`. */
  readonly type: string;
}

/** One column, as `describe(table)` lists it. */
export interface ColumnEntry {
  readonly name: string;
  /** Declared type (SQLite: as written in CREATE TABLE, possibly empty). */
  readonly type: string;
  readonly nullable: boolean;
  /** Default expression as SQL text, or null. */
  readonly default: string | null;
  readonly primaryKey: boolean;
}

/** What `describe(table)` returns. */
export interface TableDescription {
  readonly table: string;
  readonly columns: readonly ColumnEntry[];
}

/**
 * Unique keys for a row's columns: a name seen before gets `_2`, `_3`, ... (the first free one), so that no value
 * of `SELECT a.id, b.id` is lost when rows become dicts.
 */
export function uniqueColumnNames(names: readonly string[]): string[] {
  const taken = new Set<string>();
  return names.map((name) => {
    let key = name;
    for (let suffix = 2; taken.has(key); suffix += 1) key = `${name}_${suffix}`;
    taken.add(key);
    return key;
  });
}

/**
 * The result of a statement, rows turned into dicts. Rows are objects without a prototype, so a column named
 * `__proto__` is an ordinary key.
 */
export function buildQueryResult(options: {
  readonly columnNames: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
  readonly rowCount: number;
  readonly truncated: boolean;
}): QueryResult {
  const columns = uniqueColumnNames(options.columnNames);
  const rows = options.rows.map((values) => {
    const row: Record<string, unknown> = Object.create(null);
    for (let index = 0; index < columns.length; index += 1) row[columns[index] as string] = values[index] ?? null;
    return row;
  });
  return { columns, rows, rowCount: options.rowCount, truncated: options.truncated };
}

/** The message of an error, or the text of a thrown non-error. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
