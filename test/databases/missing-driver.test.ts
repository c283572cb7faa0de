import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPOSITORY_ROOT } from '../mcp/mcp-test-servers.js';

// The built package installed the way a user gets it without the optional drivers: its dependencies, no pg, no sql.js.
const project = mkdtempSync(join(tmpdir(), 'codecall-no-drivers-'));
const modules = join(project, 'node_modules');
const installed = join(modules, 'codecall');
mkdirSync(installed, { recursive: true });
for (const entry of ['package.json', 'dist', 'python']) {
  cpSync(join(REPOSITORY_ROOT, entry), join(installed, entry), { recursive: true });
}
for (const dependency of ['ajv', '@modelcontextprotocol']) {
  symlinkSync(join(REPOSITORY_ROOT, 'node_modules', dependency), join(modules, dependency));
}

afterAll(() => {
  rmSync(project, { recursive: true, force: true });
});

/** Runs an ES module in the project and returns what it printed. */
function runInProject(source: string): string {
  const script = join(project, `script-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(script, source);
  return execFileSync(process.execPath, [script], { cwd: project, encoding: 'utf8' });
}

describe('without the optional database drivers installed', () => {
  it('runs scripts, and a database names the package to install when the codecall is created', () => {
    const output = runInProject(`
      import { createCodecall } from 'codecall';
      const stateDir = ${JSON.stringify(join(project, 'state'))};
      const codecall = createCodecall({ sandbox: 'none', stateDir });
      const result = await codecall.execute('print(6 * 7)');
      await codecall.close();
      console.log(result.stdout.trim());
      for (const url of ['sqlite:./sales.db', 'postgres://app:s3cret@db.example:5432/shop']) {
        try {
          createCodecall({ sandbox: 'none', stateDir, databases: { sales: url } });
          console.log('created');
        } catch (error) {
          console.log(error.code, error.message);
        }
      }
    `);
    expect(output).toBe(
      [
        '42',
        'INVALID_CONFIG database "sales" is a SQLite database, whose driver package sql.js is not installed; ' +
          'install it beside codecall: npm install sql.js',
        'INVALID_CONFIG database "sales" is a PostgreSQL database, whose driver package pg is not installed; ' +
          'install it beside codecall: npm install pg',
        '',
      ].join('\n'),
    );
  });
});
