import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { SETTLED_FILE_AGE_NS } from '../../src/cli/code-cache.js';
import { FIXTURE_SERVER_PATH } from '../mcp/mcp-test-servers.js';
import { runToCompletion } from '../support/completed-process.js';

/**
 * A one-shot `codecall run` loads no built-in module it does not need: `node:crypto` (the module, its binding and its
 * fifteen internal modules) cost a run several milliseconds while nothing on its path needs a cryptographic hash.
 * Checked on the installed command, from the list of built-in modules the process loaded, written as it exits.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const command = join(root, 'dist/cli/main.cjs');
const bundle = join(root, 'dist/cli/command-line-bundle.cjs');

// Traversable by a run's own uid (a sandbox as root runs the script as another user); a fresh state folder inside.
const temporary = mkdtempSync(join(tmpdir(), 'codecall-lean-start-'));
chmodSync(temporary, 0o711);
afterAll(() => rmSync(temporary, { recursive: true, force: true }));

const hook = join(temporary, 'loaded-modules.cjs');
// The list as the process exits, and as it was when the process first spawned a child (the run's launch); and the
// files the process loaded as CommonJS modules.
writeFileSync(
  hook,
  [
    "const child = require('node:child_process');",
    'const spawn = child.ChildProcess.prototype.spawn;',
    'let atLaunch;',
    'child.ChildProcess.prototype.spawn = function (...args) {',
    "  atLaunch ??= process.moduleLoadList.join('\\n');",
    '  return spawn.apply(this, args);',
    '};',
    "process.on('exit', () => {",
    "  const { writeFileSync } = require('node:fs');",
    "  writeFileSync(process.env.LOADED_MODULES_FILE, process.moduleLoadList.join('\\n'));",
    "  writeFileSync(process.env.LOADED_MODULES_FILE + '.launch', atLaunch ?? '');",
    "  writeFileSync(process.env.LOADED_MODULES_FILE + '.files', Object.keys(require.cache).join('\\n'));",
    '});',
    '',
  ].join('\n'),
);
const script = join(temporary, 'print.py');
writeFileSync(script, 'print(1)\n');

/** The environment of a command the hook lists the modules of, into `listFile` and the files beside it. */
function hookedEnvironment(listFile: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: temporary, LOADED_MODULES_FILE: listFile };
}

/**
 * Runs `codecall run` on the script (`print(1)` unless `runArguments` name another, with options before it), its
 * standard input an empty pipe, or /dev/null for `input: null`; its output, the built-in modules its process loaded,
 * and the module files.
 */
async function run(
  name: string,
  round: number,
  sandbox = name,
  input: '' | null = '',
  runArguments: readonly string[] = [script],
) {
  const listFile = join(temporary, `loaded-${name}-${round}.txt`);
  const completed = await runToCompletion(
    process.execPath,
    ['-r', hook, command, 'run', '--sandbox', sandbox, ...runArguments],
    { cwd: temporary, env: hookedEnvironment(listFile), input },
  );
  return {
    completed,
    loaded: readFileSync(listFile, 'utf8').split('\n'),
    loadedAtLaunch: readFileSync(`${listFile}.launch`, 'utf8').split('\n'),
    loadedFiles: readFileSync(`${listFile}.files`, 'utf8').split('\n'),
  };
}

