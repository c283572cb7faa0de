import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { WorkspaceMount } from '../../src/core/workspace-mount.js';
import { bubblewrapUsable, lastJson, useSandboxedCodecalls } from './support/sandbox-fixture.js';

const codecallWith = useSandboxedCodecalls();
const scratch = mkdtempSync(join(tmpdir(), 'codecall-workspace-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A workspace with docs and a small package with two buggy functions, writable by the sandbox user too. */
function createWorkspace(name: string): string {
  const workspace = join(scratch, name);
  mkdirSync(join(workspace, 'docs'), { recursive: true });
  mkdirSync(join(workspace, 'calc'));
  mkdirSync(join(workspace, 'tests'));
  writeFileSync(join(workspace, 'docs', 'a.md'), '# A\n');
  writeFileSync(join(workspace, 'docs', 'b.md'), '# B\n');
  writeFileSync(
    join(workspace, 'calc', '__init__.py'),
    'def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a + b\n',
  );
  writeFileSync(join(workspace, 'tests', '__init__.py'), '');
  writeFileSync(
    join(workspace, 'tests', 'test_calc.py'),
    [
      'import unittest',
      'from calc import add, sub, mul',
      'class CalcTest(unittest.TestCase):',
      '    def test_add(self):',
      '        self.assertEqual(add(2, 3), 5)',
      '    def test_sub(self):',
      '        self.assertEqual(sub(5, 3), 2)',
      '    def test_mul(self):',
      '        self.assertEqual(mul(2, 3), 6)',
      '',
    ].join('\n'),
  );
  // The host runs as root and scripts as nobody: read-write needs files the sandbox user may change.
  for (const path of [workspace, join(workspace, 'docs'), join(workspace, 'calc'), join(workspace, 'tests')]) {
    chmodSync(path, 0o777);
  }
  return workspace;
}

const WALK_AND_WRITE = [
  'import os, json',
  'found = sorted(os.path.join(d, f) for d, _, files in os.walk(".") for f in files if f.endswith(".md"))',
  'text = open("docs/a.md").read()',
  'try:',
  '    with open("new.txt", "w") as handle:',
  '        handle.write("x")',
  '    wrote = "ok"',
  'except OSError as error:',
  '    wrote = type(error).__name__',
  'print(json.dumps({"cwd": os.getcwd(), "env": os.environ.get("CODECALL_WORKSPACE"), "found": found, "text": text,',
  '                  "wrote": wrote, "sees_new": os.path.exists("new.txt")}))',
].join('\n');

describe.skipIf(!bubblewrapUsable)('the workspace inside bubblewrap', () => {
  it.each<[WorkspaceMount, string, boolean]>([
    ['read-only', 'OSError', false],
    ['copy', 'ok', false],
    ['read-write', 'ok', true],
  ])(
    'mode %s: starts in the workspace, walks and opens files; writes give %s',
    async (mount, wrote, keptOnHost) => {
      const workspace = createWorkspace(`walk-${mount}`);
      const codecall = codecallWith({ workspace, workspaceMount: mount });
      const result = await codecall.execute(WALK_AND_WRITE);
      expect(result.error).toBeUndefined();
      expect(lastJson(result.stdout)).toEqual({
        cwd: workspace,
        env: workspace,
        found: ['./docs/a.md', './docs/b.md'],
        text: '# A\n',
        wrote,
        sees_new: wrote === 'ok',
      });
      expect(existsSync(join(workspace, 'new.txt'))).toBe(keptOnHost);
      expect(await codecall.describe()).toContain(
        mount === 'copy' ? 'throwaway copy of the workspace' : `the script starts in the workspace`,
      );
      if (mount === 'copy') {
        // Each run gets a fresh copy: the last run's write is gone.
        const again = await codecall.execute('import os\nprint(os.path.exists("new.txt"))');
        expect(again.stdout).toBe('False\n');
      }
    },
    60_000,
  );

  it('mode none: the script starts in its private directory and the hint names the mode', async () => {
    const workspace = createWorkspace('walk-none');
    const codecall = codecallWith({ workspace, workspaceMount: 'none', builtinTools: ['files'] });
    const result = await codecall.execute(
      'import os\nprint(os.getcwd() != os.environ.get("CODECALL_WORKSPACE"))\nopen("docs/a.md")',
    );
    expect(result.stdout).toBe('True\n');
    expect(result.error?.type).toBe('FileNotFoundError');
    expect(result.hint).toContain('(workspaceMount "none"); read it with tools.read_file("docs/a.md")');
  }, 60_000);

  it('imports a workspace package and finds its two bugs with unittest run as a subprocess', async () => {
    const workspace = createWorkspace('unittest');
    const codecall = codecallWith({ workspace, workspaceMount: 'read-only' });
    const result = await codecall.execute(
      [
        'import json, re, subprocess',
        'from calc import sub',
        'done = subprocess.run(["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."],',
        '                      capture_output=True, text=True)',
        'failed = sorted(re.findall(r"^FAIL: (\\w+)", done.stderr, re.M))',
        'print(json.dumps({"sub": sub(5, 3), "failed": failed, "code": done.returncode}))',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(lastJson(result.stdout)).toEqual({ sub: 2, failed: ['test_add', 'test_mul'], code: 1 });
  }, 60_000);

  it("shows the script's own lines in a traceback although it starts in the workspace", async () => {
    const workspace = createWorkspace('traceback');
    const result = await codecallWith({ workspace, workspaceMount: 'read-only' }).execute(
      'x = 1\nraise ValueError("bad " + str(x))',
    );
    expect(result.error?.traceback).toContain('File "script.py", line 2');
    expect(result.error?.traceback).toContain('raise ValueError("bad " + str(x))');
  }, 60_000);

  it('a session keeps its copy across cells; the host workspace never changes', async () => {
    const workspace = createWorkspace('session-copy');
    const codecall = codecallWith({ workspace, workspaceMount: 'copy' });
    const session = codecall.session();
    try {
      await session.execute('open("notes.txt", "w").write("kept")');
      const second = await session.execute('print(open("notes.txt").read())');
      expect(second.stdout).toBe('kept\n');
    } finally {
      await session.close();
    }
    expect(existsSync(join(workspace, 'notes.txt'))).toBe(false);
  }, 60_000);
});
