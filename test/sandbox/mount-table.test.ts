import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mountTableField, mountTableText } from '../../src/sandbox/mount-table.js';
import { useCodecalls } from '../support/codecall-fixture.js';

/**
 * The mount namespaces that make directories under a private parent reachable are set up from mount tables (one
 * mount(8) per table). A path is one field of a table: white space, `#`, `\` and bytes outside ASCII must reach
 * libmount escaped, or a workspace with such a name would be bound from the wrong place or not at all.
 */

const asRoot = process.getuid?.() === 0;
const bubblewrap = existsSync('/usr/bin/bwrap');
const codecallWith = useCodecalls();
// Made by mkdtemp: 0700, closed to every uid but root's, like /root; what lies below needs a namespace.
const privateParent = mkdtempSync(join(tmpdir(), 'codecall-mount-table-'));
afterAll(() => rmSync(privateParent, { recursive: true, force: true }));

/** The interpreter behind any version-manager shim. */
const realInterpreter = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], {
  encoding: 'utf8',
}).trim();
/** A name with every kind of byte a mount table separates or escapes. */
const AWKWARD_NAME = 'a b\tc\n#d\\040e é 0 0';

describe('mount table fields', () => {
  it('escapes white space, #, backslashes and non-ASCII bytes, and leaves path characters as they are', () => {
    expect(mountTableField('/usr/lib/x86_64-linux-gnu/a.b_c+d=e:f@g,h')).toBe(
      '/usr/lib/x86_64-linux-gnu/a.b_c+d=e:f@g,h',
    );
    expect(mountTableField('a b\tc\n#\\é')).toBe('a\\040b\\011c\\012\\043\\134\\303\\251');
  });

  it('writes one line of six fields per entry, in order', () => {
    const text = mountTableText([
      { source: '/x y', target: '/s/0', type: 'none', options: 'bind,ro,nosuid,nodev' },
      { source: 'codecall', target: '/root', type: 'tmpfs', options: 'mode=0755,size=65536' },
    ]);
    expect(text.split('\n').map((line) => line.split(' ').length)).toEqual([6, 6, 1]);
    expect(text).toBe('/x\\040y /s/0 none bind,ro,nosuid,nodev 0 0\ncodecall /root tmpfs mode=0755,size=65536 0 0\n');
  });
});

/** A workspace with an awkward name under the private parent, holding a file; and a folder beside it with a file. */
function createFixture(label: string): { workspace: string; extraFolder: string; extraFile: string } {
  const folder = join(privateParent, label);
  const workspace = join(folder, AWKWARD_NAME);
  mkdirSync(workspace, { recursive: true, mode: 0o755 });
  writeFileSync(join(workspace, 'inside.txt'), 'inside', { mode: 0o644 });
  const extraFolder = join(folder, `${AWKWARD_NAME} extra`);
  mkdirSync(extraFolder, { mode: 0o755 });
  const extraFile = join(extraFolder, 'extra.txt');
  writeFileSync(extraFile, 'extra', { mode: 0o644 });
  return { workspace, extraFolder, extraFile };
}

const READ_BOTH = (extraFile: string) =>
  [
    'import json, os',
    `extra = open(${JSON.stringify(extraFile)}).read()`,
    'print(json.dumps([open("inside.txt").read(), extra, os.getuid() != 0]))',
  ].join('\n');

describe.skipIf(!asRoot)('folders and files with awkward names under a private parent', () => {
  it('are reached at their own paths without a sandbox, with an interpreter that is a file root', async () => {
    const { workspace } = createFixture('none');
    // A venv made with copies: its executable is a file outside the base prefix, a root of the namespace of its own.
    const venv = join(privateParent, `venv ${AWKWARD_NAME}`);
    execFileSync(realInterpreter, ['-m', 'venv', '--without-pip', '--copies', venv]);
    const python = join(venv, 'bin', 'python3');
    const codecall = codecallWith({ workspace, workspaceMount: 'read-only', python });
    const result = await codecall.execute(
      'import json, os, sys\nprint(json.dumps([open("inside.txt").read(), sys.executable, os.getuid() != 0]))',
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe('success');
    expect(JSON.parse(result.stdout)).toEqual(['inside', python, true]);
  }, 60_000);

  it.skipIf(!bubblewrap)(
    'are staged and bound into the bubblewrap sandbox',
    async () => {
      const { workspace, extraFolder, extraFile } = createFixture('bubblewrap');
      const codecall = codecallWith({
        sandbox: 'bubblewrap',
        workspace,
        workspaceMount: 'read-only',
        readOnlyPaths: [extraFolder],
      });
      const result = await codecall.execute(READ_BOTH(extraFile));
      expect(result.stderr).toBe('');
      expect(result).toMatchObject({
        status: 'success',
        stdout: '["inside", "extra", true]\n',
        isolation: 'bubblewrap',
      });
    },
    60_000,
  );
});