describe('codecall run', () => {
  it.each(['none', 'auto'])(
    'loads no node:crypto (--sandbox %s), the first time nor the next',
    async (sandbox) => {
      // A bundle changed in the last seconds is keyed by a SHA-256 of its text (see code-cache.ts): wait till it settles.
      const bundleAge = BigInt(Date.now()) * 1_000_000n - statSync(bundle, { bigint: true }).ctimeNs;
      if (bundleAge < SETTLED_FILE_AGE_NS) await sleep(Number((SETTLED_FILE_AGE_NS - bundleAge) / 1_000_000n) + 100);
      // The first run writes the code cache, the module folders and the sandbox files; the next one finds them.
      for (const round of [1, 2]) {
        const { completed, loaded } = await run(sandbox, round);
        expect(completed).toMatchObject({ status: 0, stdout: '1\n' });
        // The list is the process's own: it has what a run does need.
        expect(loaded).toContain('NativeModule child_process');
        expect(loaded.filter((name) => /\bcrypto\b/.test(name))).toEqual([]);
      }
    },
    60_000,
  );

  // The sandboxed run (the default) launches first thing once its caches are filled: its first child is its launch.
  it('loads before its launch no module only the rest of the run needs (--sandbox auto)', async () => {
    const bundleAge = BigInt(Date.now()) * 1_000_000n - statSync(bundle, { bigint: true }).ctimeNs;
    if (bundleAge < SETTLED_FILE_AGE_NS) await sleep(Number((SETTLED_FILE_AGE_NS - bundleAge) / 1_000_000n) + 100);
    for (const round of [1, 2]) {
      const { completed, loaded, loadedAtLaunch } = await run('auto-launch', round, 'auto');
      expect(completed).toMatchObject({ status: 0, stdout: '1\n' });
      expect(loadedAtLaunch).toContain('NativeModule child_process');
      // perf_hooks (the run's clock) and the recursive removal (the run directory's) are loaded, after the launch.
      for (const later of ['NativeModule perf_hooks', 'NativeModule internal/fs/rimraf']) {
        expect(loaded).toContain(later);
        expect(loadedAtLaunch).not.toContain(later);
      }
      // Nor the promise file API (with its directory, watcher and readline modules) nor the promise timers: no module
      // loads them as it loads, and a run that waits waits without them.
      expect(loadedAtLaunch.filter((name) => /\bfs\/(promises|dir|watchers)\b/.test(name))).toEqual([]);
      expect(loaded).not.toContain('NativeModule timers/promises');
    }
  }, 60_000);

  // Node makes a standard input of /dev/null (or of a file) a file stream, whose module loads the promise file API.
  it('makes no stream of its standard input before its launch when it does not read it (--sandbox auto)', async () => {
    const bundleAge = BigInt(Date.now()) * 1_000_000n - statSync(bundle, { bigint: true }).ctimeNs;
    if (bundleAge < SETTLED_FILE_AGE_NS) await sleep(Number((SETTLED_FILE_AGE_NS - bundleAge) / 1_000_000n) + 100);
    for (const round of [1, 2]) {
      const { completed, loadedAtLaunch } = await run('auto-null-input', round, 'auto', null);
      expect(completed).toMatchObject({ status: 0, stdout: '1\n' });
      expect(loadedAtLaunch).toContain('NativeModule child_process');
      expect(loadedAtLaunch.filter((name) => /\bfs\/(streams|promises)\b/.test(name))).toEqual([]);
    }
  }, 60_000);
});

/**
 * The arguments of a run's first tool call are checked with Ajv, which the command has as a bundled script of its own
 * with a code cache: loaded from node_modules, its eighty-odd modules cost that call tens of milliseconds.
 */
describe('codecall run calling a tool', () => {
  it('checks the arguments with its own bundled Ajv, the first time and the next, not the package', async () => {
    const workspace = join(temporary, 'tool-workspace');
    mkdirSync(workspace, { mode: 0o755 });
    writeFileSync(join(workspace, 'note.txt'), 'noted\n');
    const toolScript = join(temporary, 'read.py');
    writeFileSync(
      toolScript,
      'from tools import read_file\nprint(read_file(path="note.txt")["content"], end="")\ntry:\n    read_file(path=5)\nexcept Exception as error:\n    print(error)\n',
    );
    for (const round of [1, 2]) {
      const { completed, loadedFiles } = await run('tool', round, 'none', '', ['--workspace', workspace, toolScript]);
      expect(completed).toMatchObject({
        status: 0,
        stdout: "noted\nread_file: argument 'path' must be string (got number 5)\n",
      });
      // The list is the process's own (the hook is in it), and holds no file of the package.
      expect(loadedFiles).toContain(hook);
      expect(loadedFiles.filter((file) => file.includes(`${sep}node_modules${sep}ajv${sep}`))).toEqual([]);
    }
  }, 60_000);
});

