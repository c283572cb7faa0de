import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_PATH, filesystemServer, packageBin } from './mcp-test-servers.js';

const run = promisify(execFile);
const directory = mkdtempSync(join(tmpdir(), 'codecall-mcp-inspector-'));
const filesRoot = join(directory, 'files');

/**
 * Runs the MCP Inspector's CLI mode against `codecall serve` (stdio). The server is started in `directory`, where it
 * finds codecall.json (the Inspector has a `--config` option of its own).
 */
async function inspect(...inspectorArguments: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(
    process.execPath,
    [
      packageBin('@modelcontextprotocol/inspector'),
      '--cli',
      process.execPath,
      CLI_PATH,
      'serve',
      ...inspectorArguments,
    ],
    { cwd: directory, timeout: 60_000 },
  );
  return JSON.parse(stdout) as Record<string, unknown>;
}

beforeAll(() => {
  mkdirSync(filesRoot);
  writeFileSync(join(filesRoot, 'a.txt'), 'alpha\n');
  writeFileSync(
    join(directory, 'codecall.json'),
    JSON.stringify({
      sandbox: 'none',
      stateDir: join(directory, 'state'),
      builtinTools: [],
      mcpServers: { fs: filesystemServer(filesRoot) },
    }),
  );
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

describe('the MCP Inspector CLI against codecall serve', () => {
  it('lists execute_code and calls it; a failing script comes back with isError', async () => {
    expect(existsSync(CLI_PATH), 'dist/cli/main.js is missing: run `npm run build` (npm test does)').toBe(true);
    const listing = await inspect('--method', 'tools/list');
    expect(listing.tools).toEqual([expect.objectContaining({ name: 'execute_code' })]);

    const path = JSON.stringify(join(filesRoot, 'a.txt'));
    const success = await inspect(
      '--method',
      'tools/call',
      '--tool-name',
      'execute_code',
      '--tool-arg',
      `code=from tools.fs import read_text_file; print(read_text_file(path=${path})["content"].upper())`,
    );
    expect(success).toMatchObject({ content: [{ type: 'text', text: 'ALPHA\n' }], isError: false });
    expect(success.structuredContent).toMatchObject({ status: 'success', toolCalls: 1 });

    const failure = await inspect('--method', 'tools/call', '--tool-name', 'execute_code', '--tool-arg', 'code=1/0');
    expect(failure).toMatchObject({ isError: true, structuredContent: { status: 'error' } });
    expect(JSON.stringify(failure.content)).toContain('ZeroDivisionError');
  });
});
