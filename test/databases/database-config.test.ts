import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import {
  DEFAULT_MAX_ROWS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  parseDatabases,
  resolveRelativeSqlitePaths,
  scrubSecrets,
} from '../../src/databases/database-config.js';
import { parseArrayLiteral, postgresTextParser } from '../../src/databases/postgres-values.js';
import { buildQueryResult, uniqueColumnNames } from '../../src/databases/query-result.js';
import { captureError } from '../support/capture-error.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const createCodecall = useCodecalls();

describe('the databases option', () => {
  it('reads URLs and objects, resolves SQLite paths, and fills in the defaults', () => {
    const databases = parseDatabases(
      {
        sales: 'sqlite:./data/sales.db',
        archive: 'sqlite:///srv/archive.db',
        plain: 'sqlite:plain.db',
        warehouse: {
          url: 'postgres://app:s%40cret@db.example:5432/warehouse?sslmode=require&password=other',
          readOnly: false,
          maxRows: 50,
          statementTimeoutMs: 5_000,
          description: 'Stock levels, updated hourly.',
        },
      },
      { baseDirectory: '/srv/agent' },
    );
    expect(databases.sales).toEqual({
      name: 'sales',
      kind: 'sqlite',
      path: '/srv/agent/data/sales.db',
      location: '/srv/agent/data/sales.db',
      readOnly: true,
      maxRows: DEFAULT_MAX_ROWS,
      statementTimeoutMs: DEFAULT_STATEMENT_TIMEOUT_MS,
      description: undefined,
    });
    expect(databases.archive).toMatchObject({ path: '/srv/archive.db' });
    expect(databases.plain).toMatchObject({ path: '/srv/agent/plain.db' });
    expect(databases.warehouse).toMatchObject({
      kind: 'postgres',
      readOnly: false,
      maxRows: 50,
      statementTimeoutMs: 5_000,
      description: 'Stock levels, updated hourly.',
      location: 'postgres://app@db.example:5432/warehouse?sslmode=require',
    });
    const secrets = databases.warehouse?.kind === 'postgres' ? databases.warehouse.secrets : [];
    expect(secrets).toEqual(['s%40cret', 's@cret', 'other']);
    expect(scrubSecrets('failed for s@cret and s%40cret, other', secrets)).toBe('failed for *** and ***, ***');
  });

  it('rewrites relative SQLite paths of a configuration file against its folder, and nothing else', () => {
    expect(
      resolveRelativeSqlitePaths(
        {
          a: 'sqlite:data/a.db',
          b: { url: 'sqlite:./b.db', readOnly: false },
          c: 'sqlite:///abs/c.db',
          d: 'postgres://h/d',
          e: 42,
        },
        '/configs',
      ),
    ).toEqual({
      a: 'sqlite:/configs/data/a.db',
      b: { url: 'sqlite:/configs/b.db', readOnly: false },
      c: 'sqlite:///abs/c.db',
      d: 'postgres://h/d',
      e: 42,
    });
  });

  it('names the database and the key of every mistake, never quoting a password', () => {
    const cases: [unknown, string][] = [
      [[], 'databases must be an object mapping names to database URLs, got an array'],
      [{ s: 42 }, 'database "s": databases.s must be a URL or an object with "url", got number 42'],
      [
        { s: { url: '' } },
        'database "s": databases.s.url must be a "sqlite:PATH" or "postgres://..." URL, got string ""',
      ],
      [
        { s: 'sqlite::memory:' },
        'database "s": databases.s.url must name a database file ("sqlite:./data/sales.db"), got string "sqlite::memory:"',
      ],
      [
        { s: 'mysql://u:hunter2@h/d' },
        'database "s": databases.s.url must start with "sqlite:", "postgres://" or "postgresql://", got "mysql:" (mysql://u@h/d)',
      ],
      [
        { s: 'not a url hunter2' },
        'database "s": databases.s.url is not a valid URL (it should look like "postgres://user:password@host:5432/db")',
      ],
      [
        { s: { url: 'sqlite:a.db', readOnly: 'no' } },
        'database "s": databases.s.readOnly must be true or false, got string "no"',
      ],
      [
        { s: { url: 'sqlite:a.db', maxRows: 0 } },
        'database "s": databases.s.maxRows must be an integer from 1 to 1000000, got number 0',
      ],
      [
        { s: { url: 'sqlite:a.db', statementTimeoutMs: 1.5 } },
        'database "s": databases.s.statementTimeoutMs must be an integer from 1 to 2147483647, got number 1.5',
      ],
      [
        { s: { url: 'sqlite:a.db', password: 'x' } },
        'unknown key "password" in databases.s; known keys: url, readOnly, maxRows, statementTimeoutMs, description',
      ],
      [{ 'a/b': 'sqlite:a.db' }, 'databases: database name "a/b" must not contain "/"'],
    ];
    for (const [value, message] of cases) {
      const error = captureError(() => parseDatabases(value, { baseDirectory: '/' }));
      expect(error.code).toBe('INVALID_CONFIG');
      expect(error.message).toBe(message);
      expect(JSON.stringify(error.details)).not.toContain('hunter2');
    }
  });

  it('is checked by createCodecall, which refuses a name given to a server and a database alike', () => {
    const error = captureError(() =>
      createCodecall({ databases: { memory: 'sqlite:m.db' }, mcpServers: { memory: { command: 'x' } } }),
    );
    expect(error).toBeInstanceOf(CodecallError);
    expect(error.message).toBe(
      '"memory" names both an MCP server and a database, and each becomes the submodule of that name; rename one of them',
    );
    expect(() => createCodecall({ databases: { sales: { url: 'sqlite:a.db', colour: 1 } as never } })).toThrow(
      /unknown key "colour" in databases\.sales/,
    );
  });
});

