import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_MAX_FILE_BYTES } from '../../src/databases/sqlite-database.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { type DatabaseTools, openDatabaseTools, plainRows } from '../support/database-tools.js';
import { createSqliteFile, readSqliteRows } from '../support/sqlite-files.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-sqlite-'));
const salesPath = join(directory, 'sales.db');
const createCodecall = useCodecalls();
let opened: DatabaseTools[] = [];

function open(config: Parameters<typeof openDatabaseTools>[0], name = 'sales'): DatabaseTools {
  const tools = openDatabaseTools(config, { name, baseDirectory: directory });
  opened.push(tools);
  return tools;
}

const SALES_SCHEMA = `
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT DEFAULT 'north');
CREATE TABLE orders (
  id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), amount REAL, placed TEXT, note TEXT,
  big INTEGER, payload BLOB
);
CREATE VIEW totals AS SELECT customer_id, sum(amount) AS total FROM orders GROUP BY customer_id;
INSERT INTO customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');
INSERT INTO orders VALUES
  (1, 1, 12.5, '2024-03-01', 'first', 9007199254740993, x'00ff10'),
  (2, 1, 7.25, '2024-03-02', NULL, 42, NULL),
  (3, 2, 100.0, '2024-03-03', 'big one', -9007199254740993, x''),
  (4, 2, 1e999, '2024-03-04', 'infinite', 0, NULL);
`;

beforeAll(async () => {
  await createSqliteFile(salesPath, SALES_SCHEMA);
});

