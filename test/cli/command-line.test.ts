import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readCgroupLayout } from '../../src/sandbox/cgroups.js';
import { defaultRunUidLockDirectory } from '../../src/sandbox/run-uids.js';
import { processAlive } from '../support/codecall-fixture.js';
import { type Completed, runToCompletion } from '../support/completed-process.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const demo = join(root, 'examples/batch-summary');
const stateDir = mkdtempSync(join(tmpdir(), 'codecall-cli-test-'));

function codecall(args: readonly string[], options: { input?: string; cwd?: string } = {}): Promise<Completed> {
  return runToCompletion(process.execPath, [bin, ...args], {
    cwd: options.cwd ?? root,
    env: { ...process.env, TMPDIR: stateDir },
    input: options.input ?? '',
  });
}

/** The demo's table computed here, independently of the script, from the same files. */
function expectedDemoTable(): string {
  const columns = ['reports', 'done', 'in progress', 'blocked', 'hours', 'words'] as const;
  const totals = new Map<string, Record<(typeof columns)[number], number>>();
  const names = readdirSync(join(demo, 'data')).filter((name) => name.endsWith('.txt'));
  for (const name of names) {
    const [header = '', body = ''] = readFileSync(join(demo, 'data', name), 'utf8').split('\n\n');
    const fields = Object.fromEntries(header.split('\n').map((line) => line.split(': ')));
    const row = totals.get(fields.team) ?? { reports: 0, done: 0, 'in progress': 0, blocked: 0, hours: 0, words: 0 };
    row.reports += 1;
    row[fields.status as 'done' | 'in progress' | 'blocked'] += 1;
    row.hours += Number(fields.hours);
    row.words += body.split(/\s+/).filter(Boolean).length;
    totals.set(fields.team, row);
  }
  const line = (label: string, values: number[]) =>
    label.padEnd(10) + values.map((value) => String(value).padStart(13)).join('');
  const lines = [`${'team'.padEnd(10)}${columns.map((column) => column.padStart(13)).join('')}`];
  for (const team of [...totals.keys()].sort()) {
    const row = totals.get(team)!;
    lines.push(
      line(
        team,
        columns.map((column) => row[column]),
      ),
    );
  }
  lines.push(
    line(
      'total',
      columns.map((column) => [...totals.values()].reduce((sum, row) => sum + row[column], 0)),
    ),
  );
  return `${lines.join('\n')}\n\n${names.length} reports read with ${names.length + 1} tool calls\n`;
}

describe('codecall run', () => {
  it('runs the batch demo and prints the right table', async () => {
    const result = await codecall(['run', join(demo, 'summarise.py'), '--workspace', demo]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(expectedDemoTable());
  });

  it('prints the result object with --json, counting every tool call', async () => {
    const result = await codecall(['run', join(demo, 'summarise.py'), '--workspace', demo, '--json']);
    expect(result.status).toBe(0);
    const parsed = JSON.parse(result.stdout);
    const files = readdirSync(join(demo, 'data')).length;
    expect(parsed).toMatchObject({ status: 'success', toolCalls: files + 1, exitCode: 0 });
    expect(parsed.stdout).toBe(expectedDemoTable());
  });

  it('reads the script from standard input with -', async () => {
    const result = await codecall(['run', '-'], { input: 'print(6 * 7)' });
    expect(result).toMatchObject({ status: 0, stdout: '42\n' });
  });

  it('exits 1 and shows the error when the script fails', async () => {
    const result = await codecall(['run', '-'], { input: 'print("before")\nraise ValueError("bad input")' });
    expect(result.status).toBe(1);
    expect(result.stdout).toContain('before\n\n[status: error]');
    expect(result.stdout).toContain('ValueError: bad input');
  });

  it('applies --timeout in seconds', async () => {
    const result = await codecall(['run', '-', '--timeout', '1', '--json'], { input: 'import time\ntime.sleep(60)' });
    expect(result.status).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'timeout', reason: 'timeout' });
  });

  it('reads codecall.json from the current directory', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'codecall-config-'));
    writeFileSync(
      join(folder, 'codecall.json'),
      JSON.stringify({ moduleName: 'hermes_tools', limits: { timeoutMs: 5000 } }),
    );
    writeFileSync(join(folder, 'note.txt'), 'from the workspace');
    const result = await codecall(['run', '-'], {
      cwd: folder,
      input: 'from hermes_tools import read_file\nprint(read_file("note.txt")["content"])',
    });
    expect(result).toMatchObject({ status: 0, stdout: 'from the workspace\n' });
  });
});

