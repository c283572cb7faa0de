import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_BAD_CONFIGURATION, EXIT_SCRIPT_FAILED, EXIT_SUCCESS, main } from '../../src/cli/command-line.js';

// The command line called as a function with streams of its own: no built binary, no child process.
const folder = mkdtempSync(join(tmpdir(), 'codecall-cli-in-process-'));
const workspace = join(folder, 'workspace');
const configFile = join(folder, 'codecall.json');
mkdirSync(workspace);
writeFileSync(configFile, JSON.stringify({ sandbox: 'none', stateDir: 'state', workspace: 'workspace' }));

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

interface Completed {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

function collect(stream: PassThrough): () => string {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return () => Buffer.concat(chunks).toString('utf8');
}

async function codecall(args: readonly string[], input = ''): Promise<Completed> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const [readStdout, readStderr] = [collect(stdout), collect(stderr)];
  const status = await main(args, { stdin: Readable.from([Buffer.from(input)]), stdout, stderr });
  return { status, stdout: readStdout(), stderr: readStderr() };
}

describe('main called in process', () => {
  it('runs a script from stdin and prints the result object with --json', async () => {
    const result = await codecall(['run', '-', '--config', configFile, '--json'], 'print(6 * 7)');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(EXIT_SUCCESS);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'success', stdout: '42\n', exitCode: 0, toolCalls: 0 });
  });

  it('runs a script file that calls the built-in file tools in the configured workspace', async () => {
    writeFileSync(join(workspace, 'note.txt'), 'from the workspace');
    const script = join(folder, 'read-note.py');
    writeFileSync(script, 'from tools import read_file\nprint(read_file("note.txt")["content"])');
    const result = await codecall(['run', script, '--config', configFile]);
    expect(result).toEqual({ status: EXIT_SUCCESS, stdout: 'from the workspace\n', stderr: '' });
  });

  it('exits 1 and shows the error when the script fails', async () => {
    const result = await codecall(['run', '-', '--config', configFile], 'raise ValueError("bad input")');
    expect(result.status).toBe(EXIT_SCRIPT_FAILED);
    expect(result.stdout).toContain('[status: error]');
    expect(result.stdout).toContain('ValueError: bad input');
  });

  it.each([
    [{ colour: 'blue' }, /^codecall: unknown key "colour" in .*bad\.json; known keys: builtinTools, workspace, /],
    [{ env: { LD_PRELOAD: '/x.so' } }, /^codecall: env: "LD_PRELOAD" cannot be set for scripts/],
    [{ network: 'yes' }, /^codecall: network must be true or false, got "yes"$/],
    [{ pool: { size: 1, warm: true } }, /^codecall: unknown key "warm" in pool; known keys: size$/],
  ])('exits 2 with one line on stderr for the bad configuration %j', async (config, message) => {
    const badConfig = join(folder, 'bad.json');
    writeFileSync(badConfig, JSON.stringify({ sandbox: 'none', ...config }));
    const result = await codecall(['run', '-', '--config', badConfig], 'print(1)');
    expect(result.status).toBe(EXIT_BAD_CONFIGURATION);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });

  it('prints the usage on stdout for --help, and exits 2 with it without a command', async () => {
    const help = await codecall(['--help']);
    expect(help).toMatchObject({ status: EXIT_SUCCESS, stderr: '' });
    expect(help.stdout).toMatch(/^usage: codecall <command> \[options\]/);
    const bare = await codecall([]);
    expect(bare.status).toBe(EXIT_BAD_CONFIGURATION);
    expect(bare.stdout).toBe(help.stdout);
  });

  it('prints the generated module with stubs', async () => {
    const result = await codecall(['stubs', '--config', configFile]);
    expect(result.status).toBe(EXIT_SUCCESS);
    expect(result.stdout).toContain('# ===== tools/__init__.py =====');
    expect(result.stdout).toMatch(/def read_file\(path: str/);
  });

  it('shows the interpreter, the isolation and the limits with doctor', async () => {
    const result = await codecall(['doctor', '--config', configFile, '--timeout', '30']);
    expect(result.status).toBe(EXIT_SUCCESS);
    expect(result.stdout).toMatch(/^python\s+\/.*python3.* \(Python 3\.\d+\.\d+, from "python3"\)$/m);
    expect(result.stdout).toMatch(/^isolation\s+none \(sandbox: none\)$/m);
    expect(result.stdout).toMatch(/^limits\s+timeout 30 seconds, 1,000 tool calls/m);
    expect(result.stdout).toMatch(/^limits\s+.*, files 100 MiB, disk 512 MiB,/m);
    expect(result.stdout).toMatch(/^disk\s+NOT BOUNDED without a sandbox: the run directory is on the host's disk/m);
  });

  it('serves execute_code over its stdin and stdout until the input ends, then lets go of the signals', async () => {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const readStderr = collect(stderr);
    const lines: Record<string, unknown>[] = [];
    let buffered = '';
    const listed = new Promise<void>((resolve) => {
      stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        const complete = buffered.split('\n');
        buffered = complete.pop() ?? '';
        for (const line of complete) {
          const message = JSON.parse(line) as Record<string, unknown>;
          lines.push(message);
          if (message.id === 2) resolve();
        }
      });
    });
    const signalListeners = process.listenerCount('SIGINT');
    const served = main(['serve', '--config', configFile], { stdin, stdout, stderr });
    const send = (message: Record<string, unknown>) =>
      stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    send({
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'in-process', version: '1' } },
    });
    send({ method: 'notifications/initialized' });
    send({ id: 2, method: 'tools/list', params: {} });
    await listed;
    stdin.end();
    expect(await served).toBe(EXIT_SUCCESS);
    expect(readStderr()).toBe('');
    // Called in process, serve leaves no signal handler behind.
    expect(process.listenerCount('SIGINT')).toBe(signalListeners);
    const listing = lines.find((message) => message.id === 2) as { result: { tools: { name: string }[] } };
    expect(listing.result.tools.map((tool) => tool.name)).toEqual(['execute_code']);
  });
});