afterEach(async () => {
  await Promise.all(opened.map((tools) => tools.close()));
  opened = [];
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

describe('SQLite databases as tools', () => {
  it('runs a query with bound parameters and returns rows as dicts with the documented conversions', async () => {
    const sales = open('sqlite:./sales.db');
    const result = await sales.query(
      'SELECT id, amount, note, big, payload FROM orders WHERE id <= ? ORDER BY id',
      [4],
    );
    expect(result.columns).toEqual(['id', 'amount', 'note', 'big', 'payload']);
    expect(result.rowCount).toBe(4);
    expect(result.truncated).toBe(false);
    expect(plainRows(result)).toEqual([
      { id: 1, amount: 12.5, note: 'first', big: '9007199254740993', payload: { base64: 'AP8Q' } },
      { id: 2, amount: 7.25, note: null, big: 42, payload: null },
      { id: 3, amount: 100, note: 'big one', big: '-9007199254740993', payload: { base64: '' } },
      { id: 4, amount: 'Infinity', note: 'infinite', big: 0, payload: null },
    ]);
  });

  it('binds named parameters with or without their prefix, big integers, booleans and BLOBs', async () => {
    const sales = open('sqlite:sales.db');
    const named = await sales.query('SELECT name FROM customers WHERE id = :id OR name = @name ORDER BY id', {
      id: 1,
      '@name': 'Grace',
    });
    expect(plainRows(named)).toEqual([{ name: 'Ada' }, { name: 'Grace' }]);
    const values = await sales.query('SELECT ? AS big, typeof(?) AS kind, ? AS flag, hex(?) AS bytes', [
      2 ** 40,
      2 ** 40,
      true,
      { base64: 'AP8Q' },
    ]);
    expect(plainRows(values)).toEqual([{ big: 2 ** 40, kind: 'integer', flag: 1, bytes: '00FF10' }]);
    await expect(sales.query('SELECT ?', [[1, 2]])).rejects.toThrow(/params\[0\] must be a str, int, float, bool/);
    await expect(sales.query('SELECT ?', 'x')).rejects.toThrow(
      `sales/query: argument 'params' must be array or object or null (got string "x")`,
    );
  });

  it('keeps every column of a join, and a column named __proto__ is an ordinary key', async () => {
    const sales = open('sqlite:sales.db');
    const result = await sales.query(
      'SELECT c.id, o.id, o.id AS id_2, 1 AS __proto__ FROM customers c JOIN orders o ON o.customer_id = c.id ' +
        'ORDER BY o.id LIMIT 1',
    );
    expect(result.columns).toEqual(['id', 'id_2', 'id_2_2', '__proto__']);
    expect(Object.getPrototypeOf(result.rows[0])).toBeNull();
    expect(JSON.parse(JSON.stringify(result.rows[0]))).toEqual({ id: 1, id_2: 1, id_2_2: 1, ['__proto__']: 1 });
  });

  it('caps the rows at maxRows and says so', async () => {
    const sales = open({ url: 'sqlite:sales.db', maxRows: 3 });
    const capped = await sales.query(
      'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10) SELECT x FROM n',
    );
    expect(capped.rows.map((row) => row.x)).toEqual([1, 2, 3]);
    expect(capped).toMatchObject({ rowCount: 3, truncated: true });
    const exact = await sales.query('SELECT id FROM orders WHERE id <= 3');
    expect(exact).toMatchObject({ rowCount: 3, truncated: false });
  });

  it('stops a statement whose rows grow past the result budget', async () => {
    const sales = open('sqlite:sales.db');
    await expect(
      sales.query(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 200) SELECT printf('%.*c', 1000000, 'x') FROM n",
      ),
    ).rejects.toThrow(
      /^sales\.query: the result grew past 64 MiB after 6\d rows and the statement was stopped; select fewer rows/,
    );
    expect(plainRows(await sales.query('SELECT count(*) AS n FROM orders'))).toEqual([{ n: 4 }]);
  });

  it('lists tables and views and describes a table', async () => {
    const sales = open('sqlite:sales.db');
    expect(await sales.tables()).toEqual([
      { schema: 'main', name: 'customers', type: 'table' },
      { schema: 'main', name: 'orders', type: 'table' },
      { schema: 'main', name: 'totals', type: 'view' },
    ]);
    expect(await sales.describe('CUSTOMERS')).toEqual({
      table: 'CUSTOMERS',
      columns: [
        { name: 'id', type: 'INTEGER', nullable: true, default: null, primaryKey: true },
        { name: 'name', type: 'TEXT', nullable: false, default: null, primaryKey: false },
        { name: 'region', type: 'TEXT', nullable: true, default: "'north'", primaryKey: false },
      ],
    });
    await expect(sales.describe('nope')).rejects.toThrow(
      'sales.describe: no table or view named "nope"; there are: customers, orders, totals',
    );
  });
});

describe('SQLite read-only enforcement', () => {
  it('refuses every statement that writes, however it is dressed up, and the file stays as it was', async () => {
    const before = readFileSync(salesPath);
    const sales = open('sqlite:sales.db');
    const refusals: [string, RegExp][] = [
      ["INSERT INTO customers (name) VALUES ('Eve')", /is read-only: attempt to write a readonly database/],
      ["UPDATE customers SET name = 'Eve'", /is read-only/],
      ['DELETE FROM orders', /is read-only/],
      ['DROP TABLE orders', /is read-only/],
      ['CREATE TABLE evil (x)', /is read-only/],
      ['CREATE TEMP TABLE evil (x)', /is read-only/],
      ['ALTER TABLE orders ADD COLUMN evil TEXT', /is read-only/],
      ['CREATE INDEX evil ON orders (amount)', /is read-only/],
      ["REPLACE INTO customers (id, name) VALUES (1, 'Eve')", /is read-only/],
      ['WITH x AS (SELECT 1) DELETE FROM orders', /is read-only/],
      // SQLite has no DML in a CTE: it is a syntax error before it could run.
      ['WITH x AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM x', /syntax error/],
      ['SELECT 1; DROP TABLE orders', /runs one SQL statement per call/],
      ['SELECT 1; PRAGMA query_only = 0', /runs one SQL statement per call/],
    ];
    for (const [sql, expected] of refusals) {
      await expect(sales.query(sql), sql).rejects.toThrow(expected);
    }
    // Turning SQLite's own guard off in one call does not carry over to the next.
    await sales.query('PRAGMA query_only = 0');
    await expect(sales.query('DELETE FROM orders')).rejects.toThrow(/is read-only/);
    await sales.query('PRAGMA query_only = 0');
    await expect(sales.query('SELECT 1 FROM orders')).resolves.toMatchObject({ rowCount: 4 });
    await expect(sales.query('UPDATE orders SET amount = 0')).rejects.toThrow(/is read-only/);
    // A schema change makes SQLite prepare a cached statement again as it runs: the flag flips, yet nothing writes.
    await sales.query("ATTACH ':memory:' AS scratch");
    await sales.query('PRAGMA query_only = 0');
    await expect(sales.query('DELETE FROM orders')).rejects.toThrow(/is read-only/);
    await expect(sales.query('CREATE TABLE scratch.t (x)')).rejects.toThrow(/is read-only/);
    // ATTACH and VACUUM INTO reach sql.js's own in-memory file system, never the host's disk.
    const outside = join(directory, 'escaped.db');
    await expect(sales.query(`VACUUM INTO '${outside}'`)).rejects.toThrow();
    await expect(sales.query(`ATTACH '${outside}' AS other`)).rejects.toThrow();
    expect(existsSync(outside)).toBe(false);
    expect(plainRows(await sales.query('SELECT count(*) AS n FROM orders'))).toEqual([{ n: 4 }]);
    expect(readFileSync(salesPath).equals(before)).toBe(true);
  });

  it('writes with readOnly: false, back to the file, where another SQLite reads it', async () => {
    const path = join(directory, 'writable.db');
    await createSqliteFile(path, 'CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);');
    // Owned by someone else (when the tests run as root, which can give it away): the file written back keeps it.
    const owner = process.getuid?.() === 0 ? 65534 : statSync(path).uid;
    if (owner !== statSync(path).uid) chownSync(path, owner, owner);
    chmodSync(path, 0o640);
    const notes = open({ url: `sqlite:${path}`, readOnly: false }, 'notes');
    expect(await notes.query('INSERT INTO notes (text) VALUES (?), (?)', ['one', 'two'])).toMatchObject({
      columns: [],
      rowCount: 2,
    });
    await notes.query('CREATE TABLE tags (name TEXT)');
    expect(await readSqliteRows(path, 'SELECT id, text FROM notes ORDER BY id')).toEqual([
      [1, 'one'],
      [2, 'two'],
    ]);
    expect(await readSqliteRows(path, "SELECT name FROM sqlite_master WHERE name = 'tags'")).toEqual([['tags']]);
    expect(readdirSync(directory).filter((name) => name.includes('.codecall-'))).toEqual([]);
    expect(statSync(path)).toMatchObject({ uid: owner, gid: owner === 65534 ? 65534 : statSync(path).gid });
    expect(statSync(path).mode & 0o777).toBe(0o640);
  });
});

describe('SQLite files that change, are missing or are too large', () => {
  it('reads the file again when it changed between calls', async () => {
    const path = join(directory, 'changing.db');
    await createSqliteFile(path, 'CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);');
    const changing = open(`sqlite:${path}`, 'changing');
    expect(plainRows(await changing.query('SELECT sum(x) AS total FROM t'))).toEqual([{ total: 1 }]);
    await createSqliteFile(path, 'INSERT INTO t VALUES (41);');
    expect(plainRows(await changing.query('SELECT sum(x) AS total FROM t'))).toEqual([{ total: 42 }]);
  });

  it('names a missing file, a file that is not a database, and one over the size cap', async () => {
    await expect(open('sqlite:missing.db', 'missing').query('SELECT 1')).rejects.toThrow(
      /missing\.query: ENOENT: no such file or directory/,
    );
    const notDatabase = join(directory, 'text.db');
    writeFileSync(
      notDatabase,
      'just some text, long enough to be read as a header of a database file....\n'.repeat(20),
    );
    await expect(open(`sqlite:${notDatabase}`, 'text').query('SELECT 1 FROM t')).rejects.toThrow(
      /file is not a database/,
    );
    const huge = join(directory, 'huge.db');
    writeFileSync(huge, '');
    // Sparse: the size is over the cap without the disk space.
    truncateSync(huge, SQLITE_MAX_FILE_BYTES + 1);
    await expect(open(`sqlite:${huge}`, 'huge').query('SELECT 1')).rejects.toThrow(
      /huge\.db is 256\.0 MiB, over the 256\.0 MiB a SQLite database may have here \(sql\.js loads the whole file/,
    );
  });
});

describe('SQLite statements that run too long', () => {
  const runaway = 'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n';

  it('stops a statement at statementTimeoutMs, and the next call works', async () => {
    const sales = open({ url: 'sqlite:sales.db', statementTimeoutMs: 300 });
    await expect(sales.query(runaway)).rejects.toThrow(
      'sales.query: the statement ran longer than 300 ms (statementTimeoutMs of database "sales") and was stopped',
    );
    expect(plainRows(await sales.query('SELECT count(*) AS n FROM orders'))).toEqual([{ n: 4 }]);
  });

  it('stops the statement when the run ends: the thread that ran it is gone', async () => {
    const codecall = createCodecall({ workspace: directory, databases: { sales: 'sqlite:sales.db' } });
    const threadsBefore = new Set(readdirSync('/proc/self/task'));
    const running = codecall.execute(`from tools.sales import query\nquery(${JSON.stringify(runaway)})`, {
      timeoutMs: 3_000,
    });
    // The new thread that burns CPU is the worker running the statement.
    let spinning: string | undefined;
    while (spinning === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      spinning = [...readdirSync('/proc/self/task')]
        .filter((thread) => !threadsBefore.has(thread))
        .find((thread) => cpuTicks(thread) > 20);
    }
    const result = await running;
    expect(result.status).toBe('timeout');
    const deadline = Date.now() + 10_000;
    while (existsSync(`/proc/self/task/${spinning}`) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(existsSync(`/proc/self/task/${spinning}`)).toBe(false);
    const after = await codecall.execute('from tools.sales import query\nprint(query("SELECT 1 AS one")["rows"])');
    expect(after.stdout).toBe("[{'one': 1}]\n");
  });
});

describe('SQLite databases in scripts', () => {
  it('is a submodule with real signatures, and errors are ToolErrors the script can catch', async () => {
    const codecall = createCodecall({
      workspace: directory,
      databases: { sales: { url: 'sqlite:sales.db', description: 'Orders of the shop since 2024.' } },
    });
    const result = await codecall.execute(
      [
        'import inspect',
        'from tools import ToolError',
        'from tools.sales import query, tables, describe',
        'import tools.sales',
        'print(inspect.signature(query))',
        'print([t["name"] for t in tables()])',
        'rows = query("SELECT customer_id, sum(amount) AS total FROM orders WHERE id < ? GROUP BY 1", [4])["rows"]',
        'print(rows)',
        'try:',
        '    query("DELETE FROM orders")',
        'except ToolError as error:',
        '    print(type(error).__name__, str(error))',
        'print("Orders of the shop" in tools.sales.__doc__)',
        'import asyncio',
        'import tools.sales.aio as aio',
        'async def main():',
        '    return await asyncio.gather(*(aio.query("SELECT ? AS n", [i]) for i in range(10)))',
        'print([result["rows"][0]["n"] for result in asyncio.run(main())])',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(
      [
        "(sql: 'str', params: 'list | dict | None' = None) -> 'dict'",
        "['customers', 'orders', 'totals']",
        // A whole REAL arrives as an int: JSON written by JavaScript does not tell 100.0 from 100.
        "[{'customer_id': 1, 'total': 19.75}, {'customer_id': 2, 'total': 100}]",
        'ToolError sales.query: database "sales" is read-only: attempt to write a readonly database (write access ' +
          'is opted into with "readOnly": false in its configuration)',
        'True',
        '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]',
        '',
      ].join('\n'),
    );
    const description = await codecall.describe();
    expect(description).toContain(
      'Functions in `tools.sales` (`from tools.sales import ...`):\nSQLite database, read-only: Orders of the shop since 2024.\n',
    );
    expect(description).toContain('- query(sql: str, params: list | dict | None = None) -> dict — Runs one SQL');
  });
});

/** utime + stime of one thread of this process, in clock ticks. */
function cpuTicks(thread: string): number {
  try {
    const stat = readFileSync(`/proc/self/task/${thread}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}
