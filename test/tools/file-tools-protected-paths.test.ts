import { execFileSync } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { link, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { defaultStateRoot } from '../../src/core/state-folders.js';
import { createCodecall } from '../../src/engine/codecall.js';
import { createFileTools, type FileToolsOptions } from '../../src/tools/builtin-files.js';
import { resolveBuiltinTools } from '../../src/tools/builtin-tool-sets.js';
import type { Tool } from '../../src/tools/types.js';
import { createTestContext } from './test-context.js';

let base: string;
let workspace: string;
let outside: string;

function toolsFor(
  options: Partial<FileToolsOptions> = {},
): (name: string, args: Record<string, unknown>) => Promise<Record<string, unknown>> {
  const tools = new Map(createFileTools({ workspace, ...options }).map((tool) => [tool.name, tool]));
  return async (name, args) =>
    (await (tools.get(name) as Tool).execute(args, createTestContext(name))) as Record<string, unknown>;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'codecall-protected-'));
  workspace = path.join(base, 'workspace');
  outside = path.join(base, 'outside');
  await mkdir(path.join(workspace, '.git', 'hooks'), { recursive: true });
  await mkdir(path.join(workspace, 'sub', '.git', 'hooks'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(workspace, '.git', 'config'), '[core]\n\trepositoryformatversion = 0\n');
  await writeFile(path.join(workspace, 'notes.txt'), 'notes\n');
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('version-control metadata', () => {
  const call = (name: string, args: Record<string, unknown>) => toolsFor()(name, args);

  it.each([
    ['.git/config', '.git'],
    ['.git/hooks/pre-commit', '.git'],
    ['.GIT/config', '.GIT'],
    ['.Git/hooks/post-checkout', '.Git'],
    ['sub/.git/hooks/pre-commit', '.git'],
    ['sub/deeper/.git/config', '.git'],
    ['sub/.git', '.git'],
    ['.git', '.git'],
    ['.git./config', '.git.'],
    ['.g\u200Cit/config', '.g\u200Cit'],
    ['GIT~1/config', 'GIT~1'],
    ['.hg/hgrc', '.hg'],
    ['vendor/lib/.hg/hgrc', '.hg'],
    ['.svn/entries', '.svn'],
    ['.SVN/wc.db', '.SVN'],
    ['./x/../.git/config', '.git'],
  ])('write_file refuses %j and writes nothing', async (requested, metadata) => {
    const before = await readFile(path.join(workspace, '.git', 'config'), 'utf8');
    const existed = await exists(path.join(workspace, requested));
    await expect(
      call('write_file', { path: requested, content: '[core]\n\tfsmonitor = touch /tmp/pwned\n' }),
    ).rejects.toThrow(
      `write_file: '${requested}' is version-control metadata (${metadata}), which the file tools do not write`,
    );
    expect(await readFile(path.join(workspace, '.git', 'config'), 'utf8')).toBe(before);
    expect(await exists(path.join(workspace, requested))).toBe(existed);
  });

  it('write_file refuses an absolute path into .git', async () => {
    await expect(call('write_file', { path: path.join(workspace, '.git', 'config'), content: 'x' })).rejects.toThrow(
      'version-control metadata (.git)',
    );
  });

  it('reads, lists and writes look-alike names that are not metadata', async () => {
    expect((await call('read_file', { path: '.git/config' })).content).toContain('repositoryformatversion');
    expect((await call('list_files', { path: '.git' })).entries).toContainEqual({
      name: 'config',
      type: 'file',
      size: 36,
    });
    for (const name of ['.github/workflows/ci.yml', '.gitignore', '.gitattributes', 'git/config', '.git-old/config']) {
      expect(await call('write_file', { path: name, content: 'ok\n' })).toMatchObject({ created: true });
    }
  });

  it('search_files does not descend into .git, .hg or .svn', async () => {
    await mkdir(path.join(workspace, '.hg'), { recursive: true });
    await writeFile(path.join(workspace, '.hg', 'hgrc'), 'repositoryformatversion\n');
    const result = await call('search_files', { pattern: 'repositoryformatversion' });
    expect(result.matches).toEqual([]);
  });

  it('writes into metadata when allowVersionControlWrites is true', async () => {
    const allowed = toolsFor({ allowVersionControlWrites: true });
    expect(await allowed('write_file', { path: 'sub/.git/hooks/README', content: 'allowed\n' })).toMatchObject({
      created: true,
    });
  });
});

describe('deniedPaths', () => {
  const call = (name: string, args: Record<string, unknown>) =>
    toolsFor({ deniedPaths: ['.env', '*.pem', 'secrets/', '/config/production.json', 'docs/**/private*'] })(name, args);

  beforeAll(async () => {
    await mkdir(path.join(workspace, 'secrets', 'deep'), { recursive: true });
    await mkdir(path.join(workspace, 'config'), { recursive: true });
    await mkdir(path.join(workspace, 'app', 'config'), { recursive: true });
    await mkdir(path.join(workspace, 'docs', 'team'), { recursive: true });
    await writeFile(path.join(workspace, '.env'), 'API_KEY=denied-token\n');
    await writeFile(path.join(workspace, 'app', '.env'), 'API_KEY=denied-token\n');
    await writeFile(path.join(workspace, 'server.pem'), 'denied-token\n');
    await writeFile(path.join(workspace, 'secrets', 'deep', 'key.txt'), 'denied-token\n');
    await writeFile(path.join(workspace, 'config', 'production.json'), '{"token": "denied-token"}\n');
    await writeFile(path.join(workspace, 'app', 'config', 'production.json'), '{"token": "allowed"}\n');
    await writeFile(path.join(workspace, 'docs', 'team', 'private-notes.md'), 'denied-token\n');
    await writeFile(path.join(workspace, 'docs', 'team', 'public.md'), 'allowed\n');
  });

  it.each([
    '.env',
    'app/.env',
    'server.pem',
    'secrets',
    'secrets/deep/key.txt',
    'config/production.json',
    'docs/team/private-notes.md',
    'docs/../secrets/deep/key.txt',
  ])('read_file and write_file refuse %j', async (requested) => {
    const message = `'${requested}' is a denied path (files.deniedPaths): the file tools may not read or write it`;
    await expect(call('read_file', { path: requested })).rejects.toThrow(message);
    await expect(call('write_file', { path: requested, content: 'x' })).rejects.toThrow(message);
  });

  it('refuses new files that would match, without creating their directories', async () => {
    await expect(call('write_file', { path: 'new/place/cert.pem', content: 'x' })).rejects.toThrow('denied path');
    await expect(call('write_file', { path: 'secrets/new/file.txt', content: 'x' })).rejects.toThrow('denied path');
    expect(await exists(path.join(workspace, 'new'))).toBe(false);
    expect(await exists(path.join(workspace, 'secrets', 'new'))).toBe(false);
  });

  it('reads what the patterns do not cover', async () => {
    expect((await call('read_file', { path: 'app/config/production.json' })).content).toContain('allowed');
    expect((await call('read_file', { path: 'docs/team/public.md' })).content).toBe('allowed\n');
  });

  it('list_files hides denied entries and refuses denied directories', async () => {
    const names = ((await call('list_files', {})).entries as Array<{ name: string }>).map((entry) => entry.name);
    expect(names).toContain('notes.txt');
    expect(names).not.toContain('.env');
    expect(names).not.toContain('server.pem');
    expect(names).not.toContain('secrets');
    const team = ((await call('list_files', { path: 'docs/team' })).entries as Array<{ name: string }>).map(
      (entry) => entry.name,
    );
    expect(team).toEqual(['public.md']);
    await expect(call('list_files', { path: 'secrets/deep' })).rejects.toThrow('denied path');
  });

  it('search_files skips denied files and refuses a denied start', async () => {
    const result = await call('search_files', { pattern: 'denied-token|allowed' });
    const paths = (result.matches as Array<{ path: string }>).map((match) => match.path);
    expect(paths).toContain('docs/team/public.md');
    expect(paths.filter((file) => !file.startsWith('.git'))).toEqual(
      expect.not.arrayContaining(['.env', 'app/.env', 'server.pem', 'secrets/deep/key.txt', 'config/production.json']),
    );
    expect(JSON.stringify(result.matches)).not.toContain('denied-token');
    await expect(call('search_files', { pattern: 'x', path: 'secrets' })).rejects.toThrow('denied path');
  });

  it('refuses a negated pattern with INVALID_CONFIG', () => {
    expect(() => createFileTools({ workspace, deniedPaths: ['*.pem', '!public.pem'] })).toThrow(CodecallError);
  });
});

describe('files that are not regular', () => {
  const call = (name: string, args: Record<string, unknown>) => toolsFor()(name, args);
  let server: Server | undefined;

  afterAll(() => {
    server?.close();
  });

  it('refuses a FIFO with a reader for writing, and writes nothing into it', async () => {
    const fifo = path.join(workspace, 'pipe-with-reader');
    execFileSync('mkfifo', [fifo]);
    const reader = await open(fifo, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    try {
      await expect(call('write_file', { path: 'pipe-with-reader', content: 'into the pipe' })).rejects.toThrow(
        "write_file: 'pipe-with-reader' is not a regular file",
      );
      const buffer = Buffer.alloc(64);
      const { bytesRead } = await reader.read(buffer, 0, 64, null).catch(() => ({ bytesRead: 0 }));
      expect(bytesRead).toBe(0);
    } finally {
      await reader.close();
    }
  });

  it('refuses a FIFO without a reader for writing instead of blocking', async () => {
    execFileSync('mkfifo', [path.join(workspace, 'pipe-alone')]);
    await expect(call('write_file', { path: 'pipe-alone', content: 'x' })).rejects.toThrow('is not a regular file');
    await expect(call('read_file', { path: 'pipe-alone' })).rejects.toThrow('is not a regular file');
  });

  it('refuses a Unix socket', async () => {
    const socketPath = path.join(workspace, 'socket');
    server = createServer();
    await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
    await expect(call('read_file', { path: 'socket' })).rejects.toThrow("read_file: 'socket' is not a regular file");
    await expect(call('write_file', { path: 'socket', content: 'x' })).rejects.toThrow('is not a regular file');
  });

  it.runIf(process.getuid?.() === 0)('refuses character devices made in the workspace', async () => {
    // The same devices as /dev/null (1,3) and /dev/zero (1,5).
    execFileSync('mknod', [path.join(workspace, 'null-device'), 'c', '1', '3']);
    execFileSync('mknod', [path.join(workspace, 'zero-device'), 'c', '1', '5']);
    for (const name of ['null-device', 'zero-device']) {
      await expect(call('read_file', { path: name })).rejects.toThrow(`read_file: '${name}' is not a regular file`);
      await expect(call('write_file', { path: name, content: 'x' })).rejects.toThrow('is not a regular file');
    }
    const searched = await call('search_files', { pattern: '.', path: 'zero-device' }).catch((error: Error) => error);
    expect(searched).toBeInstanceOf(Error);
  });

  it('does not write a file that has a hard link outside the workspace', async () => {
    await writeFile(path.join(outside, 'victim.txt'), 'outside content\n');
    await link(path.join(outside, 'victim.txt'), path.join(workspace, 'hard-link.txt'));
    await expect(call('write_file', { path: 'hard-link.txt', content: 'pwned\n' })).rejects.toThrow(
      "write_file: 'hard-link.txt' has 2 hard links; write_file does not write a file that has other names",
    );
    expect(await readFile(path.join(outside, 'victim.txt'), 'utf8')).toBe('outside content\n');
  });
});

describe("codecall's state folder inside the workspace", () => {
  it('is unreachable by every tool, and hidden from listings', async () => {
    const stateDir = path.join(workspace, 'state');
    const runDirectory = path.join(stateDir, 'runs', 'run-1');
    await mkdir(runDirectory, { recursive: true });
    await writeFile(path.join(runDirectory, 'script.py'), 'print("secret of another run")\n');
    const call = toolsFor({ unreachableDirectories: [stateDir] });
    const message = "'state/runs/run-1/script.py' is inside codecall's own state folder";
    await expect(call('read_file', { path: 'state/runs/run-1/script.py' })).rejects.toThrow(message);
    await expect(call('write_file', { path: 'state/runs/run-1/script.py', content: 'x' })).rejects.toThrow(message);
    await expect(call('write_file', { path: 'state/new.txt', content: 'x' })).rejects.toThrow('state folder');
    await expect(call('list_files', { path: 'state/runs' })).rejects.toThrow('state folder');
    await expect(call('search_files', { pattern: 'secret', path: 'state' })).rejects.toThrow('state folder');
    await expect(call('read_file', { path: path.join(runDirectory, 'script.py') })).rejects.toThrow('state folder');
    const names = ((await call('list_files', {})).entries as Array<{ name: string }>).map((entry) => entry.name);
    expect(names).not.toContain('state');
    expect(JSON.stringify((await call('search_files', { pattern: 'secret of another run' })).matches)).toBe('[]');
    expect(await readdir(stateDir)).toEqual(['runs']);
  });

  it('is unreachable even before it exists, and when given through a link', async () => {
    const later = path.join(workspace, 'later-state');
    const call = toolsFor({ unreachableDirectories: [later] });
    await expect(call('write_file', { path: 'later-state/x.txt', content: 'x' })).rejects.toThrow('state folder');
    expect(await exists(later)).toBe(false);
    await (await import('node:fs/promises')).symlink(workspace, path.join(base, 'workspace-alias'));
    const throughAlias = toolsFor({ unreachableDirectories: [path.join(base, 'workspace-alias', 'state')] });
    await expect(throughAlias('list_files', { path: 'state' })).rejects.toThrow('state folder');
  });

  it('refuses a workspace inside the state folder', () => {
    try {
      createFileTools({ workspace, unreachableDirectories: [base] });
      expect.unreachable();
    } catch (error) {
      expect((error as CodecallError).code).toBe('INVALID_CONFIG');
      expect((error as CodecallError).message).toContain("is inside codecall's state folder");
    }
    expect(() => createFileTools({ workspace, unreachableDirectories: [workspace] })).toThrow('state folder');
  });

  it('with the defaults of `codecall run` from the temporary folder: the tools refuse the state folder', async () => {
    const stateRoot = defaultStateRoot();
    await mkdir(path.join(stateRoot, 'runs'), { recursive: true, mode: 0o711 });
    const tools = new Map(
      resolveBuiltinTools({ names: ['files'], workspace: path.dirname(stateRoot), stateDir: stateRoot }).map((tool) => [
        tool.name,
        tool,
      ]),
    );
    const name = path.basename(stateRoot);
    const readFileTool = tools.get('read_file') as Tool;
    await expect(readFileTool.execute({ path: `${name}/runs` }, createTestContext('read_file'))).rejects.toThrow(
      "codecall's own state folder",
    );
    const listed = (await (tools.get('list_files') as Tool).execute({}, createTestContext('list_files'))) as {
      entries: Array<{ name: string }>;
    };
    expect(listed.entries.map((entry) => entry.name)).not.toContain(name);
  });

  it('resolveBuiltinTools passes the files option through and checks it', () => {
    expect(() => resolveBuiltinTools({ names: ['files'], workspace, files: { deniedPaths: ['!x'] } })).toThrow(
      'negates',
    );
    expect(() =>
      resolveBuiltinTools({ names: [], workspace, files: { deny: ['x'] } as unknown as { deniedPaths: string[] } }),
    ).toThrow('unknown key "deny" in files; known keys: deniedPaths, allowVersionControlWrites');
  });
});

describe('through createCodecall', () => {
  it("keeps a run's own directory unreachable when the state folder is inside the workspace", async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'codecall-state-inside-'));
    const codecall = createCodecall({
      workspace: root,
      stateDir: path.join(root, 'state'),
      builtinTools: ['files'],
      sandbox: 'none',
      // The run directory as the working directory: this test reaches it by a path relative to the workspace.
      workspaceMount: 'none',
      files: { deniedPaths: ['*.secret'] },
    });
    try {
      await writeFile(path.join(root, 'api.secret'), 'denied-token\n');
      const result = await codecall.execute(
        [
          'import os',
          'from tools import read_file, write_file, list_files, search_files, ToolError',
          `run = os.path.relpath(os.getcwd(), ${JSON.stringify(root)})`,
          "open('mine.txt', 'w').write('x')",
          'calls = [',
          "    lambda: read_file(run + '/mine.txt'),",
          "    lambda: write_file(run + '/new.txt', 'x'),",
          "    lambda: write_file('state/runs/planted.txt', 'x'),",
          '    lambda: list_files(run),',
          "    lambda: search_files('x', path=run),",
          "    lambda: read_file('api.secret'),",
          ']',
          'for call in calls:',
          '    try:',
          '        call()',
          "        print('allowed')",
          '    except ToolError as error:',
          "        print('refused', 'state folder' in str(error) or 'denied path' in str(error))",
          "print(sorted(entry['name'] for entry in list_files('.')['entries']))",
        ].join('\n'),
      );
      expect(result.stderr).toBe('');
      expect(result.stdout).toBe(`${'refused True\n'.repeat(6)}[]\n`);
      expect(await exists(path.join(root, 'state', 'runs', 'planted.txt'))).toBe(false);
    } finally {
      await codecall.close();
      await rm(root, { recursive: true, force: true });
    }
  });

  it('refuses a workspace inside the state folder at creation', () => {
    expect(() => createCodecall({ workspace, stateDir: base, builtinTools: ['files'] })).toThrow(
      "is inside codecall's state folder",
    );
    expect(() => createCodecall({ workspace, files: { deniedPaths: 'x' as unknown as string[] } })).toThrow(
      'files.deniedPaths must be an array',
    );
  });
});
