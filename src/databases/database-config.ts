import { createRequire } from 'node:module';
import { isAbsolute, resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { checkKnownKeys, knownKeys } from '../core/option-checks.js';

/** Rows `query` returns at most by default; `truncated` says when there were more. */
export const DEFAULT_MAX_ROWS = 10_000;
/** Time one statement may run by default before it is stopped. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** Upper bound of `maxRows` (a larger result would not fit the channel's frames anyway). */
export const MAX_MAX_ROWS = 1_000_000;

/**
 * A database whose tools become the submodule `tools.<name>` (`query`, `tables`, `describe`): a URL
 * (`"sqlite:./data/sales.db"`, `"postgres://user:password@host:5432/db"`), or an object with the URL and options.
 */
export type DatabaseConfig = string | DatabaseOptions;

/** The object form of a {@link DatabaseConfig}. */
export interface DatabaseOptions {
  /**
   * `sqlite:PATH` (a relative PATH is relative to the workspace, or to the configuration file in `codecall.json`;
   * `sqlite:///abs/path.db` is absolute) or `postgres://` / `postgresql://` with user, password, host, port, database.
   */
  readonly url: string;
  /**
   * Default true: statements that write are refused (SQLite: SQLite's `query_only` mode on a copy of the file that is
   * never written back; PostgreSQL: `BEGIN READ ONLY` transactions, always rolled back). False allows writes.
   */
  readonly readOnly?: boolean | undefined;
  /** Rows one `query` returns at most (default {@link DEFAULT_MAX_ROWS}); `truncated` is true when there were more. */
  readonly maxRows?: number | undefined;
  /** Time one statement may run (default {@link DEFAULT_STATEMENT_TIMEOUT_MS}); a longer one is stopped. */
  readonly statementTimeoutMs?: number | undefined;
  /** What the database holds, in a sentence: shown to the model in the module's docstring. */
  readonly description?: string | undefined;
}

/** The database engines codecall speaks to, and the npm package each needs. */
export const DATABASE_DRIVERS = {
  sqlite: { package: 'sql.js', engine: 'SQLite' },
  postgres: { package: 'pg', engine: 'PostgreSQL' },
} as const;

/** What every checked database has. */
interface ResolvedDatabaseBase {
  /** Name as configured: the submodule `tools.<name>` and the wire-name prefix `<name>/`. */
  readonly name: string;
  readonly readOnly: boolean;
  readonly maxRows: number;
  readonly statementTimeoutMs: number;
  readonly description: string | undefined;
  /** Where the database is, safe to show (to the model, in `doctor`, in errors): never a password. */
  readonly location: string;
}

/** A SQLite database file. */
export interface ResolvedSqliteDatabase extends ResolvedDatabaseBase {
  readonly kind: 'sqlite';
  /** Absolute path of the file. */
  readonly path: string;
}

/** A PostgreSQL database. */
export interface ResolvedPostgresDatabase extends ResolvedDatabaseBase {
  readonly kind: 'postgres';
  /** The connection URL, password included: it stays on the host. */
  readonly url: string;
  /** Texts to scrub from every message that leaves the host (the password, raw and decoded). */
  readonly secrets: readonly string[];
}

/** A database after checking, with every default filled in. */
export type ResolvedDatabase = ResolvedSqliteDatabase | ResolvedPostgresDatabase;

/** Options of {@link parseDatabases}. */
export interface ParseDatabasesOptions {
  /** Directory a relative SQLite path is resolved against (the workspace, or the configuration file's folder). */
  readonly baseDirectory: string;
  /** Checks that the driver package of each database is installed (default true). */
  readonly checkDrivers?: boolean | undefined;
}

const DATABASE_KEYS = knownKeys<keyof DatabaseOptions>({
  url: true,
  readOnly: true,
  maxRows: true,
  statementTimeoutMs: true,
  description: true,
});
/** Longest excerpt of a bad value quoted in an error message. */
const DESCRIBED_VALUE_MAX_CHARACTERS = 80;
const SQLITE_PREFIX = 'sqlite:';
const POSTGRES_PROTOCOLS: ReadonlySet<string> = new Set(['postgres:', 'postgresql:']);
// URL query parameters that carry secrets: dropped from the location shown, scrubbed from messages.
const SECRET_URL_PARAMETERS = ['password', 'sslpassword'];
const require = createRequire(import.meta.url);

/**
 * Checks the `databases` option: a map from names to {@link DatabaseConfig}. Relative SQLite paths are resolved
 * against `options.baseDirectory`; the driver package of each engine used must be installed.
 * @throws CodecallError `INVALID_CONFIG` naming the database and the bad key, or the package to install.
 */
export function parseDatabases(value: unknown, options: ParseDatabasesOptions): Record<string, ResolvedDatabase> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `databases must be an object mapping names to database URLs, got ${describeValue(value)}`,
      { key: 'databases', value },
    );
  }
  const databases: Record<string, ResolvedDatabase> = {};
  for (const [name, entry] of Object.entries(value)) {
    const database = parseDatabase(name, entry, options.baseDirectory);
    if (options.checkDrivers !== false) checkDriverInstalled(database);
    databases[name] = database;
  }
  return databases;
}

