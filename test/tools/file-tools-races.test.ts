import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bufferedReadOf, LENT_BUFFER_BYTES } from '../../src/tools/buffered-read.js';
import { createFileTools } from '../../src/tools/builtin-files.js';
import type { Tool } from '../../src/tools/types.js';
import { type PathSwapper, startPathSwapper } from './path-swapper.js';
import { createTestContext } from './test-context.js';

// Each test races a concurrent process that swaps a directory (or a file) of the workspace with a symbolic link to
// the outside, as fast as it can, while the tool is called again and again. The tool may succeed (it saw the real
// entry) or refuse (it saw the link), never reach the outside.
const ATTEMPTS = 1_500;

let base: string;
let workspace: string;
let outside: string;
let tools: Map<string, Tool>;
let swapper: PathSwapper | undefined;

async function call(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const tool = tools.get(name) as Tool;
  return (await tool.execute(args, createTestContext(name))) as Record<string, unknown>;
}

// read_file as the tool-call server runs it: into a buffer it lends (the same lent buffer each time, as it reuses
// them), with the content as bytes beside the result.
const lent = Buffer.alloc(LENT_BUFFER_BYTES);
async function callBuffered(args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const read = bufferedReadOf(tools.get('read_file') as Tool);
  if (read === undefined) throw new Error('read_file has no buffered read');
  const { value, key, bytes } = await read(args, createTestContext('read_file'), lent);
  return bytes === undefined ? value : { ...value, [key]: bytes.toString('utf8') };
}

/** Calls the tool ATTEMPTS times; counts successes, refusals, and the results `leaked` says reached the outside. */
async function race(
  name: string,
  args: (attempt: number) => Record<string, unknown>,
  leaked: (result: Record<string, unknown>) => boolean,
  buffered = false,
): Promise<{ succeeded: number; refused: number; leaks: number }> {
  const counts = { succeeded: 0, refused: 0, leaks: 0 };
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    try {
      const result = buffered ? await callBuffered(args(attempt)) : await call(name, args(attempt));
      if (leaked(result)) counts.leaks += 1;
      else counts.succeeded += 1;
    } catch {
      counts.refused += 1;
    }
  }
  return counts;
}

beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'codecall-races-'));
  workspace = path.join(base, 'workspace');
  outside = path.join(base, 'outside');
  await mkdir(path.join(workspace, 'dir'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(workspace, 'dir', 'file.txt'), 'inside\n');
  await writeFile(path.join(outside, 'file.txt'), 'OUTSIDE SECRET\n');
  await writeFile(path.join(outside, 'outside-only.txt'), 'OUTSIDE SECRET\n');
  await symlink(outside, path.join(workspace, 'link'));
  tools = new Map(createFileTools({ workspace }).map((tool) => [tool.name, tool]));
});

afterEach(async () => {
  await swapper?.stop();
  swapper = undefined;
  await rm(base, { recursive: true, force: true });
});

afterAll(async () => {
  await swapper?.stop();
});

describe('a directory swapped for a link to the outside while the tools run', () => {
  it('read_file never reads the outside file through the swapped middle component', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    const counts = await race(
      'read_file',
      () => ({ path: 'dir/file.txt' }),
      (result) => String(result.content).includes('OUTSIDE'),
    );
    expect(counts.leaks).toBe(0);
    expect(counts.succeeded).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  });

  it('read_file into a lent buffer never reads the outside file through the swapped middle component', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    const counts = await race(
      'read_file',
      () => ({ path: 'dir/file.txt' }),
      (result) => String(result.content).includes('OUTSIDE'),
      true,
    );
    expect(counts.leaks).toBe(0);
    expect(counts.succeeded).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  });

  it('read_file never reads the outside file when the swapped directory is deeper in the path', async () => {
    await mkdir(path.join(workspace, 'a', 'b', 'dir'), { recursive: true });
    await writeFile(path.join(workspace, 'a', 'b', 'dir', 'file.txt'), 'inside\n');
    await symlink(outside, path.join(workspace, 'a', 'b', 'link'));
    swapper = await startPathSwapper(path.join(workspace, 'a', 'b', 'dir'), path.join(workspace, 'a', 'b', 'link'));
    const counts = await race(
      'read_file',
      () => ({ path: 'a/b/dir/file.txt' }),
      (result) => String(result.content).includes('OUTSIDE'),
    );
    expect(counts.leaks).toBe(0);
    expect(counts.succeeded).toBeGreaterThan(0);
  });

  it('write_file never creates a file outside through the swapped middle component', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    const counts = await race(
      'write_file',
      (attempt) => ({ path: `dir/new-${attempt}.txt`, content: 'written by the tool' }),
      () => false,
    );
    await swapper.stop();
    expect((await readdir(outside)).sort()).toEqual(['file.txt', 'outside-only.txt']);
    expect(await readFile(path.join(outside, 'file.txt'), 'utf8')).toBe('OUTSIDE SECRET\n');
    expect(counts.succeeded).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  });

  it('write_file never creates a missing directory outside through the swapped component', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    await race(
      'write_file',
      (attempt) => ({ path: `dir/sub-${attempt}/new.txt`, content: 'x' }),
      () => false,
    );
    await swapper.stop();
    expect((await readdir(outside)).sort()).toEqual(['file.txt', 'outside-only.txt']);
  });

  it('list_files never lists the outside directory', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    const counts = await race(
      'list_files',
      () => ({ path: 'dir' }),
      (result) => (result.entries as Array<{ name: string }>).some((entry) => entry.name === 'outside-only.txt'),
    );
    expect(counts.leaks).toBe(0);
    expect(counts.succeeded).toBeGreaterThan(0);
  });

  it('search_files never searches the outside directory while walking', async () => {
    swapper = await startPathSwapper(path.join(workspace, 'dir'), path.join(workspace, 'link'));
    // Fewer attempts: each search starts a worker thread.
    let leaks = 0;
    for (let attempt = 0; attempt < 40; attempt += 1) {
      const result = await call('search_files', { pattern: 'OUTSIDE|inside' });
      const matches = result.matches as Array<{ text: string }>;
      if (matches.some((match) => match.text.includes('OUTSIDE'))) leaks += 1;
    }
    expect(leaks).toBe(0);
  });
});

describe('a file swapped for a link to an outside file while the tools run', () => {
  beforeEach(async () => {
    await symlink(path.join(outside, 'file.txt'), path.join(workspace, 'dir', 'file-link.txt'));
  });

  it.each([
    ['', false],
    [' into a lent buffer', true],
  ])('read_file%s never reads the outside file', async (_way, buffered) => {
    swapper = await startPathSwapper(
      path.join(workspace, 'dir', 'file.txt'),
      path.join(workspace, 'dir', 'file-link.txt'),
    );
    const counts = await race(
      'read_file',
      () => ({ path: 'dir/file.txt' }),
      (result) => String(result.content).includes('OUTSIDE'),
      buffered,
    );
    expect(counts.leaks).toBe(0);
    expect(counts.succeeded).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  });

  it('write_file never writes the outside file', async () => {
    swapper = await startPathSwapper(
      path.join(workspace, 'dir', 'file.txt'),
      path.join(workspace, 'dir', 'file-link.txt'),
    );
    await race(
      'write_file',
      () => ({ path: 'dir/file.txt', content: 'overwritten\n' }),
      () => false,
    );
    await swapper.stop();
    expect(await readFile(path.join(outside, 'file.txt'), 'utf8')).toBe('OUTSIDE SECRET\n');
  });
});
