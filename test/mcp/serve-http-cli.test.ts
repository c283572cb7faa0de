import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { initializeBody, type RequestTarget, rawRequest } from './http-requests.js';
import { CLI_PATH } from './mcp-test-servers.js';

const run = promisify(execFile);
const directory = mkdtempSync(join(tmpdir(), 'codecall-serve-http-'));
const configFile = join(directory, 'codecall.json');
writeFileSync(configFile, JSON.stringify({ sandbox: 'none', builtinTools: [], stateDir: join(directory, 'state') }));
const TOKEN = 'cli-configured-token-0123456789';
const asRoot = process.getuid?.() === 0;
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(directory, { recursive: true, force: true });
});

/** Environment of the command line without a token of the test runner's. */
function environment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { CODECALL_HTTP_TOKEN: _ignored, ...rest } = process.env;
  return { ...rest, ...extra };
}

function tokenFile(name: string, content: string, mode = 0o600): string {
  const path = join(directory, name);
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

/** Starts `codecall serve` and resolves once it says where it serves, with everything it printed by then. */
function startServe(args: string[], extraEnvironment: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI_PATH, 'serve', '--config', configFile, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: environment(extraEnvironment),
  });
  children.push(child);
  return new Promise<{ child: ChildProcess; stderr: string; target: RequestTarget }>((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += String(chunk);
      if (!stderr.includes('Authorization: Bearer')) return;
      const socketPath = /on the Unix socket (\S+) /.exec(stderr)?.[1];
      const url = /(http:\/\/\S+\/mcp)/.exec(stderr)?.[1];
      if (url !== undefined) resolve({ child, stderr, target: { url, socketPath } });
    });
    child.once('exit', (code) => reject(new Error(`codecall serve exited with ${code}: ${stderr}`)));
  });
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  return exited;
}

async function initializeStatus(target: RequestTarget, token?: string): Promise<number> {
  const headers: Record<string, string> = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  return (await rawRequest(target, { headers, body: initializeBody() })).status;
}

