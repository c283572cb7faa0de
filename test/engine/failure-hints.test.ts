import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveLimits } from '../../src/core/limits.js';
import type { ExecuteResult } from '../../src/core/result.js';
import type { WorkspaceMount } from '../../src/core/workspace-mount.js';
import { failureHint, type HintContext } from '../../src/engine/result/failure-hints.js';
import { closestName } from '../../src/engine/result/name-suggestion.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const codecallWith = useCodecalls();
const workspace = mkdtempSync(join(tmpdir(), 'codecall-hints-'));
mkdirSync(join(workspace, 'src', 'inventory'), { recursive: true });
writeFileSync(join(workspace, 'src', 'inventory', '__init__.py'), 'def total():\n    return 1\n');
writeFileSync(join(workspace, 'billing.py'), 'import not_installed_dependency\n');
mkdirSync(join(workspace, 'docs'));
writeFileSync(join(workspace, 'docs', 'a.md'), '# A\n');
afterAll(() => rmSync(workspace, { recursive: true, force: true }));

const info = defineTool({
  name: 'info',
  description: 'Info.',
  inputSchema: { type: 'object' },
  execute: () => ({ name: 'x', size: 2, owner: 'y' }),
});

describe('hints from real runs (workspace not mounted)', () => {
  const codecall = codecallWith({ tools: [add, info], builtinTools: ['files'], workspace });

  it('says a workspace path is not visible with workspaceMount "none", and to use read_file', async () => {
    const result = await codecall.execute('print(open("docs/a.md").read())');
    expect(result.error?.type).toBe('FileNotFoundError');
    expect(result.hint).toBe(
      '"docs/a.md" is not visible to the script: it runs in a private directory and does not see the workspace ' +
        '(workspaceMount "none"); read it with tools.read_file("docs/a.md") and find files with list_files.',
    );
  });

  it('says a dict result is indexed by key when the script indexes it by position', async () => {
    const result = await codecall.execute('from tools import info\nprint(info()[0])');
    expect(result.error).toMatchObject({ type: 'KeyError', message: '0' });
    expect(result.hint).toContain('A dict is indexed by key, not by position');
  });

  it('says a dict unpacks to its keys when the script unpacks a result as a tuple', async () => {
    const result = await codecall.execute('from tools import info\nname, size = info()\nprint(name, size)');
    expect(result.error?.type).toBe('ValueError');
    expect(result.hint).toContain('a dict unpacks to its keys, not its values');
  });

  it('suggests the closest tool for a misspelled import, attribute or name', async () => {
    const imported = await codecall.execute('from tools import reed_file');
    expect(imported.hint).toMatch(/^"tools" has no function "reed_file"; did you mean "read_file"\? the functions/);
    const attribute = await codecall.execute('import tools\ntools.list_file(".")');
    expect(attribute.hint).toMatch(/^"tools" has no function "list_file"; did you mean "list_files"\?/);
    const name = await codecall.execute('print(serch_files("x"))');
    expect(name.hint).toBe(
      '"serch_files" is not defined; did you mean "search_files"? Import it first: from tools import search_files.',
    );
    const unrelated = await codecall.execute('from tools import completely_different');
    expect(unrelated.hint).not.toContain('did you mean');
  });

  it.each(['json_parse', 'save_artifact', 'search_tools'])(
    'says to import a helper used without importing it: %s',
    async (helper) => {
      const result = await codecall.execute(`print(${helper}("x"))`);
      expect(result.hint).toBe(`Import the helper first: from tools import ${helper}.`);
    },
  );

  it('tells a workspace module that the script cannot see from a package that is not installed', async () => {
    const hidden = await codecall.execute('import billing');
    expect(hidden.hint).toBe(
      'Module "billing" is in the workspace, but the script does not see the workspace (workspaceMount "none"): ' +
        'it can only read files through the tools; mount the workspace (workspaceMount "read-only") to import it.',
    );
    const missing = await codecall.execute('import surely_not_installed_anywhere');
    expect(missing.hint).toMatch(/^Module "surely_not_installed_anywhere" is not installed: /);
  });
});

