import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useCodecalls } from '../support/codecall-fixture.js';
import { type DatabaseTools, openDatabaseTools, plainRows } from '../support/database-tools.js';
import { findPostgresBinaries, type PostgresServer, startPostgresServer } from '../support/postgres-server.js';

const binaries = findPostgresBinaries();
if ('missing' in binaries) console.warn(`test/databases/postgres-database.test.ts: ${binaries.missing}`);

/** A password with every character a URL has to escape, so that scrubbing it is tested where it is hard. */
const ANALYST_PASSWORD = 'p@ss:w/rd?#-9f2';
const SERVER_START_TIMEOUT_MS = 180_000;

let server: PostgresServer;
let admin: pg.Client;
let opened: DatabaseTools[] = [];
const directory = mkdtempSync(join(tmpdir(), 'codecall-postgres-test-'));
const createCodecall = useCodecalls();

function analystUrl(options: { password?: string; port?: number } = {}): string {
  const url = new URL(server.url({ user: 'analyst', password: ANALYST_PASSWORD, database: 'shop' }));
  if (options.password !== undefined) url.password = encodeURIComponent(options.password);
  if (options.port !== undefined) url.port = String(options.port);
  return url.href;
}

function open(config: Parameters<typeof openDatabaseTools>[0], name = 'shop'): DatabaseTools {
  const tools = openDatabaseTools(config, { name });
  opened.push(tools);
  return tools;
}

beforeAll(async () => {
  if ('missing' in binaries) return;
  server = await startPostgresServer(binaries as { directory: string });
  const setup = new pg.Client(server.url());
  await setup.connect();
  await setup.query(`CREATE ROLE analyst LOGIN PASSWORD '${ANALYST_PASSWORD}'`);
  await setup.query('CREATE DATABASE shop OWNER analyst');
  await setup.end();
  admin = new pg.Client(server.url({ database: 'shop' }));
  await admin.connect();
  await admin.query(`
    SET ROLE analyst;
    CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, region text DEFAULT 'north');
    CREATE TABLE orders (
      id integer PRIMARY KEY, customer_id integer REFERENCES customers (id), amount numeric(12, 2),
      big bigint, ratio double precision, placed date, at timestamp, at_zone timestamptz, raw bytea, meta jsonb,
      tags text[], counts integer[], flag boolean, nothing text, span interval, code uuid
    );
    CREATE VIEW totals AS SELECT customer_id, sum(amount) AS total FROM orders GROUP BY customer_id;
    CREATE SCHEMA archive;
    CREATE TABLE archive.old_orders (id integer);
    INSERT INTO customers (name) VALUES ('Ada'), ('Grace');
    INSERT INTO orders VALUES
      (1, 1, 12.50, 9007199254740993, 0.25, '2024-03-01', '2024-03-01 10:11:12.123456',
       '2024-03-01 10:11:12+00', '\\x00ff10', '{"source": "web", "items": [1, 2]}', '{a,"b c",NULL}',
       '{{1,2},{3,4}}', true, NULL, '1 day 02:00:00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
      (2, 2, 100.00, 42, 'NaN', '2024-03-02', NULL, NULL, NULL, NULL, NULL, NULL, false, NULL, NULL, NULL);
    RESET ROLE;
  `);
}, SERVER_START_TIMEOUT_MS);

afterEach(async () => {
  await Promise.all(opened.map((tools) => tools.close()));
  opened = [];
});

afterAll(async () => {
  await admin?.end();
  await server?.stop();
  rmSync(directory, { recursive: true, force: true });
}, SERVER_START_TIMEOUT_MS);