/**
 * Rewrites the relative SQLite paths of a `databases` value as absolute `sqlite:` URLs resolved against
 * `baseDirectory`, leaving everything else as it is (for `codecall.json`, whose paths are relative to the file).
 */
export function resolveRelativeSqlitePaths(value: unknown, baseDirectory: string): unknown {
  if (!isPlainObject(value)) return value;
  const resolved: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(value)) {
    if (typeof entry === 'string') resolved[name] = absoluteSqliteUrl(entry, baseDirectory);
    else if (isPlainObject(entry) && typeof entry.url === 'string') {
      resolved[name] = { ...entry, url: absoluteSqliteUrl(entry.url, baseDirectory) };
    } else resolved[name] = entry;
  }
  return resolved;
}

function absoluteSqliteUrl(url: string, baseDirectory: string): string {
  if (!url.startsWith(SQLITE_PREFIX)) return url;
  const path = sqlitePathOf(url);
  return path === '' || isAbsolute(path) ? url : `${SQLITE_PREFIX}${resolve(baseDirectory, path)}`;
}

/** The path of a `sqlite:` URL: `sqlite:PATH`, or `sqlite://PATH` (so `sqlite:///abs` is `/abs`). */
function sqlitePathOf(url: string): string {
  const rest = url.slice(SQLITE_PREFIX.length);
  return rest.startsWith('//') ? rest.slice(2) : rest;
}

function parseDatabase(name: string, value: unknown, baseDirectory: string): ResolvedDatabase {
  checkDatabaseName(name);
  const entry: Record<string, unknown> = typeof value === 'string' ? { url: value } : checkObject(name, value);
  checkKnownKeys(entry, `databases.${name}`, DATABASE_KEYS, { database: name });
  const url = entry.url;
  if (typeof url !== 'string' || url.trim() === '') {
    throw invalid(name, 'url', `must be a "sqlite:PATH" or "postgres://..." URL, got ${describeValue(url)}`);
  }
  const common = {
    name,
    readOnly: parseBoolean(name, 'readOnly', entry.readOnly) ?? true,
    maxRows: parsePositiveInteger(name, 'maxRows', entry.maxRows, MAX_MAX_ROWS) ?? DEFAULT_MAX_ROWS,
    statementTimeoutMs:
      parsePositiveInteger(name, 'statementTimeoutMs', entry.statementTimeoutMs, 2 ** 31 - 1) ??
      DEFAULT_STATEMENT_TIMEOUT_MS,
    description: parseDescription(name, entry.description),
  };
  if (url.startsWith(SQLITE_PREFIX)) {
    const path = sqlitePathOf(url);
    if (path === '' || path === ':memory:') {
      throw invalid(name, 'url', `must name a database file ("sqlite:./data/sales.db"), got ${describeValue(url)}`);
    }
    const absolute = resolve(baseDirectory, path);
    return { ...common, kind: 'sqlite', path: absolute, location: absolute };
  }
  return { ...common, kind: 'postgres', ...parsePostgresUrl(name, url) };
}