/** Module files of the MCP SDK, Ajv and zod packages among `files`. */
function packageFiles(files: readonly string[]): string[] {
  return files.filter((file) =>
    ['@modelcontextprotocol', 'ajv', 'zod'].some((name) => file.includes(`${sep}node_modules${sep}${name}${sep}`)),
  );
}

/**
 * `codecall serve` on stdio with the hook: sends `initialize`, then one `execute_code` of `code`, each once the answer
 * before it came; ends its input after the second answer. Resolves the answers, the exit status and the module files.
 */
async function serveOnce(name: string, workspace: string, code: string) {
  const listFile = join(temporary, `loaded-${name}.txt`);
  const child = spawn(process.execPath, ['-r', hook, command, 'serve', '--sandbox', 'none', '--workspace', workspace], {
    cwd: temporary,
    env: hookedEnvironment(listFile),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const answers: unknown[] = [];
  let pending = '';
  let answered: (() => void) | undefined;
  child.stdout.on('data', (chunk) => {
    pending += chunk;
    for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n')) {
      const message = JSON.parse(pending.slice(0, newline)) as { id?: unknown };
      pending = pending.slice(newline + 1);
      if (message.id !== undefined) {
        answers.push(message);
        answered?.();
      }
    }
  });
  const send = (message: object) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  const answer = (count: number) =>
    new Promise<void>((resolve) => {
      answered = () => {
        if (answers.length >= count) resolve();
      };
      answered();
    });
  send({
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
  });
  await answer(1);
  send({ method: 'notifications/initialized' });
  send({ id: 2, method: 'tools/call', params: { name: 'execute_code', arguments: { code } } });
  await answer(2);
  child.stdin.end();
  const status = await exited;
  return { answers, status, stderr, loadedFiles: readFileSync(`${listFile}.files`, 'utf8').split('\n') };
}

/**
 * The MCP SDK (its server for `serve`, its client for upstream servers) is a bundled script of its own with a code
 * cache: from node_modules its modules, zod and Ajv took `serve` one to two hundred milliseconds before it answered
 * `initialize`. The command's own Ajv checks the arguments of tool calls there too.
 */
describe('the MCP SDK from its bundle', () => {
  it('serves execute_code and checks tool arguments loading no file of the SDK, zod or Ajv packages', async () => {
    const workspace = join(temporary, 'serve-workspace');
    mkdirSync(workspace, { mode: 0o755 });
    writeFileSync(join(workspace, 'note.txt'), 'noted\n');
    const code =
      'from tools import read_file\nprint(read_file(path="note.txt")["content"], end="")\ntry:\n    read_file(path=5)\nexcept Exception as error:\n    print(error)\n';
    for (const round of [1, 2]) {
      const { answers, status, stderr, loadedFiles } = await serveOnce(`serve-${round}`, workspace, code);
      expect(status, stderr).toBe(0);
      expect(answers[0]).toMatchObject({ id: 1, result: { serverInfo: { name: 'codecall' } } });
      expect(JSON.stringify(answers[1])).toContain("noted\\nread_file: argument 'path' must be string (got number 5)");
      expect(loadedFiles).toContain(hook);
      expect(packageFiles(loadedFiles)).toEqual([]);
    }
  }, 60_000);

  it('runs a script calling an upstream server loading no file of the SDK, zod or Ajv packages', async () => {
    const config = join(temporary, 'upstream.json');
    writeFileSync(
      config,
      JSON.stringify({ mcpServers: { fixture: { command: process.execPath, args: [FIXTURE_SERVER_PATH] } } }),
    );
    const upstreamScript = join(temporary, 'upstream.py');
    writeFileSync(upstreamScript, 'from tools import fixture\nprint(fixture.echo(text="through the client"))\n');
    for (const round of [1, 2]) {
      const { completed, loadedFiles } = await run('upstream', round, 'none', '', ['--config', config, upstreamScript]);
      expect(completed).toMatchObject({ status: 0, stdout: 'through the client\n' });
      expect(loadedFiles).toContain(hook);
      expect(packageFiles(loadedFiles)).toEqual([]);
    }
  }, 60_000);
});