describe.skipIf('missing' in binaries)('PostgreSQL databases as tools', () => {
  it('binds parameters and converts every value as documented', async () => {
    const shop = open(analystUrl());
    const result = await shop.query('SELECT * FROM orders WHERE id = $1 AND flag = $2', [1, true]);
    expect(result).toMatchObject({ rowCount: 1, truncated: false });
    expect(plainRows(result)).toEqual([
      {
        id: 1,
        customer_id: 1,
        amount: '12.50',
        big: '9007199254740993',
        ratio: 0.25,
        placed: '2024-03-01',
        at: '2024-03-01T10:11:12.123456',
        at_zone: '2024-03-01T10:11:12+00:00',
        raw: { base64: 'AP8Q' },
        meta: { source: 'web', items: [1, 2] },
        tags: ['a', 'b c', null],
        counts: [
          [1, 2],
          [3, 4],
        ],
        flag: true,
        nothing: null,
        span: '1 day 02:00:00',
        code: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
      },
    ]);
    const other = await shop.query(
      'SELECT big, ratio, $1::int[] AS ids, $2::jsonb AS doc, $3::bytea AS bytes FROM orders WHERE id = ANY($1)',
      [[2, 3], { a: 1 }, { base64: 'AP8Q' }],
    );
    expect(plainRows(other)).toEqual([
      { big: 42, ratio: 'NaN', ids: [2, 3], doc: { a: 1 }, bytes: { base64: 'AP8Q' } },
    ]);
    await expect(shop.query('SELECT 1', { id: 1 })).rejects.toThrow(/argument 'params' must be array or null/);
  });

  it('caps the rows at maxRows, says so, and keeps repeated column names apart', async () => {
    const shop = open({ url: analystUrl(), maxRows: 5 });
    const capped = await shop.query('SELECT g AS n, g AS n FROM generate_series(1, 10) AS g');
    expect(capped.columns).toEqual(['n', 'n_2']);
    expect(capped.rows.map((row) => row.n)).toEqual([1, 2, 3, 4, 5]);
    expect(capped).toMatchObject({ rowCount: 5, truncated: true });
    expect(await shop.query('SELECT g FROM generate_series(1, 5) AS g')).toMatchObject({
      rowCount: 5,
      truncated: false,
    });
    // The connection is fine after a truncated portal.
    expect(plainRows(await shop.query('SELECT count(*)::int AS n FROM orders'))).toEqual([{ n: 2 }]);
  });

  it('stops a statement whose rows grow past the result budget, and the next call works', async () => {
    const shop = open(analystUrl());
    await expect(shop.query("SELECT repeat('x', 1000000) FROM generate_series(1, 200)")).rejects.toThrow(
      /^shop\.query: the result grew past 64 MiB after 6\d rows and the statement was stopped; select fewer rows/,
    );
    expect(plainRows(await shop.query('SELECT 1 AS one'))).toEqual([{ one: 1 }]);
  });

  it('lists tables and views, and describes a table by name or schema.name', async () => {
    const shop = open(analystUrl());
    expect(await shop.tables()).toEqual([
      { schema: 'archive', name: 'old_orders', type: 'table' },
      { schema: 'public', name: 'customers', type: 'table' },
      { schema: 'public', name: 'orders', type: 'table' },
      { schema: 'public', name: 'totals', type: 'view' },
    ]);
    const customers = await shop.describe('customers');
    expect(customers.columns).toEqual([
      {
        name: 'id',
        type: 'integer',
        nullable: false,
        default: "nextval('customers_id_seq'::regclass)",
        primaryKey: true,
      },
      { name: 'name', type: 'text', nullable: false, default: null, primaryKey: false },
      { name: 'region', type: 'text', nullable: true, default: "'north'::text", primaryKey: false },
    ]);
    expect((await shop.describe('archive.old_orders')).columns.map((column) => column.name)).toEqual(['id']);
    await expect(shop.describe('nope')).rejects.toThrow(/shop\.describe: no table or view named "nope"/);
    await expect(shop.describe('a.b.c.d')).rejects.toThrow(/no table or view named "a.b.c.d"/);
  });
});

describe.skipIf('missing' in binaries)('PostgreSQL read-only enforcement', () => {
  it('refuses every statement that writes, also inside a CTE or after another statement', async () => {
    const shop = open(analystUrl());
    const refusals: [string, RegExp][] = [
      ["INSERT INTO customers (name) VALUES ('Eve')", /is read-only: cannot execute INSERT in a read-only transaction/],
      ["UPDATE customers SET name = 'Eve'", /cannot execute UPDATE in a read-only transaction/],
      ['DELETE FROM orders', /cannot execute DELETE in a read-only transaction/],
      ['DROP TABLE orders', /cannot execute DROP TABLE in a read-only transaction/],
      ['CREATE TABLE evil (x int)', /cannot execute CREATE TABLE in a read-only transaction/],
      ['CREATE TEMP TABLE evil (x int)', /read-only transaction/],
      ['TRUNCATE orders', /cannot execute TRUNCATE TABLE in a read-only transaction/],
      [
        'WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone',
        /is read-only: .* in a read-only transaction/,
      ],
      ["SELECT 1; INSERT INTO customers (name) VALUES ('Eve')", /runs one SQL statement per call/],
      ['COMMIT; DROP TABLE orders', /runs one SQL statement per call/],
      ['SELECT 1; DROP TABLE orders', /runs one SQL statement per call/],
      ["SELECT set_config('transaction_read_only', 'off', false)", /read-write mode must be set before any query/],
    ];
    for (const [sql, expected] of refusals) {
      await expect(shop.query(sql), sql).rejects.toThrow(expected);
    }
    // A statement that changes the session alone cannot carry over to the next one: each runs in its own
    // transaction, rolled back.
    await shop.query('SET default_transaction_read_only = off');
    await shop.query('SET TRANSACTION READ WRITE');
    await expect(shop.query('DELETE FROM orders')).rejects.toThrow(/read-only transaction/);
    const { rows } = await admin.query(
      "SELECT (SELECT count(*) FROM orders)::int AS orders, (SELECT count(*) FROM customers WHERE name = 'Eve')::int AS eve",
    );
    expect(rows).toEqual([{ orders: 2, eve: 0 }]);
  });

  it('writes and commits with readOnly: false', async () => {
    const shop = open({ url: analystUrl(), readOnly: false });
    expect(await shop.query("INSERT INTO customers (name) VALUES ($1), ('Hedy')", ['Barbara'])).toMatchObject({
      columns: [],
      rowCount: 2,
    });
    const { rows } = await admin.query('SELECT name FROM customers WHERE id > 2 ORDER BY id');
    expect(rows).toEqual([{ name: 'Barbara' }, { name: 'Hedy' }]);
    await admin.query('DELETE FROM customers WHERE id > 2');
  });
});

