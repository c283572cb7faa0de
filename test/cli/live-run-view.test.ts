import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_SUCCESS, main } from '../../src/cli/command-line.js';

const folder = mkdtempSync(join(tmpdir(), 'codecall-cli-live-'));
const configFile = join(folder, 'codecall.json');
writeFileSync(configFile, JSON.stringify({ sandbox: 'none', stateDir: 'state', workspace: '.' }));
writeFileSync(join(folder, 'note.txt'), 'hello');

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

const SCRIPT = [
  'from tools import read_file, ToolError',
  'print("first line", flush=True)',
  'print(read_file("note.txt")["content"])',
  'try:',
  '    read_file("missing.txt")',
  'except ToolError:',
  '    print("\\x1b[2Jno such file")',
].join('\n');

async function run(terminal: boolean) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  // A terminal stream says so with `isTTY`; a pipe has none.
  if (terminal) Object.assign(stdout, { isTTY: true });
  const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  stdout.on('data', (chunk: Buffer) => chunks.stdout.push(chunk));
  stderr.on('data', (chunk: Buffer) => chunks.stderr.push(chunk));
  const status = await main(['run', '-', '--config', configFile], {
    stdin: Readable.from([Buffer.from(SCRIPT)]),
    stdout,
    stderr,
  });
  return { status, stdout: Buffer.concat(chunks.stdout).toString(), stderr: Buffer.concat(chunks.stderr).toString() };
}

describe('codecall run, live', () => {
  it('shows tool calls and output as they happen on a terminal, cleaned, besides the result', async () => {
    const result = await run(true);
    expect(result.status).toBe(EXIT_SUCCESS);
    const lines = result.stderr.split('\n');
    expect(lines[0]).toBe('first line');
    expect(lines[1]).toBe('→ read_file({"path":"note.txt"})');
    expect(lines[2]).toMatch(/^← read_file \d+ ms$/);
    expect(lines[3]).toBe('hello');
    expect(lines[4]).toBe('→ read_file({"path":"missing.txt"})');
    expect(lines[5]).toMatch(/^✗ read_file \d+ ms: .*missing\.txt/);
    expect(lines[6]).toBe('no such file');
    expect(lines[7]).toMatch(/^── success after \d+ ms ──$/);
    expect(result.stderr).not.toContain('\x1b');
    expect(result.stdout).toContain('first line\nhello\nno such file');
  });

  it('stays quiet when its output is piped: the result alone', async () => {
    const result = await run(false);
    expect(result.status).toBe(EXIT_SUCCESS);
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('first line\nhello\nno such file');
  });
});