/** Runs the command line to its end; resolves with its exit status and output. */
async function cli(args: string[], extraEnvironment: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI_PATH, ...args], { env: environment(extraEnvironment) });
    return { status: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { status: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

describe('codecall serve --http: where the token comes from', () => {
  it('takes the token from --token-file without printing it', async () => {
    expect(existsSync(CLI_PATH), 'dist/cli/main.js is missing: run `npm run build` (npm test does)').toBe(true);
    const file = tokenFile('token', `${TOKEN}\n`);
    const { child, stderr, target } = await startServe(['--http', '0', '--token-file', file]);
    expect(stderr).toContain(`with the token from file ${file}`);
    expect(stderr).not.toContain(TOKEN);
    expect(await initializeStatus(target)).toBe(401);
    expect(await initializeStatus(target, 'another-token-0123456789')).toBe(401);
    expect(await initializeStatus(target, TOKEN)).toBe(200);
    expect(await stop(child)).toBe(0);
  });

  it(`takes the token from CODECALL_HTTP_TOKEN without printing it`, async () => {
    const { child, stderr, target } = await startServe(['--http', '0'], { CODECALL_HTTP_TOKEN: TOKEN });
    expect(stderr).toContain('with the token from CODECALL_HTTP_TOKEN');
    expect(stderr).not.toContain(TOKEN);
    expect(await initializeStatus(target)).toBe(401);
    expect(await initializeStatus(target, TOKEN)).toBe(200);
    expect(await stop(child)).toBe(0);
  });

  it('serves on a Unix socket with --http unix:PATH', async () => {
    const folder = join(directory, 'sockets');
    mkdirSync(folder, { mode: 0o700 });
    const path = join(folder, 'codecall.sock');
    const { child, stderr, target } = await startServe(['--http', `unix:${path}`], { CODECALL_HTTP_TOKEN: TOKEN });
    expect(stderr).toContain(`on the Unix socket ${path} (mode 0600)`);
    expect(target.socketPath).toBe(path);
    expect(await initializeStatus(target, TOKEN)).toBe(200);
    expect(await stop(child)).toBe(0);
    expect(existsSync(path)).toBe(false);
  });

  it.each([
    [
      'a file others can read',
      () => tokenFile('readable', TOKEN, 0o644),
      'other users can read or write it (mode 644)',
    ],
    ['a file others can write', () => tokenFile('writable', TOKEN, 0o602), 'other users can read or write it'],
    [
      'a link to a private file',
      () => {
        const link = join(directory, 'link');
        symlinkSync(tokenFile('target', TOKEN), link);
        return link;
      },
      'it is a symbolic link',
    ],
    ['a folder', () => directory, 'it is not a regular file'],
    ['a missing file', () => join(directory, 'missing'), 'cannot be opened (ENOENT)'],
    ['a token too short', () => tokenFile('short', 'abc\n'), 'has 3 characters; a bearer token needs at least 16'],
    ['a token with spaces', () => tokenFile('spaces', 'two words in one token\n'), 'characters a bearer token cannot'],
    ['an empty file', () => tokenFile('empty', ''), 'has 0 characters'],
  ])('refuses %s as --token-file', async (_name, makeFile, message) => {
    const result = await cli(['serve', '--config', configFile, '--http', '0', '--token-file', makeFile()]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stderr).not.toContain(TOKEN);
  });

  it.skipIf(!asRoot)("refuses another user's file as --token-file", async () => {
    const file = tokenFile('theirs', TOKEN);
    chownSync(file, 65_534, 65_534);
    const result = await cli(['serve', '--config', configFile, '--http', '0', '--token-file', file]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('it belongs to another user (uid 65534)');
  });

  it('refuses the token given twice, a short CODECALL_HTTP_TOKEN, and HTTP flags without --http', async () => {
    const file = tokenFile('both', TOKEN);
    const both = await cli(['serve', '--config', configFile, '--http', '0', '--token-file', file], {
      CODECALL_HTTP_TOKEN: TOKEN,
    });
    expect(both).toMatchObject({ status: 2, stderr: expect.stringContaining('give the token one way') });
    const short = await cli(['serve', '--config', configFile, '--http', '0'], { CODECALL_HTTP_TOKEN: 'short' });
    expect(short).toMatchObject({ status: 2, stderr: expect.stringContaining('CODECALL_HTTP_TOKEN has 5 characters') });
    const withoutHttp = await cli(['serve', '--config', configFile, '--token-file', file]);
    expect(withoutHttp).toMatchObject({
      status: 2,
      stderr: expect.stringContaining('--token-file applies to serve --http'),
    });
    const hostOnSocket = await cli(['serve', '--config', configFile, '--http', 'unix:/nowhere.sock', '--host', '::1']);
    expect(hostOnSocket).toMatchObject({ status: 2, stderr: expect.stringContaining('not to a Unix socket') });
    const badPort = await cli(['serve', '--config', configFile, '--http', '80a']);
    expect(badPort).toMatchObject({ status: 2, stderr: expect.stringContaining('or unix:PATH, got "80a"') });
  });
});

describe('codecall doctor: the HTTP authentication line', () => {
  it('says where the token comes from, or that one is generated at each start', async () => {
    const generated = await cli(['doctor', '--config', configFile]);
    expect(generated.stdout).toMatch(
      /^http {9}authentication: bearer token on every request, a random one generated at each start/m,
    );
    const fromEnvironment = await cli(['doctor', '--config', configFile], { CODECALL_HTTP_TOKEN: TOKEN });
    expect(fromEnvironment.stdout).toMatch(
      /^http {9}authentication: bearer token on every request, from CODECALL_HTTP_TOKEN;/m,
    );
    expect(fromEnvironment.stdout).not.toContain(TOKEN);
    const file = tokenFile('doctor', TOKEN);
    const fromFile = await cli(['doctor', '--config', configFile, '--token-file', file]);
    expect(fromFile.stdout).toContain(`authentication: bearer token on every request, from file ${file};`);
    expect(fromFile.status).toBe(generated.status);
  });

  it('reports a token that cannot be used, and exits 1', async () => {
    const file = tokenFile('doctor-readable', TOKEN, 0o644);
    const result = await cli(['doctor', '--config', configFile, '--token-file', file]);
    expect(result.stdout).toContain('authentication: NOT USABLE: --token-file');
    expect(result.stdout).toContain('other users can read or write it');
    expect(result.status).toBe(1);
  });
});
