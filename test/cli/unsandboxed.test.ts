import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { UNSANDBOXED_NOTE } from '../../src/codegen/execute-code-description.js';
import type { ExecuteResult } from '../../src/core/result.js';
import { probeSandbox } from '../../src/sandbox/bubblewrap-probe.js';
import { type Completed, runToCompletion } from '../support/completed-process.js';

/**
 * No silent loss of isolation (item 3 of issue 10), seen from the command line on a machine without a usable
 * bubblewrap: the CLI runs in a mount namespace where /usr/bin/bwrap is missing (a non-executable file bound over it)
 * or broken (a stand-in that fails like bwrap does without user namespaces). Needs root for the mount namespace.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const scratch = mkdtempSync(join(tmpdir(), 'codecall-cli-unsandboxed-'));
chmodSync(scratch, 0o755);
const stateDir = join(scratch, 'state');
mkdirSync(stateDir);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const bubblewrapUsable = (await probeSandbox()).bubblewrap.available;

const MISSING = join(scratch, 'not-executable');
writeFileSync(MISSING, '', { mode: 0o644 });
const BROKEN = join(scratch, 'broken-bwrap');
writeFileSync(
  BROKEN,
  '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n' +
    'echo "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n',
  { mode: 0o755 },
);

type Machine = 'missing' | 'broken' | 'real';

/** The command that runs the CLI with `args` on the given kind of machine. */
function commandFor(machine: Machine, args: readonly string[]): { command: string; args: string[] } {
  const cli = [process.execPath, bin, ...args];
  if (machine === 'real') return { command: cli[0] as string, args: cli.slice(1) };
  return {
    command: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      'mount --bind -- "$1" /usr/bin/bwrap && shift && exec "$@"',
      'sh',
      machine === 'missing' ? MISSING : BROKEN,
      ...cli,
    ],
  };
}

function codecall(machine: Machine, args: readonly string[], input = ''): Promise<Completed> {
  const { command, args: commandArguments } = commandFor(machine, args);
  return runToCompletion(command, commandArguments, { cwd: scratch, env: { ...process.env, TMPDIR: stateDir }, input });
}

const WARNING = /^codecall: warning: NO SANDBOX: bubblewrap is not usable here \(/;
const SCRIPT = 'import os\nprint(os.getuid())';

describe.skipIf(process.getuid?.() !== 0)('codecall on a machine without a usable bubblewrap', () => {
  it.each([
    ['missing', 'bubblewrap (bwrap) is not installed'],
    ['broken', 'setting up uid map: Permission denied'],
  ] as const)('run with bwrap %s: warns once on stderr, and the result says it', async (machine, cause) => {
    const completed = await codecall(machine, ['run', '-', '--json'], SCRIPT);
    expect(completed.status).toBe(0);
    const warnings = completed.stderr.split('\n').filter((line) => line.includes('NO SANDBOX'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(WARNING);
    expect(warnings[0]).toContain(cause);
    const result = JSON.parse(completed.stdout) as ExecuteResult;
    expect(result).toMatchObject({ status: 'success', isolation: 'none' });
    expect(result.isolationWarning).toContain(cause);
    // Not root: the script runs as an unprivileged uid of its own.
    expect(Number(result.stdout)).toBeGreaterThan(65_535);
  });

  it('run with --sandbox none chose it: no warning', async () => {
    const completed = await codecall('missing', ['run', '-', '--json', '--sandbox', 'none'], SCRIPT);
    expect(completed.status).toBe(0);
    expect(completed.stderr).toBe('');
    const result = JSON.parse(completed.stdout) as ExecuteResult;
    expect(result.isolation).toBe('none');
    expect(result.isolationWarning).toBeUndefined();
  });

  it.skipIf(!bubblewrapUsable)('run where bubblewrap works looks different: sandboxed, no warning', async () => {
    const completed = await codecall('real', ['run', '-', '--json'], SCRIPT);
    expect(completed.status).toBe(0);
    expect(completed.stderr).toBe('');
    const result = JSON.parse(completed.stdout) as ExecuteResult;
    expect(result.isolation).toBe('bubblewrap');
    expect(result.isolationWarning).toBeUndefined();
  });

  it.each([
    ['stdio', ['serve']],
    ['http', ['serve', '--http', '0']],
  ])('serve (%s) refuses to start without a sandbox: exit 2 and what to do', async (_, args) => {
    const completed = await codecall('missing', args);
    expect(completed.status).toBe(2);
    expect(completed.stderr).toMatch(WARNING);
    expect(completed.stderr).toContain('codecall: serve refuses to run scripts without a sandbox');
    expect(completed.stderr).toContain('--allow-unsandboxed');
    expect(completed.stdout).toBe('');
  });

  it('serve --allow-unsandboxed serves, and tells the model there is no sandbox', async () => {
    const { command, args } = commandFor('broken', ['serve', '--allow-unsandboxed']);
    const transport = new StdioClientTransport({
      command,
      args,
      cwd: scratch,
      env: { ...(process.env as Record<string, string>), TMPDIR: stateDir },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += String(chunk);
    });
    const client = new Client({ name: 'codecall-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools[0]?.description).toContain(UNSANDBOXED_NOTE);
      const called = (await client.callTool({ name: 'execute_code', arguments: { code: SCRIPT } })) as CallToolResult;
      const structured = called.structuredContent as unknown as ExecuteResult;
      expect(structured).toMatchObject({ status: 'success', isolation: 'none' });
      expect(structured.isolationWarning).toContain('setting up uid map');
    } finally {
      await client.close();
    }
    expect(stderr.split('\n').filter((line) => line.includes('NO SANDBOX'))).toHaveLength(1);
  }, 60_000);

  it('serve --sandbox none is an explicit choice: it serves', async () => {
    const { command, args } = commandFor('missing', ['serve', '--sandbox', 'none']);
    const transport = new StdioClientTransport({
      command,
      args,
      cwd: scratch,
      env: { ...(process.env as Record<string, string>), TMPDIR: stateDir },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'codecall-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools[0]?.description).not.toContain(UNSANDBOXED_NOTE);
    } finally {
      await client.close();
    }
  }, 60_000);

  it('doctor says it loudly, and names the uid scheme', async () => {
    const without = await codecall('missing', ['doctor']);
    expect(without.status).toBe(0);
    expect(without.stdout).toMatch(/^isolation +none \(sandbox: auto\)$/m);
    expect(without.stdout).toMatch(
      /^WARNING +NO SANDBOX: bubblewrap is not usable here \(bubblewrap \(bwrap\) is not/m,
    );
    expect(without.stdout).toMatch(/^run uid +one per run, from 2000000000–2000065535 /m);
    expect(without.stdout).toMatch(/^disk +NOT BOUNDED without a sandbox/m);
    if (bubblewrapUsable) {
      const withIt = await codecall('real', ['doctor']);
      expect(withIt.stdout).toMatch(/^isolation +bubblewrap \(sandbox: auto\)$/m);
      expect(withIt.stdout).not.toContain('WARNING');
      expect(withIt.stdout).not.toContain('NO SANDBOX');
      expect(withIt.stdout).toMatch(/^run uid +one per run, from 2000000000–2000065535 /m);
      expect(withIt.stdout).toMatch(/^disk +512 MiB per run or session \(limits\.maxDiskBytes\): working directory/m);
    }
  });
});