describe('the installed command', () => {
  it('is the CommonJS loader (no ES module loader to set up) and runs a script like main.js', async () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: { codecall: string } };
    expect(manifest.bin.codecall).toBe('./dist/cli/main.cjs');
    const result = await runToCompletion(process.execPath, [join(root, manifest.bin.codecall), 'run', '-'], {
      cwd: root,
      env: { ...process.env, TMPDIR: stateDir },
      input: 'import sys\nprint(6 * 7)\nsys.exit(3)',
    });
    expect(result).toMatchObject({ status: 1, stdout: expect.stringContaining('42\n') });
  });
});

function entriesOf(directory: string): string[] {
  try {
    return readdirSync(directory);
  } catch {
    return [];
  }
}

/** Run cgroups (`codecall-<host pid>-...`) and run-uid locks whose host process is gone. */
function orphanedRunResources(): string[] {
  const layout = readCgroupLayout();
  const parents =
    layout === undefined
      ? []
      : layout.version === 1
        ? layout.hierarchies.map((hierarchy) => hierarchy.ownDirectory)
        : [layout.ownDirectory, join(layout.mountPoint, 'codecall')];
  const orphaned: string[] = [];
  for (const parent of parents) {
    for (const name of entriesOf(parent)) {
      const match = /^codecall-(\d+)-/.exec(name);
      if (match && !processAlive(Number(match[1]))) orphaned.push(join(parent, name));
    }
  }
  const locks = defaultRunUidLockDirectory();
  for (const uid of entriesOf(locks).filter((name) => !name.startsWith('.'))) {
    const owners = entriesOf(join(locks, uid));
    if (owners.some((owner) => !processAlive(Number(owner.split('-')[0])))) orphaned.push(join(locks, uid));
  }
  return orphaned;
}

describe('codecall run ends its process as soon as its work is over', () => {
  /** Bytes the script prints: several times what a pipe holds, so part of it is still queued in the process. */
  const PRINTED_BYTES = 700_000;

  it('writes all of a result larger than a pipe holds before it exits, with the exit status', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'codecall-large-result-'));
    writeFileSync(join(folder, 'codecall.json'), JSON.stringify({ limits: { maxStdoutBytes: 2 * PRINTED_BYTES } }));
    const printed = await codecall(['run', '-'], { cwd: folder, input: `print("x" * ${PRINTED_BYTES})` });
    expect(printed.status).toBe(0);
    expect(printed.stdout).toBe(`${'x'.repeat(PRINTED_BYTES)}\n`);
    const failed = await codecall(['run', '-'], {
      cwd: folder,
      input: `print("x" * ${PRINTED_BYTES})\nraise SystemExit(3)`,
    });
    expect(failed.status).toBe(1);
    expect(failed.stdout).toContain(`${'x'.repeat(PRINTED_BYTES)}\n`);
    expect(failed.stdout).toContain('[status: error]');
  });

  it('leaves no run directory and no staging folder behind in the state folder, and no cgroup or uid lock', async () => {
    const orphanedBefore = new Set(orphanedRunResources());
    const temporary = mkdtempSync(join(tmpdir(), 'codecall-left-behind-'));
    const result = await runToCompletion(process.execPath, [bin, 'run', '-'], {
      cwd: temporary,
      env: { ...process.env, TMPDIR: temporary },
      input: 'open("left.txt", "w").write("x")\nprint(1)',
    });
    expect(result).toMatchObject({ status: 0, stdout: '1\n' });
    const [state, ...others] = readdirSync(temporary);
    expect(others).toEqual([]);
    const stateFolder = join(temporary, state ?? '');
    expect(readdirSync(join(stateFolder, 'runs'))).toEqual([]);
    expect(readdirSync(join(stateFolder, 'sandbox')).filter((name) => name.startsWith('stage-'))).toEqual([]);
    // Its run's cgroups, a spare set (none for a one-shot command) and its run uid's lock are gone with it.
    expect(orphanedRunResources().filter((path) => !orphanedBefore.has(path))).toEqual([]);
  });
});

