import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { WorkspaceMount } from '../../src/core/workspace-mount.js';
import { useCodecalls } from '../support/codecall-fixture.js';

/**
 * `sandbox: "none"` as root runs the script as a uid of its own, which owns nothing on the host: what it must write
 * (its copy of the workspace) has to be handed to it, and a workspace under a folder other users cannot traverse
 * (a project in /root, a temporary folder under a private parent) has to be made reachable at its own path.
 */

const asRoot = process.getuid?.() === 0;
const codecallWith = useCodecalls();
// Made by mkdtemp: 0700, closed to every uid but root's, like /root.
const privateParent = mkdtempSync(join(tmpdir(), 'codecall-private-parent-'));
afterAll(() => rmSync(privateParent, { recursive: true, force: true }));

/** A workspace (open to others itself, as a project folder usually is) with a file three folders down. */
function createWorkspace(name: string): string {
  const workspace = join(privateParent, name);
  mkdirSync(join(workspace, 'src', 'deep', 'deeper'), { recursive: true, mode: 0o755 });
  for (const folder of ['', 'src', 'src/deep', 'src/deep/deeper']) chmodSync(join(workspace, folder), 0o755);
  writeFileSync(join(workspace, 'top.txt'), 'top', { mode: 0o644 });
  writeFileSync(join(workspace, 'src', 'deep', 'deeper', 'old.txt'), 'old', { mode: 0o644 });
  return workspace;
}

/** Reads the workspace, then rewrites a file three folders down and creates one beside it. */
const READ_AND_WRITE = [
  'import json, os',
  'report = {"cwd": os.getcwd(), "top": open("top.txt").read()}',
  'try:',
  '    open("src/deep/deeper/old.txt", "w").write("changed")',
  '    open("src/deep/deeper/new.txt", "w").write("new")',
  '    report["wrote"] = "ok"',
  'except OSError as error:',
  '    report["wrote"] = type(error).__name__',
  'print(json.dumps(report))',
].join('\n');

describe.skipIf(!asRoot)('the workspace of a script without a sandbox, as root', () => {
  it.each<[WorkspaceMount]>([['copy'], ['read-only'], ['read-write']])(
    'mode %s: the run uid reaches a workspace under a 0700 folder',
    async (mount) => {
      const workspace = createWorkspace(`reach-${mount}`);
      const codecall = codecallWith({ workspace, workspaceMount: mount });
      const result = await codecall.execute('import os\nprint(open("top.txt").read(), os.getuid() != 0)');
      expect(result.stderr).not.toContain('cannot enter the workspace');
      expect(result).toMatchObject({ status: 'success', stdout: 'top True\n' });
    },
    60_000,
  );

  it('mode copy: the script may change every file of its copy, at any depth; the workspace stays as it was', async () => {
    const workspace = createWorkspace('copy-writes');
    const codecall = codecallWith({ workspace, workspaceMount: 'copy' });
    const result = await codecall.execute(READ_AND_WRITE);
    expect(result.error).toBeUndefined();
    expect(JSON.parse(result.stdout)).toMatchObject({ top: 'top', wrote: 'ok' });
    expect(readFileSync(join(workspace, 'src', 'deep', 'deeper', 'old.txt'), 'utf8')).toBe('old');
    expect(existsSync(join(workspace, 'src', 'deep', 'deeper', 'new.txt'))).toBe(false);
  }, 60_000);

  it('a session in mode copy keeps writing to its copy across cells', async () => {
    const workspace = createWorkspace('copy-session');
    const session = codecallWith({ workspace, workspaceMount: 'copy' }).session();
    try {
      const first = await session.execute(READ_AND_WRITE);
      expect(JSON.parse(first.stdout)).toMatchObject({ wrote: 'ok' });
      const second = await session.execute('print(open("src/deep/deeper/new.txt").read())');
      expect(second.stdout).toBe('new\n');
    } finally {
      await session.close();
    }
  }, 60_000);

  it('a workspace closed to other users itself is not entered, and the script is told so on stderr', async () => {
    const workspace = createWorkspace('closed');
    chmodSync(workspace, 0o700);
    const result = await codecallWith({ workspace, workspaceMount: 'read-only' }).execute('print("ran")');
    expect(result.stdout).toBe('ran\n');
    expect(result.stderr).toContain('cannot enter the workspace');
  }, 60_000);
});