describe.skipIf('missing' in binaries)('PostgreSQL timeouts and cancellation', () => {
  it('cancels a statement at statementTimeoutMs', async () => {
    const shop = open({ url: analystUrl(), statementTimeoutMs: 500 });
    await expect(shop.query('SELECT pg_sleep(30)')).rejects.toThrow(
      'shop.query: the statement ran longer than 500 ms (statementTimeoutMs of database "shop") and was cancelled',
    );
    expect(plainRows(await shop.query('SELECT 1 AS one'))).toEqual([{ one: 1 }]);
  });

  it('cancels the statement on the server when the run times out', async () => {
    const codecall = createCodecall({ databases: { shop: analystUrl() } });
    const marker = 'cancel-me-7d1e';
    const running = codecall.execute(`from tools.shop import query\nquery("SELECT pg_sleep(30), '${marker}'")`, {
      timeoutMs: 4_000,
    });
    await waitFor(async () => (await activeQueries(marker)) === 1, 'the query to start on the server');
    const result = await running;
    expect(result.status).toBe('timeout');
    await waitFor(async () => (await activeQueries(marker)) === 0, 'the server to cancel the query');
  });
});

describe.skipIf('missing' in binaries)('PostgreSQL connection failures', () => {
  it('names a wrong password without showing it, in the tool error and to the script', async () => {
    const wrong = 'Wr0ng-S3cret-Pa55';
    const shop = open(analystUrl({ password: wrong }));
    const error = await shop.query('SELECT 1').then(
      () => undefined,
      (failure: Error) => failure,
    );
    expect(error?.message).toMatch(
      new RegExp(
        `^shop\\.query: cannot connect to postgres://analyst@127\\.0\\.0\\.1:${server.port}/shop: password authentication failed for user "analyst"$`,
      ),
    );
    const codecall = createCodecall({ databases: { shop: analystUrl({ password: wrong }) } });
    const result = await codecall.execute(
      'from tools import ToolError\nfrom tools.shop import query\ntry:\n    query("SELECT 1")\nexcept ToolError as error:\n    print(error)',
    );
    expect(result.stdout).toContain('password authentication failed for user "analyst"');
    const everything = JSON.stringify(result) + (await codecall.describe());
    expect(everything).not.toContain(wrong);
    expect(everything).not.toContain(encodeURIComponent(wrong));
  });

  it('names an unreachable server without showing the password', async () => {
    const closedPort = await closedTcpPort();
    const shop = open(analystUrl({ port: closedPort }));
    const error = await shop.query('SELECT 1').then(
      () => undefined,
      (failure: Error) => failure,
    );
    expect(error?.message).toBe(
      `shop.query: cannot connect to postgres://analyst@127.0.0.1:${closedPort}/shop: connect ECONNREFUSED 127.0.0.1:${closedPort}`,
    );
    expect(error?.message).not.toContain(encodeURIComponent(ANALYST_PASSWORD));
  });

  it('scrubs the password from a message that quotes it', async () => {
    const shop = open(analystUrl());
    const error = await shop.query(`SELECT 1 FROM "${ANALYST_PASSWORD}"`).then(
      () => undefined,
      (failure: Error) => failure,
    );
    expect(error?.message).toBe('shop.query: relation "***" does not exist');
  });
});

/** Backends of the test server running a statement that contains `marker` (the query itself left out). */
async function activeQueries(marker: string): Promise<number> {
  const { rows } = await admin.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()",
    [`%${marker}%`],
  );
  return (rows[0] as { n: number }).n;
}

async function waitFor(condition: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A port of 127.0.0.1 nothing listens on. */
async function closedTcpPort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 1));
    });
  });
}
