import { execFileSync } from 'node:child_process';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';

/**
 * Creates (or extends) a real SQLite file with Python's `sqlite3` module, which links the system's SQLite library:
 * the files the tests read are made by another SQLite than the one codecall reads them with.
 */
export async function createSqliteFile(path: string, script: string): Promise<void> {
  const interpreter = await resolvePythonInterpreter('python3');
  execFileSync(
    interpreter.executable,
    [
      '-c',
      'import sqlite3, sys\nwith sqlite3.connect(sys.argv[1]) as db:\n    db.executescript(sys.stdin.read())\ndb.close()',
      path,
    ],
    { input: script },
  );
}

/** Rows of a query on a SQLite file, read with Python's `sqlite3` (to check what a write left on disk). */
export async function readSqliteRows(path: string, sql: string): Promise<unknown[][]> {
  const interpreter = await resolvePythonInterpreter('python3');
  const output = execFileSync(interpreter.executable, [
    '-c',
    'import json, sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\nprint(json.dumps(db.execute(sys.argv[2]).fetchall()))',
    path,
    sql,
  ]);
  return JSON.parse(output.toString('utf8')) as unknown[][];
}
