import type { SqliteBoundValue } from './sqlite-worker.js';

/** Prefixes SQLite accepts for named placeholders. */
const SQLITE_NAME_PREFIXES = [':', '@', '$'] as const;
/** Placeholders a statement may bind at most (SQLite's own default limit). */
export const MAX_QUERY_PARAMETERS = 32_766;

/**
 * The `params` of a SQLite `query` as sql.js binds them: a list for `?` / `?NNN` placeholders, or a dict for
 * `:name` / `@name` / `$name` ones (a key given without its prefix binds whichever of the three the statement uses).
 * Values: str, int, float, bool (1/0), None, and `{"base64": "..."}` for a BLOB.
 * @throws Error naming the bad parameter.
 */
export function sqliteParameters(
  params: unknown,
): readonly SqliteBoundValue[] | Readonly<Record<string, SqliteBoundValue>> | null {
  if (params === undefined || params === null) return null;
  if (Array.isArray(params)) {
    checkCount(params.length);
    return params.map((value, index) => sqliteValue(value, `params[${index}]`));
  }
  if (isPlainObject(params)) {
    const keys = Object.keys(params);
    checkCount(keys.length);
    const bound: Record<string, SqliteBoundValue> = Object.create(null);
    for (const key of keys) {
      const value = sqliteValue(params[key], `params[${JSON.stringify(key)}]`);
      const prefixed = SQLITE_NAME_PREFIXES.some((prefix) => key.startsWith(prefix));
      if (prefixed) bound[key] = value;
      else for (const prefix of SQLITE_NAME_PREFIXES) bound[`${prefix}${key}`] = value;
    }
    return bound;
  }
  throw new Error(`params must be a list (for ? placeholders) or a dict (for :name placeholders), got ${kind(params)}`);
}

/**
 * The `params` of a PostgreSQL `query`: a list bound to `$1`, `$2`, ... Values: str, int, float, bool, None,
 * `{"base64": "..."}` for bytea, a list (a PostgreSQL array, e.g. for `= ANY($1)`) or a dict (sent as JSON text).
 * @throws Error naming the bad parameter.
 */
export function postgresParameters(params: unknown): unknown[] {
  if (params === undefined || params === null) return [];
  if (!Array.isArray(params)) {
    throw new Error(
      `params must be a list bound to $1, $2, ... (PostgreSQL has no named placeholders), got ${kind(params)}`,
    );
  }
  checkCount(params.length);
  return params.map((value, index) => postgresValue(value, `params[${index}]`));
}

function sqliteValue(value: unknown, where: string): SqliteBoundValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`${where} must be a finite number, got ${value}`);
    // Whole numbers past 32 bits are bound as 64-bit integers, not as REAL (sql.js's choice for large numbers).
    return Number.isInteger(value) && (value | 0) !== value ? BigInt(value) : value;
  }
  const bytes = base64Bytes(value, where);
  if (bytes !== undefined) return bytes;
  throw new Error(
    `${where} must be a str, int, float, bool, None or {"base64": "..."} for a BLOB, got ${kind(value)}; ` +
      'bind a list or dict as JSON text (json.dumps)',
  );
}

function postgresValue(value: unknown, where: string): unknown {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`${where} must be a finite number, got ${value}`);
    return value;
  }
  const bytes = base64Bytes(value, where);
  if (bytes !== undefined) return Buffer.from(bytes);
  if (Array.isArray(value)) return value.map((item, index) => postgresValue(item, `${where}[${index}]`));
  // A dict travels as JSON text (for json/jsonb columns); pg would do the same, but through toJSON and friends.
  if (isPlainObject(value)) return JSON.stringify(value);
  throw new Error(`${where} cannot be bound: ${kind(value)}`);
}

function base64Bytes(value: unknown, where: string): Uint8Array | undefined {
  if (!isPlainObject(value) || !('base64' in value)) return undefined;
  const keys = Object.keys(value);
  const text = value.base64;
  if (keys.length !== 1 || typeof text !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new Error(`${where}: bytes are passed as {"base64": "<base64 text>"} and nothing else`);
  }
  return new Uint8Array(Buffer.from(text, 'base64'));
}

function checkCount(count: number): void {
  if (count > MAX_QUERY_PARAMETERS) {
    throw new Error(`params has ${count} values, over the ${MAX_QUERY_PARAMETERS} a statement can bind`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function kind(value: unknown): string {
  if (value === null) return 'None';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a dict';
  return typeof value;
}
