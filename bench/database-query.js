// The database row of `npm run bench`: sequential `query` calls of a one-row SELECT on SQLite from a script, next to
// the same statement run directly through sql.js in Node. Also runnable alone: `npm run build && node
// bench/database-query.js` prints the figures, with Python's own sqlite3 module (native SQLite) for reference.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCodecall, defineTool } from '../dist/index.js';
import { resolvePythonInterpreter } from '../dist/sandbox/interpreter.js';
import { median } from './measure.js';

/** Calls per measured round, as the row says. */
export const QUERY_CALLS = 1_000;
/** Calls made before measuring, so the worker, the statement cache and the JIT are warm. */
const WARM_UP_CALLS = 200;
/** Rows of the table queried. */
const ROWS = 1_000;
const SQL = 'SELECT id, name, price FROM items WHERE id = ?';

const require = createRequire(import.meta.url);

/** Creates a SQLite file of `ROWS` items with sql.js and returns its path. */
async function createDatabase(directory) {
  const initSqlJs = require('sql.js');
  const SQL_JS = await initSqlJs();
  const db = new SQL_JS.Database();
  db.exec('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL)');
  const insert = db.prepare('INSERT INTO items VALUES (?, ?, ?)');
  for (let id = 1; id <= ROWS; id += 1) insert.run([id, `item ${id}`, id * 1.25]);
  insert.free();
  const path = join(directory, 'items.db');
  writeFileSync(path, db.export());
  db.close();
  return path;
}

/** µs per call of the statement run directly through sql.js: prepared once and reused, as the tool does. */
async function directMicroseconds(path, { preparedOnce }) {
  const initSqlJs = require('sql.js');
  const SQL_JS = await initSqlJs();
  const { readFileSync } = await import('node:fs');
  const db = new SQL_JS.Database(readFileSync(path));
  if (preparedOnce) db.exec('PRAGMA locking_mode = EXCLUSIVE');
  const run = (statement, id) => {
    statement.bind([id]);
    const rows = [];
    while (statement.step()) rows.push(statement.getAsObject());
    statement.reset();
    return rows;
  };
  const cached = db.prepare(SQL);
  const once = (id) => {
    if (preparedOnce) return run(cached, id);
    const statement = db.prepare(SQL);
    try {
      return run(statement, id);
    } finally {
      statement.free();
    }
  };
  for (let call = 0; call < WARM_UP_CALLS; call += 1) once((call % ROWS) + 1);
  const started = performance.now();
  for (let call = 0; call < QUERY_CALLS; call += 1) {
    if (once((call % ROWS) + 1).length !== 1) throw new Error('expected one row');
  }
  const elapsed = performance.now() - started;
  cached.free();
  db.close();
  return (elapsed / QUERY_CALLS) * 1_000;
}

/** µs per call of the same SELECT through Python's sqlite3 (the native SQLite library), for reference. */
function pythonSqliteMicroseconds(executable, path) {
  const script = [
    'import sqlite3, sys, time',
    'db = sqlite3.connect(sys.argv[1])',
    `sql = ${JSON.stringify(SQL)}`,
    `for i in range(${WARM_UP_CALLS}): db.execute(sql, (i % ${ROWS} + 1,)).fetchall()`,
    'start = time.perf_counter()',
    `for i in range(${QUERY_CALLS}): assert len(db.execute(sql, (i % ${ROWS} + 1,)).fetchall()) == 1`,
    `print((time.perf_counter() - start) / ${QUERY_CALLS} * 1e6)`,
  ].join('\n');
  return Number(execFileSync(executable, ['-c', script, path], { encoding: 'utf8' }));
}

/**
 * Measures `rounds` rounds of `QUERY_CALLS` sequential `query` calls in one script each (after a warm-up), each
 * round next to the same calls made directly through sql.js, and to the same script calling a host tool that returns
 * such a row without a database. Resolves medians in µs per call.
 */
export async function measureDatabaseQueries({ stateDir, rounds }) {
  const directory = mkdtempSync(join(tmpdir(), 'codecall-bench-database-'));
  try {
    const path = await createDatabase(directory);
    // A host tool that returns a row like the query's, for the cost of the tool call alone.
    const row = defineTool({
      name: 'row',
      description: 'Returns one row like the query does.',
      inputSchema: { type: 'object', properties: { sql: { type: 'string' }, params: { type: 'array' } } },
      execute: ({ params }) => ({
        columns: ['id', 'name', 'price'],
        rows: [{ id: params[0], name: `item ${params[0]}`, price: params[0] * 1.25 }],
        rowCount: 1,
        truncated: false,
      }),
    });
    const codecall = createCodecall({
      sandbox: 'none',
      stateDir,
      tools: [row],
      databases: { items: `sqlite:${path}` },
      limits: { maxToolCalls: QUERY_CALLS + WARM_UP_CALLS + 10 },
    });
    const script = (imported) =>
      [
        'import time',
        imported,
        `sql = ${JSON.stringify(SQL)}`,
        `for i in range(${WARM_UP_CALLS}):`,
        `    query(sql, [i % ${ROWS} + 1])`,
        'start = time.perf_counter()',
        `for i in range(${QUERY_CALLS}):`,
        `    assert query(sql, [i % ${ROWS} + 1])["rowCount"] == 1`,
        `print((time.perf_counter() - start) / ${QUERY_CALLS} * 1e6)`,
      ].join('\n');
    const run = async (imported) => {
      const result = await codecall.execute(script(imported));
      if (result.status !== 'success') throw new Error(`run failed: ${JSON.stringify(result)}`);
      return Number(result.stdout);
    };
    const viaTool = [];
    const hostTool = [];
    const direct = [];
    const directPreparedEach = [];
    try {
      for (let round = 0; round < rounds; round += 1) {
        viaTool.push(await run('from tools.items import query'));
        hostTool.push(await run('from tools import row as query'));
        direct.push(await directMicroseconds(path, { preparedOnce: true }));
        directPreparedEach.push(await directMicroseconds(path, { preparedOnce: false }));
      }
    } finally {
      await codecall.close();
    }
    const interpreter = await resolvePythonInterpreter('python3');
    return {
      query: median(viaTool),
      toolCall: median(hostTool),
      driver: median(direct),
      driverPreparedEachCall: median(directPreparedEach),
      pythonSqlite: pythonSqliteMicroseconds(interpreter.executable, path),
    };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-'));
  try {
    const figures = await measureDatabaseQueries({ stateDir, rounds: Number(process.env.BENCH_ROUNDS ?? 5) });
    console.log(`${QUERY_CALLS} sequential one-row SELECTs on SQLite, µs per call (medians):`);
    console.log(`  query() from a script, through codecall        ${figures.query.toFixed(1)}`);
    console.log(`  a host tool returning such a row, same script   ${figures.toolCall.toFixed(1)}`);
    console.log(`  sql.js in Node, statement prepared once         ${figures.driver.toFixed(1)}`);
    console.log(`  sql.js in Node, prepared for each call          ${figures.driverPreparedEachCall.toFixed(1)}`);
    console.log(`  Python's sqlite3 (native SQLite), for reference ${figures.pythonSqlite.toFixed(1)}`);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}