function parsePostgresUrl(name: string, url: string): { url: string; location: string; secrets: string[] } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(name, 'url', `is not a valid URL (it should look like "postgres://user:password@host:5432/db")`);
  }
  if (!POSTGRES_PROTOCOLS.has(parsed.protocol)) {
    throw invalid(
      name,
      'url',
      `must start with "sqlite:", "postgres://" or "postgresql://", got "${parsed.protocol}" (${redactUrl(parsed)})`,
    );
  }
  const secrets = [parsed.password, ...SECRET_URL_PARAMETERS.map((key) => parsed.searchParams.get(key) ?? '')]
    .flatMap((secret) => [secret, safeDecode(secret)])
    .filter((secret) => secret !== '');
  return { url, location: redactUrl(parsed), secrets: [...new Set(secrets)].sort((a, b) => b.length - a.length) };
}

/** A PostgreSQL URL without its password or secret parameters, for display. */
function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  copy.password = '';
  for (const key of SECRET_URL_PARAMETERS) copy.searchParams.delete(key);
  return copy.href;
}

/**
 * `text` with every secret replaced by `***`: for messages that leave the host (tool errors, `doctor`, the
 * description).
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let scrubbed = text;
  for (const secret of secrets) scrubbed = scrubbed.split(secret).join('***');
  return scrubbed;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Throws when the npm package the database's engine needs cannot be found from codecall's folder.
 * @throws CodecallError `INVALID_CONFIG` naming the package and the command that installs it.
 */
export function checkDriverInstalled(database: Pick<ResolvedDatabase, 'name' | 'kind'>): void {
  const driver = DATABASE_DRIVERS[database.kind];
  if (isPackageInstalled(driver.package)) return;
  throw missingDriverError(database);
}

/** The error of a database whose driver package is not installed. */
export function missingDriverError(database: Pick<ResolvedDatabase, 'name' | 'kind'>): CodecallError {
  const driver = DATABASE_DRIVERS[database.kind];
  return new CodecallError(
    'INVALID_CONFIG',
    `database "${database.name}" is a ${driver.engine} database, whose driver package ${driver.package} is not ` +
      `installed; install it beside codecall: npm install ${driver.package}`,
    { database: database.name, package: driver.package },
  );
}

function isPackageInstalled(name: string): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

function checkDatabaseName(name: string): void {
  if (name.trim() === '') {
    throw new CodecallError('INVALID_CONFIG', 'databases: a database name must not be empty', { key: 'databases' });
  }
  // `/` separates the database from the tool in wire names (`sales/query`).
  if (name.includes('/')) {
    throw new CodecallError('INVALID_CONFIG', `databases: database name "${name}" must not contain "/"`, {
      database: name,
      key: 'databases',
    });
  }
}

function checkObject(name: string, value: unknown): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw invalid(name, undefined, `must be a URL or an object with "url", got ${describeValue(value)}`);
  }
  return value;
}

function parseBoolean(name: string, key: string, value: unknown): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') {
    throw invalid(name, key, `must be true or false, got ${describeValue(value)}`);
  }
  return value;
}

function parsePositiveInteger(name: string, key: string, value: unknown, maximum: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > maximum) {
    throw invalid(name, key, `must be an integer from 1 to ${maximum}, got ${describeValue(value)}`);
  }
  return value;
}

function parseDescription(name: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== 'string') {
    throw invalid(name, 'description', `must be a string, got ${describeValue(value)}`);
  }
  return value === undefined || value.trim() === '' ? undefined : value;
}

function invalid(name: string, key: string | undefined, problem: string): CodecallError {
  const where = key === undefined ? `databases.${name}` : `databases.${name}.${key}`;
  return new CodecallError('INVALID_CONFIG', `database "${name}": ${where} ${problem}`, {
    database: name,
    ...(key === undefined ? {} : { key }),
  });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const text = JSON.stringify(value) ?? String(value);
  const shown =
    text.length > DESCRIBED_VALUE_MAX_CHARACTERS ? `${text.slice(0, DESCRIBED_VALUE_MAX_CHARACTERS)}...` : text;
  return `${typeof value} ${shown}`;
}
