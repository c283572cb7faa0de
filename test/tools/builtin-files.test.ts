import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import {
  createFileTools,
  MAX_LIST_ENTRIES,
  MAX_READ_BYTES,
  MAX_SEARCH_MATCHES,
} from '../../src/tools/builtin-files.js';
import { BUILTIN_TOOL_SETS, resolveBuiltinTools } from '../../src/tools/builtin-tool-sets.js';
import { encodedTextOf } from '../../src/tools/encoded-text.js';
import type { RegisteredTool } from '../../src/tools/registered-tool.js';
import { createToolRegistry, registerTool } from '../../src/tools/registry.js';
import { createTestContext } from './test-context.js';

let base: string;
let workspace: string;
let outside: string;
let tools: Map<string, RegisteredTool>;

/** Calls a built-in tool the way the engine does: check the arguments, then invoke with the checked value. */
async function call(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const tool = tools.get(name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const check = await tool.checkArguments(args);
  if (!check.ok) throw new Error(check.message);
  return (await tool.invoke(check.value, createTestContext(name))) as Record<string, unknown>;
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'codecall-files-'));
  workspace = path.join(base, 'workspace');
  outside = path.join(base, 'outside');
  await mkdir(path.join(workspace, 'docs', 'deep'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'TOP SECRET\n');
  await writeFile(path.join(workspace, 'notes.txt'), 'one\ntwo\nthree\nfour\nfive\n');
  await writeFile(path.join(workspace, 'no-newline.txt'), 'alpha\nbeta');
  await writeFile(path.join(workspace, 'crlf.txt'), 'a\r\nb\r\n');
  await writeFile(path.join(workspace, 'empty.txt'), '');
  await writeFile(path.join(workspace, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
  await writeFile(path.join(workspace, 'docs', 'guide.md'), '# Guide\nSee TODO list\n');
  await writeFile(path.join(workspace, 'docs', 'deep', 'todo.txt'), 'nothing\nTODO: write tests\n');
  await writeFile(path.join(workspace, 'image.bin'), Buffer.from([0x89, 0x50, 0x00, 0x54, 0x4f, 0x44, 0x4f]));
  await mkdir(path.join(workspace, 'node_modules', 'lib'), { recursive: true });
  await writeFile(path.join(workspace, 'node_modules', 'lib', 'index.js'), '// TODO vendored\n');
  await symlink('/etc/passwd', path.join(workspace, 'passwd-link'));
  await symlink('/etc', path.join(workspace, 'etc-link'));
  await symlink(outside, path.join(workspace, 'outside-link'));
  await symlink(path.join(outside, 'secret.txt'), path.join(workspace, 'secret-link.txt'));
  await symlink(path.join(outside, 'not-yet'), path.join(workspace, 'dangling-link'));
  await symlink('notes.txt', path.join(workspace, 'inside-link.txt'));
  await symlink('docs', path.join(workspace, 'docs-link'));
  tools = new Map(createFileTools({ workspace }).map((tool) => [tool.name, registerTool(tool)]));
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('createFileTools', () => {
  it('creates the four tools with descriptions and output schemas', () => {
    expect([...tools.keys()]).toEqual(['read_file', 'write_file', 'list_files', 'search_files']);
    for (const tool of tools.values()) {
      expect(tool.descriptor.description.length).toBeGreaterThan(40);
      expect(tool.descriptor.outputSchema).toMatchObject({ type: 'object' });
      expect(tool.descriptor.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
    }
    expect(tools.get('read_file')?.descriptor.description).toContain('1 MiB');
  });

  it('refuses a workspace that does not exist or is a file', async () => {
    expect(() => createFileTools({ workspace: path.join(base, 'missing') })).toThrow(CodecallError);
    try {
      createFileTools({ workspace: path.join(workspace, 'notes.txt') });
      expect.unreachable();
    } catch (error) {
      expect((error as CodecallError).code).toBe('INVALID_CONFIG');
      expect((error as CodecallError).message).toContain('is not a directory');
    }
  });
});

describe('read_file', () => {
  it('reads a whole file with its line count', async () => {
    expect(await call('read_file', { path: 'notes.txt' })).toEqual({
      path: 'notes.txt',
      content: 'one\ntwo\nthree\nfour\nfive\n',
      totalLines: 5,
      offset: 1,
      limit: null,
      truncated: false,
      nextOffset: null,
    });
  });

  it('returns a window of lines with offset and limit, and where to continue', async () => {
    const result = await call('read_file', { path: 'notes.txt', offset: 2, limit: 2 });
    expect(result).toMatchObject({ content: 'two\nthree\n', totalLines: 5, offset: 2, limit: 2, nextOffset: 4 });
    expect(await call('read_file', { path: 'notes.txt', offset: 4, limit: 10 })).toMatchObject({
      content: 'four\nfive\n',
      nextOffset: null,
    });
    expect(await call('read_file', { path: 'notes.txt', offset: null, limit: null })).toMatchObject({
      content: 'one\ntwo\nthree\nfour\nfive\n',
    });
  });

  it('counts a last line without newline, keeps CRLF, handles empty files', async () => {
    expect(await call('read_file', { path: 'no-newline.txt', offset: 2 })).toMatchObject({
      content: 'beta',
      totalLines: 2,
    });
    expect(await call('read_file', { path: 'crlf.txt' })).toMatchObject({ content: 'a\r\nb\r\n', totalLines: 2 });
    expect(await call('read_file', { path: 'empty.txt' })).toMatchObject({ content: '', totalLines: 0 });
  });

  it('counts lines of every length, wherever the short ones start and whatever bytes they hold', async () => {
    // Bytes one bit away from a newline, and with the high bit set: none counts as one.
    const nearNewline = [0x0b, 0x08, 0x0e, 0x02, 0x1a, 0x2a, 0x4a, 0x8a, 0xf5, 0x00];
    for (let shift = 0; shift < 8; shift += 1) {
      // Long lines first (found one at a time), then short and empty ones (counted by words from where they start).
      const parts = [Buffer.from(`${'x'.repeat(90 + shift)}\n`.repeat(70 + shift))];
      for (let index = 0; index < 3_000; index += 1) {
        const line = Array.from({ length: (index * 5 + shift) % 9 }, (_, at) => nearNewline[(index + at) % 10] ?? 0);
        parts.push(Buffer.from([...line, 0x0a]));
      }
      if (shift % 2 === 1) parts.push(Buffer.from('no newline at the end'));
      const bytes = Buffer.concat(parts);
      const newlines = bytes.filter((byte) => byte === 0x0a).length;
      const name = `short-lines-${shift}.txt`;
      await writeFile(path.join(workspace, name), bytes);
      const result = await call('read_file', { path: name });
      expect(result).toMatchObject({ totalLines: shift % 2 === 1 ? newlines + 1 : newlines, nextOffset: null });
      expect(result.content).toBe(bytes.toString('utf8'));
    }
    await writeFile(path.join(workspace, 'empty-lines.txt'), `${'\n'.repeat(10_001)}last`);
    expect(await call('read_file', { path: 'empty-lines.txt', offset: 10_002 })).toMatchObject({
      content: 'last',
      totalLines: 10_002,
    });
    expect(await call('read_file', { path: 'empty-lines.txt' })).toMatchObject({ totalLines: 10_002 });
  });

  it('replaces invalid UTF-8 with U+FFFD', async () => {
    expect(await call('read_file', { path: 'latin1.txt' })).toMatchObject({ content: 'caf\uFFFD\n' });
  });

  it('keeps longer text of invalid UTF-8 as the bytes read, which read as Node decodes them', async () => {
    // Past what read_file decodes at once: bad sequences of each kind between valid text.
    const bytes = Buffer.concat(
      Array.from({ length: 400 }, (_, index) =>
        Buffer.concat([
          Buffer.from(`line ${index} é `),
          Buffer.from([[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]][index % 4] as number[]),
          Buffer.from('\n'),
        ]),
      ),
    );
    await writeFile(path.join(workspace, 'invalid-long.txt'), bytes);
    const result = await call('read_file', { path: 'invalid-long.txt' });
    // Sent to a script as they are (the channel's raw text), unchecked.
    expect(encodedTextOf(result)?.bytes.equals(bytes)).toBe(true);
    expect(result).toMatchObject({ content: bytes.toString('utf8'), totalLines: 400 });
  });

  it('says when the offset is past the end', async () => {
    expect(await call('read_file', { path: 'notes.txt', offset: 9 })).toMatchObject({
      content: '',
      note: 'offset 9 is past the end of the file (5 lines)',
    });
  });

  it('stops at the byte cap on a line boundary and says where to continue', async () => {
    const line = `${'x'.repeat(999)}\n`;
    const lineCount = Math.ceil((2.5 * MAX_READ_BYTES) / line.length);
    await writeFile(path.join(workspace, 'big.txt'), line.repeat(lineCount));
    const first = await call('read_file', { path: 'big.txt' });
    const linesKept = Math.floor(MAX_READ_BYTES / line.length);
    expect(first).toMatchObject({ totalLines: lineCount, truncated: true, nextOffset: linesKept + 1 });
    expect((first.content as string).length).toBe(linesKept * line.length);
    expect(first.note).toBe(
      `stopped at the 1 MiB cap after ${linesKept} lines; call read_file again with offset=${linesKept + 1} to continue`,
    );
    const last = await call('read_file', { path: 'big.txt', offset: lineCount - 1 });
    expect(last).toMatchObject({ content: line.repeat(2), truncated: false, nextOffset: null });
  });

  it('reads windows of a file read in several buffers, with lines and characters across their edges', async () => {
    // Lines of varying length with multi-byte characters, 5 MiB in all: more than one read buffer holds.
    const lines = Array.from(
      { length: 60_000 },
      (_, index) => `${index}:${'é'.repeat(index % 97)}${'x'.repeat(index % 13)}\n`,
    );
    const text = lines.join('');
    expect(Buffer.byteLength(text)).toBeGreaterThan(4 * 1024 * 1024);
    await writeFile(path.join(workspace, 'several-buffers.txt'), text);
    for (const [offset, limit] of [
      [1, 5],
      [2_000, 3_000],
      [29_999, 7],
      [59_990, 20],
    ] as const) {
      const result = await call('read_file', { path: 'several-buffers.txt', offset, limit });
      expect(result).toMatchObject({
        content: lines.slice(offset - 1, offset - 1 + limit).join(''),
        totalLines: lines.length,
        truncated: false,
        nextOffset: offset + limit <= lines.length ? offset + limit : null,
      });
    }
    const whole = await call('read_file', { path: 'several-buffers.txt' });
    const kept = (whole.nextOffset as number) - 1;
    expect(whole).toMatchObject({ truncated: true, totalLines: lines.length, content: lines.slice(0, kept).join('') });
    expect(Buffer.byteLength(lines.slice(0, kept + 1).join(''))).toBeGreaterThan(MAX_READ_BYTES);
  });

  it('cuts a single line longer than the cap at a character boundary', async () => {
    await writeFile(path.join(workspace, 'long-line.txt'), `${'é'.repeat(MAX_READ_BYTES)}\nnext\n`);
    const result = await call('read_file', { path: 'long-line.txt' });
    expect(result).toMatchObject({ truncated: true, nextOffset: 2, totalLines: 2 });
    expect(result.content).toBe('é'.repeat(MAX_READ_BYTES / 2));
    expect(result.note).toBe('line 1 is longer than the 1 MiB cap and was cut');
  });

  it('stops a read through the thread pool once its call is cancelled; a quick read never makes the signal', async () => {
    const tool = tools.get('read_file');
    let signalReads = 0;
    const cancelled = new AbortController();
    cancelled.abort();
    const context = {
      ...createTestContext('read_file'),
      get signal() {
        signalReads += 1;
        return cancelled.signal;
      },
    };
    expect(await tool?.invoke({ path: 'notes.txt' }, context)).toMatchObject({
      content: 'one\ntwo\nthree\nfour\nfive\n',
    });
    expect(signalReads).toBe(0);
    await writeFile(path.join(workspace, 'pool-read.txt'), `${'y'.repeat(999)}\n`.repeat(600));
    await expect(tool?.invoke({ path: 'pool-read.txt' }, context)).rejects.toThrow('read_file: the call was cancelled');
    expect(signalReads).toBe(1);
  });

  it('names a file by its place in the workspace however the path is written, dotted names included', async () => {
    const root = path.join(base, 'spellings');
    await mkdir(path.join(root, 'a', 'b'), { recursive: true });
    for (const name of ['...', '..x', 'x..', '.hidden']) await writeFile(path.join(root, 'a', name), `${name}\n`);
    await writeFile(path.join(root, 'a', 'b', 'c.txt'), 'c\n');
    const [readFile] = createFileTools({ workspace: root }).map(registerTool);
    const read = (requested: string) => readFile?.invoke({ path: requested }, createTestContext('read_file'));
    for (const spelling of [
      'a/b/c.txt',
      './a/b/c.txt',
      'a//b/c.txt',
      'a/./b/c.txt',
      'a/b/../b/c.txt',
      'a/b/c.txt/',
      `${root}/a/b/c.txt`,
    ]) {
      expect(await read(spelling)).toMatchObject({ path: 'a/b/c.txt', content: 'c\n' });
    }
    for (const name of ['...', '..x', 'x..', '.hidden']) {
      expect(await read(`a/${name}`)).toMatchObject({ path: `a/${name}`, content: `${name}\n` });
      expect(await read(`a/b/../${name}`)).toMatchObject({ path: `a/${name}`, content: `${name}\n` });
    }
    await expect(read('a/b/../../..')).rejects.toThrow("read_file: path 'a/b/../../..' is outside the workspace");
    await expect(read('a/..')).rejects.toThrow("read_file: 'a/..' is a directory");
  });

  it('refuses symbolic links even when they stay inside the workspace', async () => {
    await expect(call('read_file', { path: 'inside-link.txt' })).rejects.toThrow(
      "read_file: 'inside-link.txt' is a symbolic link; the file tools never follow links (use the path of the target if it is inside the workspace)",
    );
    await expect(call('read_file', { path: 'docs-link/guide.md' })).rejects.toThrow(
      "read_file: 'docs-link/guide.md' goes through the symbolic link 'docs-link'; the file tools never follow links",
    );
  });

  it('accepts an absolute path inside the workspace', async () => {
    expect(await call('read_file', { path: path.join(workspace, 'notes.txt'), limit: 1 })).toMatchObject({
      path: 'notes.txt',
      content: 'one\n',
    });
  });

  it.each([
    ['../../etc/passwd', "read_file: path '../../etc/passwd' is outside the workspace"],
    ['/etc/passwd', "read_file: path '/etc/passwd' is outside the workspace"],
    ['docs/../../outside/secret.txt', "read_file: path 'docs/../../outside/secret.txt' is outside the workspace"],
  ])('refuses %s', async (requested, message) => {
    await expect(call('read_file', { path: requested })).rejects.toThrow(
      `${message}; use a path relative to the workspace root`,
    );
  });

  it.each([
    ['passwd-link', "read_file: 'passwd-link' is a symbolic link"],
    ['etc-link/passwd', "read_file: 'etc-link/passwd' goes through the symbolic link 'etc-link'"],
    ['secret-link.txt', "read_file: 'secret-link.txt' is a symbolic link"],
    ['outside-link/secret.txt', "read_file: 'outside-link/secret.txt' goes through the symbolic link 'outside-link'"],
    ['outside-link/missing.txt', "read_file: 'outside-link/missing.txt' goes through the symbolic link 'outside-link'"],
    ['dangling-link', "read_file: 'dangling-link' is a symbolic link"],
    ['docs/../etc-link/passwd', "read_file: 'docs/../etc-link/passwd' goes through the symbolic link 'etc-link'"],
  ])('refuses the link in %s', async (requested, message) => {
    const error = await call('read_file', { path: requested }).catch((thrown: unknown) => thrown as Error);
    expect(error.message).toBe(
      `${message}; the file tools never follow links (use the path of the target if it is inside the workspace)`,
    );
    expect(error.message).not.toContain(outside);
  });

  it('refuses an absolute path to the outside secret', async () => {
    await expect(call('read_file', { path: path.join(outside, 'secret.txt') })).rejects.toThrow(
      'is outside the workspace',
    );
  });

  it('reports missing files, directories and bad arguments clearly, without host paths', async () => {
    const missing = call('read_file', { path: 'nope.txt' });
    await expect(missing).rejects.toThrow("read_file: no such file or directory 'nope.txt'");
    await expect(call('read_file', { path: 'docs' })).rejects.toThrow(
      "read_file: 'docs' is a directory; use list_files to see what it contains",
    );
    await expect(call('read_file', { path: 'notes.txt/x' })).rejects.toThrow(
      "read_file: 'notes.txt/x' (or one of its parents) is not a directory",
    );
    await expect(call('read_file', { path: 'notes.txt', offset: 0 })).rejects.toThrow(
      "read_file: argument 'offset' must be >= 1 (got number 0)",
    );
    await expect(call('read_file', { path: 'a\0b' })).rejects.toThrow(
      "read_file: path 'a\0b' contains a NUL character",
    );
    const error = await missing.catch((thrown: unknown) => thrown as Error);
    expect(error.message).not.toContain(base);
  });

  it('refuses a FIFO instead of blocking on it', async () => {
    execFileSync('mkfifo', [path.join(workspace, 'pipe')]);
    try {
      await expect(call('read_file', { path: 'pipe' })).rejects.toThrow("read_file: 'pipe' is not a regular file");
    } finally {
      await rm(path.join(workspace, 'pipe'));
    }
  });

  it('closes every descriptor it opens, whether it reads, reads through the thread pool or refuses', async () => {
    await mkdir(path.join(workspace, 'fd-check'));
    await writeFile(path.join(workspace, 'fd-check', 'big.txt'), 'y\n'.repeat(300_000));
    execFileSync('mkfifo', [path.join(workspace, 'fd-check', 'pipe')]);
    const bufferedRead = tools.get('read_file')?.bufferedRead;
    if (bufferedRead === undefined) throw new Error('read_file has no buffered read');
    const lent = Buffer.alloc(256 * 1024);
    const paths = [
      'notes.txt',
      'docs/deep/todo.txt',
      'fd-check/big.txt',
      'nope.txt',
      'docs/nope/x.txt',
      'docs',
      'passwd-link',
      'etc-link/passwd',
      'notes.txt/x',
      'fd-check/pipe',
    ];
    const openDescriptors = (): number => readdirSync('/proc/self/fd').length;
    try {
      const before = openDescriptors();
      for (const requested of paths) {
        for (const args of [{ path: requested }, { path: requested, offset: 2, limit: 3 }]) {
          await call('read_file', args).catch(() => undefined);
          await bufferedRead(args, createTestContext('read_file'), lent).catch(() => undefined);
        }
        await call('list_files', { path: requested }).catch(() => undefined);
      }
      await call('write_file', { path: 'fd-check/new/deeper/file.txt', content: 'made\n' });
      await call('write_file', { path: 'etc-link/x.txt', content: 'refused\n' }).catch(() => undefined);
      expect(openDescriptors()).toBe(before);
    } finally {
      await rm(path.join(workspace, 'fd-check'), { recursive: true });
    }
  });

  it('works when the workspace itself is reached through a symbolic link', async () => {
    const alias = path.join(base, 'workspace-alias');
    await symlink(workspace, alias);
    const aliased = new Map(createFileTools({ workspace: alias }).map((tool) => [tool.name, registerTool(tool)]));
    const readFileTool = aliased.get('read_file');
    const result = await readFileTool?.invoke(
      { path: path.join(alias, 'notes.txt'), limit: 1 },
      createTestContext('r'),
    );
    expect(result).toMatchObject({ path: 'notes.txt', content: 'one\n' });
    await expect(
      readFileTool?.invoke({ path: path.join(alias, '..', 'outside', 'secret.txt') }, createTestContext('r')),
    ).rejects.toThrow('is outside the workspace');
  });
});

describe('write_file', () => {
  it('writes a new file, creating parent directories', async () => {
    expect(await call('write_file', { path: 'out/nested/result.txt', content: 'héllo\n' })).toEqual({
      path: 'out/nested/result.txt',
      bytesWritten: 7,
      created: true,
    });
    expect(await readFile(path.join(workspace, 'out', 'nested', 'result.txt'), 'utf8')).toBe('héllo\n');
  });

  it('replaces an existing file', async () => {
    await call('write_file', { path: 'replace.txt', content: 'first version, long' });
    expect(await call('write_file', { path: 'replace.txt', content: 'second' })).toMatchObject({ created: false });
    expect(await readFile(path.join(workspace, 'replace.txt'), 'utf8')).toBe('second');
  });

  it('does not write through a link that stays inside', async () => {
    await writeFile(path.join(workspace, 'target.txt'), 'old');
    await symlink('target.txt', path.join(workspace, 'target-link.txt'));
    await expect(call('write_file', { path: 'target-link.txt', content: 'new' })).rejects.toThrow(
      "write_file: 'target-link.txt' is a symbolic link; the file tools never follow links",
    );
    expect(await readFile(path.join(workspace, 'target.txt'), 'utf8')).toBe('old');
  });

  it.each([
    ['../escape.txt', 'outside the workspace'],
    ['/tmp/codecall-escape.txt', 'outside the workspace'],
    ['outside-link/new.txt', "goes through the symbolic link 'outside-link'"],
    ['outside-link/sub/dir/new.txt', "goes through the symbolic link 'outside-link'"],
    ['secret-link.txt', 'is a symbolic link'],
    ['etc-link/codecall-test', "goes through the symbolic link 'etc-link'"],
    ['dangling-link', 'is a symbolic link'],
    ['dangling-link/child.txt', "goes through the symbolic link 'dangling-link'"],
  ])('refuses %s and writes nothing', async (requested, message) => {
    await expect(call('write_file', { path: requested, content: 'pwned' })).rejects.toThrow(message);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    await expect(stat(path.join(outside, 'not-yet'))).rejects.toThrow();
    await expect(stat(path.join(outside, 'new.txt'))).rejects.toThrow();
    await expect(stat(path.join(outside, 'sub'))).rejects.toThrow();
    await expect(stat(path.join(base, 'escape.txt'))).rejects.toThrow();
    await expect(stat('/tmp/codecall-escape.txt')).rejects.toThrow();
  });

  it('refuses to write over a directory', async () => {
    await expect(call('write_file', { path: 'docs', content: 'x' })).rejects.toThrow(
      "write_file: 'docs' is a directory",
    );
  });

  it('requires content to be a string', async () => {
    await expect(call('write_file', { path: 'x.txt', content: 5 })).rejects.toThrow(
      "write_file: argument 'content' must be string (got number 5)",
    );
    await expect(call('write_file', { path: 'x.txt' })).rejects.toThrow(
      "write_file: missing required argument 'content'",
    );
  });
});

describe('list_files', () => {
  it('lists the workspace root sorted, with types and sizes', async () => {
    const result = await call('list_files', {});
    expect(result.path).toBe('.');
    const entries = result.entries as Array<{ name: string; type: string; size: number | null }>;
    const names = entries.map((entry) => entry.name);
    expect(names).toEqual([...names].sort());
    expect(entries.find((entry) => entry.name === 'notes.txt')).toEqual({ name: 'notes.txt', type: 'file', size: 24 });
    expect(entries.find((entry) => entry.name === 'docs')).toEqual({ name: 'docs', type: 'directory', size: null });
    expect(entries.find((entry) => entry.name === 'passwd-link')).toEqual({
      name: 'passwd-link',
      type: 'symlink',
      size: null,
    });
    expect(result.truncated).toBe(false);
  });

  it('filters names with a glob', async () => {
    const result = await call('list_files', { path: '.', pattern: '*.{md,txt}' });
    const names = (result.entries as Array<{ name: string }>).map((entry) => entry.name);
    expect(names).toContain('notes.txt');
    expect(names).not.toContain('image.bin');
    expect(names.every((name) => name.endsWith('.txt') || name.endsWith('.md'))).toBe(true);
    expect(result.totalEntries).toBe(names.length);
    expect((await call('list_files', { path: 'docs', pattern: '*.md' })).entries).toEqual([
      { name: 'guide.md', type: 'file', size: 22 },
    ]);
  });

  it('reports a pattern that expands too far', async () => {
    await expect(call('list_files', { pattern: '{a,b}'.repeat(9) })).rejects.toThrow(
      "list_files: invalid pattern: the pattern's {} groups expand to more than 256 alternatives",
    );
  });

  it(`caps the listing at ${MAX_LIST_ENTRIES} entries`, async () => {
    const many = path.join(workspace, 'many');
    await mkdir(many);
    await Promise.all(
      Array.from({ length: MAX_LIST_ENTRIES + 5 }, (_, index) =>
        writeFile(path.join(many, `f${String(index).padStart(4, '0')}.txt`), ''),
      ),
    );
    const result = await call('list_files', { path: 'many' });
    expect(result).toMatchObject({ path: 'many', totalEntries: MAX_LIST_ENTRIES + 5, truncated: true });
    const entries = result.entries as Array<{ name: string }>;
    expect(entries).toHaveLength(MAX_LIST_ENTRIES);
    expect(entries[0]?.name).toBe('f0000.txt');
  });

  it("lists recursively with a '**' pattern: relative paths, links and node_modules not entered", async () => {
    const result = await call('list_files', { pattern: '**/*.md' });
    expect(result).toMatchObject({ path: '.', truncated: false });
    expect(result.entries).toEqual([{ name: 'docs/guide.md', type: 'file', size: 22 }]);
    expect(result.totalEntries).toBe(1);
    expect(result.note).toBeUndefined();
  });

  it('lists recursively with recursive: a pattern without / matches the last component at any depth', async () => {
    const names = (result: Record<string, unknown>) => (result.entries as Array<{ name: string }>).map((e) => e.name);
    const textFiles = names(await call('list_files', { recursive: true, pattern: '*.txt' }));
    expect(textFiles).toContain('notes.txt');
    expect(textFiles).toContain('docs/deep/todo.txt');
    expect(textFiles).toContain('secret-link.txt');
    const everything = names(await call('list_files', { path: 'docs', recursive: true }));
    expect(everything).toEqual(['deep', 'deep/todo.txt', 'guide.md']);
    const all = names(await call('list_files', { recursive: true }));
    expect(all).toContain('node_modules');
    expect(all.some((name) => name.startsWith('node_modules/'))).toBe(false);
    expect(all).toContain('docs-link');
    expect(all.some((name) => name.startsWith('docs-link/') || name.startsWith('etc-link/'))).toBe(false);
    expect(names(await call('list_files', { path: 'docs', pattern: 'deep/*' }))).toEqual(['deep/todo.txt']);
  });

  it(`caps a recursive listing at ${MAX_LIST_ENTRIES} entries with the true count and a notice`, async () => {
    const tree = path.join(workspace, 'tree');
    await mkdir(path.join(tree, 'a'), { recursive: true });
    await mkdir(path.join(tree, 'b'));
    await Promise.all(
      Array.from({ length: MAX_LIST_ENTRIES + 5 }, (_, index) =>
        writeFile(path.join(tree, index % 2 === 0 ? 'a' : 'b', `f${String(index).padStart(4, '0')}.csv`), ''),
      ),
    );
    const result = await call('list_files', { path: 'tree', pattern: '**/*.csv' });
    expect(result).toMatchObject({ path: 'tree', totalEntries: MAX_LIST_ENTRIES + 5, truncated: true });
    expect(result.entries).toHaveLength(MAX_LIST_ENTRIES);
    expect(result.note).toBe(
      `showing the first ${MAX_LIST_ENTRIES} of ${MAX_LIST_ENTRIES + 5} entries; list a narrower path or use a more specific pattern`,
    );
  });

  it('refuses directories outside, links, and files', async () => {
    await expect(call('list_files', { path: '..' })).rejects.toThrow("list_files: path '..' is outside the workspace");
    await expect(call('list_files', { path: 'etc-link' })).rejects.toThrow(
      "list_files: 'etc-link' is a symbolic link; the file tools never follow links",
    );
    await expect(call('list_files', { path: 'docs-link' })).rejects.toThrow("'docs-link' is a symbolic link");
    await expect(call('list_files', { path: '/' })).rejects.toThrow('outside the workspace');
    await expect(call('list_files', { path: 'notes.txt' })).rejects.toThrow(
      "list_files: 'notes.txt' is not a directory; use read_file to read a file",
    );
  });
});

describe('search_files', () => {
  it('finds lines recursively, skipping binaries, links and node_modules', async () => {
    const result = await call('search_files', { pattern: 'TODO' });
    expect(result.matches).toEqual([
      { path: 'docs/guide.md', line: 2, text: 'See TODO list' },
      { path: 'docs/deep/todo.txt', line: 2, text: 'TODO: write tests' },
    ]);
    expect(result.truncated).toBe(false);
    expect(result.filesSkipped).toBeGreaterThanOrEqual(1);
  });

  it('never reads files outside through links', async () => {
    const result = await call('search_files', { pattern: 'SECRET' });
    expect(result.matches).toEqual([]);
    await expect(call('search_files', { pattern: 'SECRET', path: 'outside-link' })).rejects.toThrow(
      "search_files: 'outside-link' is a symbolic link; the file tools never follow links",
    );
    await expect(call('search_files', { pattern: 'SECRET', path: 'outside-link/secret.txt' })).rejects.toThrow(
      "goes through the symbolic link 'outside-link'",
    );
    await expect(call('search_files', { pattern: 'root', path: '../../etc' })).rejects.toThrow('outside the workspace');
  });

  it('searches a single file, or inside a skipped directory when asked directly', async () => {
    expect((await call('search_files', { pattern: 'o', path: 'notes.txt' })).matches).toEqual([
      { path: 'notes.txt', line: 1, text: 'one' },
      { path: 'notes.txt', line: 2, text: 'two' },
      { path: 'notes.txt', line: 4, text: 'four' },
    ]);
    expect((await call('search_files', { pattern: 'TODO', path: 'node_modules' })).matches).toEqual([
      { path: 'node_modules/lib/index.js', line: 1, text: '// TODO vendored' },
    ]);
  });

  it('accepts a leading (?i) and Python named groups', async () => {
    const result = await call('search_files', { pattern: '(?i)(?P<word>todo): (?P=word)?write', path: 'docs' });
    expect(result.matches).toEqual([{ path: 'docs/deep/todo.txt', line: 2, text: 'TODO: write tests' }]);
  });

  it('reports an invalid regular expression', async () => {
    await expect(call('search_files', { pattern: '(unclosed' })).rejects.toThrow(
      'search_files: invalid regular expression "(unclosed": Invalid regular expression: /(unclosed/: Unterminated group',
    );
  });

  it(`caps the matches at ${MAX_SEARCH_MATCHES}`, async () => {
    await mkdir(path.join(workspace, 'hits'));
    await writeFile(path.join(workspace, 'hits', 'a.txt'), 'hit\n'.repeat(150));
    await writeFile(path.join(workspace, 'hits', 'b.txt'), 'hit\n'.repeat(150));
    const result = await call('search_files', { pattern: '^hit$', path: 'hits' });
    expect(result.matches).toHaveLength(MAX_SEARCH_MATCHES);
    expect(result.truncated).toBe(true);
    expect(result.note).toBe(`stopped at ${MAX_SEARCH_MATCHES} matches; refine the pattern`);
    expect((result.matches as Array<{ path: string }>).at(-1)).toEqual({ path: 'hits/b.txt', line: 50, text: 'hit' });
  });

  it('returns exactly the cap without calling it truncated', async () => {
    await mkdir(path.join(workspace, 'exact'));
    await writeFile(path.join(workspace, 'exact', 'a.txt'), 'hit\n'.repeat(MAX_SEARCH_MATCHES));
    const result = await call('search_files', { pattern: 'hit', path: 'exact' });
    expect(result.matches).toHaveLength(MAX_SEARCH_MATCHES);
    expect(result.truncated).toBe(false);
  });
});

describe('built-in tool sets', () => {
  it('resolves files to the four file tools', () => {
    expect([...BUILTIN_TOOL_SETS.keys()]).toEqual(['files', 'files:read']);
    const resolved = resolveBuiltinTools({ names: ['files', 'files'], workspace });
    expect(resolved.map((tool) => tool.name)).toEqual(['read_file', 'write_file', 'list_files', 'search_files']);
    expect(createToolRegistry(resolved.map(registerTool)).size).toBe(4);
  });

  it('resolves files:read to the file tools that do not write, and files with it to all four once', async () => {
    const readOnly = resolveBuiltinTools({ names: ['files:read'], workspace });
    expect(readOnly.map((tool) => tool.name)).toEqual(['read_file', 'list_files', 'search_files']);
    const both = resolveBuiltinTools({ names: ['files:read', 'files'], workspace });
    expect(both.map((tool) => tool.name)).toEqual(['read_file', 'list_files', 'search_files', 'write_file']);
    expect(createToolRegistry(both.map(registerTool)).size).toBe(4);
  });

  it('refuses an unknown set with INVALID_CONFIG', () => {
    try {
      resolveBuiltinTools({ names: ['files', 'shell'], workspace });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(CodecallError);
      expect((error as CodecallError).code).toBe('INVALID_CONFIG');
      expect((error as CodecallError).message).toBe(
        `unknown built-in tool set "shell" in builtinTools; the known sets are 'files', 'files:read'`,
      );
    }
  });
});