describe('PostgreSQL values', () => {
  it('parses array literals with quotes, escapes, NULL, nesting and bounds', () => {
    const text = postgresTextParser(1009);
    expect(text('{a,"b c","d\\"e","f\\\\g",NULL,"NULL",""}')).toEqual(['a', 'b c', 'd"e', 'f\\g', null, 'NULL', '']);
    expect(postgresTextParser(1007)('[0:1]={{1,2},{3,4}}')).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(postgresTextParser(1016)('{9007199254740993,-1}')).toEqual(['9007199254740993', -1]);
    expect(postgresTextParser(1231)('{1.50,NaN}')).toEqual(['1.50', 'NaN']);
    expect(postgresTextParser(1185)('{"2024-01-02 03:04:05+05:30","2024-01-02 03:04:05-08"}')).toEqual([
      '2024-01-02T03:04:05+05:30',
      '2024-01-02T03:04:05-08:00',
    ]);
    expect(postgresTextParser(1001)('{"\\\\x00ff"}')).toEqual([{ base64: 'AP8=' }]);
    expect(parseArrayLiteral('{}', (value) => value)).toEqual([]);
    expect(() => parseArrayLiteral('{1,2', (value) => value)).toThrow(/cannot read the PostgreSQL array/);
    expect(() => parseArrayLiteral(`${'{'.repeat(40)}${'}'.repeat(40)}`, (value) => value)).toThrow(
      /cannot read the PostgreSQL array/,
    );
  });

  it('reads escape-format bytea and leaves unknown types as text', () => {
    expect(postgresTextParser(17)('a\\001\\\\b')).toEqual({ base64: Buffer.from([97, 1, 92, 98]).toString('base64') });
    expect(postgresTextParser(1082)('2024-02-29')).toBe('2024-02-29');
    expect(postgresTextParser(869)('192.168.0.1/32')).toBe('192.168.0.1/32');
    expect(postgresTextParser(701)('-Infinity')).toBe('-Infinity');
    expect(postgresTextParser(20)('-9007199254740991')).toBe(-9007199254740991);
  });
});

describe('query results', () => {
  it('makes column names unique without losing values', () => {
    expect(uniqueColumnNames(['a', 'a', 'a_2', 'a'])).toEqual(['a', 'a_2', 'a_2_2', 'a_3']);
    const result = buildQueryResult({ columnNames: ['x', 'x'], rows: [[1, 2]], rowCount: 1, truncated: false });
    expect({ ...result.rows[0] }).toEqual({ x: 1, x_2: 2 });
  });
});