/** The hint for an error the script raised, with the workspace mounted as `mount`. */
function hintFor(type: string, message: string, mount: WorkspaceMount): string | undefined {
  const result: Omit<ExecuteResult, 'hint'> = {
    status: 'error',
    stdout: '',
    stderr: '',
    exitCode: 1,
    error: { type, message },
    toolCalls: 0,
    durationMs: 1,
    isolation: 'bubblewrap',
  };
  const context: HintContext = {
    moduleName: 'tools',
    functionNames: ['read_file', 'list_files'],
    submoduleNames: [],
    limits: resolveLimits({}),
    workspace: { root: workspace, mount },
  };
  return failureHint(result, context);
}

describe('hints that depend on the workspace mount', () => {
  it('names the mode and where relative paths start when a mounted workspace lacks the file', () => {
    expect(hintFor('FileNotFoundError', "[Errno 2] No such file or directory: 'doc/a.md'", 'copy')).toBe(
      '"doc/a.md" does not exist: the script starts in the workspace (mounted copy), so relative paths start ' +
        'there; look with os.listdir(".") or list_files(".", recursive=True) and mind the spelling.',
    );
  });

  it('says where to write when the workspace is read-only', () => {
    expect(hintFor('OSError', "[Errno 30] Read-only file system: 'out.csv'", 'read-only')).toBe(
      'The workspace is mounted read-only: write scratch files under os.environ["TMPDIR"] and files to return under ' +
        'os.environ["CODECALL_ARTIFACTS_DIR"], or change workspace files with tools.write_file.',
    );
  });

  it('names the disk limit for ENOSPC under bubblewrap, and a full host disk without a sandbox', () => {
    const message = "[Errno 28] No space left on device: 'big.bin'";
    expect(hintFor('OSError', message, 'copy')).toContain('disk limit of 512 MiB per run');
    const context: HintContext = {
      moduleName: 'tools',
      functionNames: [],
      submoduleNames: [],
      limits: resolveLimits({ maxDiskBytes: 3 * 1024 * 1024 }),
    };
    const base = { status: 'error', stdout: '', stderr: '', toolCalls: 0, durationMs: 1 } as const;
    expect(
      failureHint({ ...base, exitCode: 1, error: { type: 'OSError', message }, isolation: 'bubblewrap' }, context),
    ).toContain('disk limit of 3 MiB per run');
    expect(failureHint({ ...base, exitCode: 1, error: { type: 'OSError', message }, isolation: 'none' }, context)).toBe(
      'The disk the script writes to is full: write less, or delete files it no longer needs.',
    );
    const mapped = { type: 'Killed', message: 'the interpreter was killed by SIGBUS' };
    expect(
      failureHint({ ...base, exitCode: null, signal: 'SIGBUS', error: mapped, isolation: 'bubblewrap' }, context),
    ).toContain('mmap');
  });

  it('points to the source folder of a workspace package that is not on the import path', () => {
    expect(hintFor('ModuleNotFoundError', "No module named 'inventory'", 'read-only')).toBe(
      'Module "inventory" is in the workspace folder "src", which is not on the import path: add it first with ' +
        'sys.path.insert(0, "src") (the script starts in the workspace).',
    );
    expect(hintFor('ModuleNotFoundError', "No module named 'billing'", 'read-write')).toMatch(
      /^Module "billing" is in the workspace but did not import/,
    );
  });
});

describe('closestName', () => {
  it('finds a near name, ignores far ones and exact matches', () => {
    expect(closestName('raed_file', ['read_file', 'write_file'])).toBe('read_file');
    expect(closestName('xyz', ['read_file'])).toBeUndefined();
    expect(closestName('add', ['add'])).toBeUndefined();
    expect(closestName('a'.repeat(101), ['a'.repeat(100)])).toBeUndefined();
  });
});
