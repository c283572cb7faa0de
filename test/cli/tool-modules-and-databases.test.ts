import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_BAD_CONFIGURATION, EXIT_SUCCESS, main } from '../../src/cli/command-line.js';
import { memoryServer } from '../mcp/mcp-test-servers.js';
import { createSqliteFile } from '../support/sqlite-files.js';

// codecall.json with toolModules, databases and narrowed tool sets, through the command line called in process.
const folder = mkdtempSync(join(tmpdir(), 'codecall-cli-tool-modules-'));
const workspace = join(folder, 'workspace');
const modules = join(folder, 'modules');
mkdirSync(workspace);
mkdirSync(modules);
mkdirSync(join(folder, 'data'));

const ADD_TOOL = `{
  name: 'add',
  description: 'Adds two numbers.',
  inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  execute: ({ a, b }) => a + b,
}`;
const SHOUT_TOOL = `{
  name: 'shout',
  description: 'Upper-cases a text.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: async ({ text }) => text.toUpperCase(),
}`;

beforeAll(async () => {
  // Named exports of an ES module, and the default export (module.exports) of a CommonJS one.
  writeFileSync(join(modules, 'arithmetic.mjs'), `export const add = ${ADD_TOOL};\n`);
  writeFileSync(join(modules, 'text.cjs'), `module.exports = [${SHOUT_TOOL}];\n`);
  writeFileSync(join(modules, 'helpers.mjs'), `export const add = ${ADD_TOOL};\nexport const VERSION = 3;\n`);
  writeFileSync(join(modules, 'empty.mjs'), 'export default [];\n');
  writeFileSync(join(modules, 'broken.mjs'), 'export const = ;\n');
  await createSqliteFile(
    join(folder, 'data', 'sales.db'),
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, amount REAL); INSERT INTO orders VALUES (1, 9.5), (2, 10.5);',
  );
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

interface Completed {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function codecall(args: readonly string[], input = ''): Promise<Completed> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  stdout.on('data', (chunk: Buffer) => chunks.stdout.push(chunk));
  stderr.on('data', (chunk: Buffer) => chunks.stderr.push(chunk));
  const status = await main(args, { stdin: Readable.from([Buffer.from(input)]), stdout, stderr });
  return {
    status,
    stdout: Buffer.concat(chunks.stdout).toString('utf8'),
    stderr: Buffer.concat(chunks.stderr).toString('utf8'),
  };
}

function writeConfig(name: string, config: Record<string, unknown>): string {
  const file = join(folder, name);
  writeFileSync(file, JSON.stringify({ sandbox: 'none', stateDir: 'state', workspace: 'workspace', ...config }));
  return file;
}

describe('toolModules in codecall.json', () => {
  const configFile = writeConfig('codecall.json', {
    toolModules: ['modules/arithmetic.mjs', './modules/text.cjs'],
    builtinTools: ['files:read'],
    databases: { sales: 'sqlite:data/sales.db' },
  });

  it('loads the tools of the modules for run, beside the read-only files and a database relative to the file', async () => {
    const result = await codecall(
      ['run', '-', '--config', configFile],
      [
        'from tools import add, shout',
        'from tools.sales import query',
        'print(add(a=2, b=3), shout(text="hi"))',
        'print(query("SELECT sum(amount) AS total FROM orders")["rows"])',
        'import tools',
        'print(hasattr(tools, "write_file"), hasattr(tools, "read_file"))',
      ].join('\n'),
    );
    expect(result).toEqual({ status: EXIT_SUCCESS, stdout: "5 HI\n[{'total': 20}]\nFalse True\n", stderr: '' });
  });

  it('shows the tools, the built-in sets, the databases and narrowed servers in doctor', async () => {
    const doctorConfig = writeConfig('doctor.json', {
      toolModules: ['modules/arithmetic.mjs'],
      builtinTools: ['files:read'],
      databases: { sales: 'sqlite:data/sales.db', gone: 'sqlite:data/missing.db' },
      mcpServers: { memory: { ...memoryServer(join(folder, 'memory.jsonl')), readOnly: true } },
    });
    const result = await codecall(['doctor', '--config', doctorConfig]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(EXIT_SUCCESS);
    expect(result.stdout).toMatch(
      /^builtin\s+files:read \(read_file, list_files, search_files\); left out: write_file$/m,
    );
    expect(result.stdout).toMatch(/^tools\s+add$/m);
    expect(result.stdout).toMatch(
      /^mcp server\s+memory: ready: 3 of the server's 9 tools \(readOnly: only the tools it marks read-only\); left out: create_entities, create_relations, add_observations, delete_entities, delete_observations, delete_relations$/m,
    );
    expect(result.stdout).toContain(
      `database     sales: SQLite ${join(folder, 'data', 'sales.db')}, read-only: 1 table or view\n`,
    );
    expect(result.stdout).toMatch(/^database\s+gone: SQLite .*missing\.db, read-only: FAILED: gone\.tables: ENOENT/m);
  });

  it('loads the tools for serve too: the description lists them', async () => {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const lines: { id?: number; result?: { tools: { description: string }[] } }[] = [];
    let buffered = '';
    const listed = new Promise<void>((resolve) => {
      stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        const complete = buffered.split('\n');
        buffered = complete.pop() ?? '';
        for (const line of complete) {
          const message = JSON.parse(line) as (typeof lines)[number];
          lines.push(message);
          if (message.id === 2) resolve();
        }
      });
    });
    const served = main(['serve', '--config', configFile], { stdin, stdout, stderr: new PassThrough() });
    const send = (message: Record<string, unknown>) =>
      stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
    });
    send({ method: 'notifications/initialized' });
    send({ id: 2, method: 'tools/list', params: {} });
    await listed;
    stdin.end();
    expect(await served).toBe(EXIT_SUCCESS);
    const description = lines.find((message) => message.id === 2)?.result?.tools[0]?.description ?? '';
    expect(description).toContain('- add(a: float, b: float) -> Any — Adds two numbers.');
    expect(description).toContain('- shout(text: str) -> Any — Upper-cases a text.');
    expect(description).toContain('SQLite database, read-only.');
  });

  it.each([
    [
      ['modules/nothing.mjs'],
      /^codecall: .*bad\.json: tool module modules\/nothing\.mjs was not found \(looked for .*modules\/nothing\.mjs\)$/,
    ],
    [
      ['modules/helpers.mjs'],
      /^codecall: .*bad\.json: tool module modules\/helpers\.mjs exports "VERSION", which is not a tool made with defineTool or an array of them: invalid tool: expected an object/,
    ],
    [['modules/empty.mjs'], /^codecall: .*bad\.json: tool module modules\/empty\.mjs exports no tools/],
    [['modules/broken.mjs'], /^codecall: .*bad\.json: tool module modules\/broken\.mjs failed to load: /],
    ['modules/arithmetic.mjs', /^codecall: .*bad\.json: "toolModules" must be a list of paths of JavaScript modules/],
  ])('exits 2 with one line naming the problem for toolModules %j', async (toolModules, message) => {
    const badConfig = writeConfig('bad.json', { toolModules });
    const result = await codecall(['run', '-', '--config', badConfig], 'print(1)');
    expect(result.stdout).toBe('');
    expect(result.status).toBe(EXIT_BAD_CONFIGURATION);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });

  it('names both modules when two of them define a tool of the same name', async () => {
    writeFileSync(join(modules, 'more-arithmetic.mjs'), `export default ${ADD_TOOL};\n`);
    const badConfig = writeConfig('duplicate.json', {
      toolModules: ['modules/arithmetic.mjs', 'modules/more-arithmetic.mjs'],
    });
    const result = await codecall(['doctor', '--config', badConfig]);
    expect(result.status).toBe(EXIT_BAD_CONFIGURATION);
    expect(result.stderr).toMatch(
      /^codecall: .*duplicate\.json: two tools are named "add": export "add" of modules\/arithmetic\.mjs and export "default" of modules\/more-arithmetic\.mjs; tool names must be unique, so rename one of them\n$/,
    );
  });

  it('refuses a tool module tool named like a built-in tool', async () => {
    writeFileSync(join(modules, 'reader.mjs'), `export default { ...${ADD_TOOL}, name: 'read_file' };\n`);
    const badConfig = writeConfig('clash.json', { toolModules: ['modules/reader.mjs'], builtinTools: ['files'] });
    const result = await codecall(['run', '-', '--config', badConfig], 'print(1)');
    expect(result.status).toBe(EXIT_BAD_CONFIGURATION);
    expect(result.stderr).toMatch(/two tools are named 'read_file'/);
  });
});