describe('bad configuration exits 2 with one clear line', () => {
  it.each([
    [['run', '-', '--config', 'missing.json'], /^codecall: cannot read configuration file .*missing\.json/],
    [['run', '-', '--timeout', 'soon'], /^codecall: --timeout takes seconds/],
    [['run', '-', '--python', 'no-such-python-3'], /^codecall: cannot run the Python interpreter "no-such-python-3"/],
    [['run', '-', '--sandbox', 'docker'], /^codecall: sandbox must be one of auto, bubblewrap, none/],
    [['frobnicate'], /^codecall: unknown command "frobnicate"/],
    [['run', '-', '--colour'], /^codecall: Unknown option '--colour'/],
  ])('%j', async (args, message) => {
    const result = await codecall(args, { input: 'print(1)' });
    expect(result.status).toBe(2);
    expect(result.stderr.split('\n')[0]).toMatch(message);
  });

  it('names an unknown key of the configuration file', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'codecall-config-'));
    writeFileSync(join(folder, 'codecall.json'), JSON.stringify({ workspace: '.', colour: 'blue' }));
    const result = await codecall(['run', '-'], { cwd: folder, input: 'print(1)' });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(
      /^codecall: unknown key "colour" in .*codecall\.json; known keys: builtinTools, workspace, /,
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('codecall stubs and doctor', () => {
  it('prints the generated module', async () => {
    const result = await codecall(['stubs']);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('# ===== tools/__init__.py =====');
    expect(result.stdout).toMatch(/def read_file\(path: str/);
    expect(result.stdout).toContain('# ===== tools/aio.py =====');
  });

  it('shows the interpreter, the isolation and the limits', async () => {
    const result = await codecall(['doctor']);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^python\s+\/.*python3.* \(Python 3\.\d+\.\d+, from "python3"\)$/m);
    expect(result.stdout).toMatch(/^isolation\s+(bubblewrap|none) \(sandbox: auto\)$/m);
    expect(result.stdout).toMatch(/^limits\s+timeout 300 seconds, 1,000 tool calls/m);
    expect(result.stdout).toMatch(/^packages\s+/m);
    expect(result.stdout).toMatch(/^workspace\s+\/.* \(workspaceMount read-only\)$/m);
  });

  it('tries the named imports inside the sandbox and says which fail and why', async () => {
    const result = await codecall(['doctor', '--import', 'json,surely_not_installed_module', '--import', 'csv']);
    expect(result.stdout).toMatch(/^import\s+json: ok$/m);
    expect(result.stdout).toMatch(/^import\s+csv: ok$/m);
    expect(result.stdout).toMatch(
      /^import\s+surely_not_installed_module: FAILED \(not installed for python3\): ModuleNotFoundError: No module named 'surely_not_installed_module'$/m,
    );
    expect(result.status).toBe(1);
  });

  it('refuses an import that is not a module name', async () => {
    const result = await codecall(['doctor', '--import', 'os; rm']);
    expect(result).toMatchObject({ status: 2, stderr: 'codecall: --import: "os; rm" is not a Python module name\n' });
  });
});
