import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createRunDirectory,
  detachRunDirectory,
  removeDetachedOffThread,
  removeRunDirectory,
  removeSmallTree,
  SCRIPT_FILE_NAME,
  SYNC_REMOVAL_MAX_ENTRIES,
} from '../../src/engine/launch/run-directory.js';

/**
 * A run directory is removed without following a link the script left in it: a small one at once, in the call itself
 * (a one-shot command waits for it before it exits), a larger or deeper one through the thread pool.
 */

let temporary: string;
let outside: string;
beforeEach(() => {
  temporary = mkdtempSync(join(tmpdir(), 'codecall-run-removal-'));
  outside = join(temporary, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'kept.txt'), 'kept');
});
afterEach(() => rmSync(temporary, { recursive: true, force: true }));

/** A run directory as a script leaves it: its file, its folders, and links to what lies outside. */
function usedRunDirectory(runId: string): string {
  const directory = createRunDirectory(temporary, runId);
  writeFileSync(join(directory.root, SCRIPT_FILE_NAME), 'print(1)\n');
  writeFileSync(join(directory.tmp, 'scratch.txt'), 'x');
  symlinkSync(outside, join(directory.tmp, 'to-folder'));
  symlinkSync(join(outside, 'kept.txt'), join(directory.artifacts, 'to-file'));
  symlinkSync(join(temporary, 'nowhere'), join(directory.root, 'dangling'));
  return directory.root;
}

const outsideIntact = () => readFileSync(join(outside, 'kept.txt'), 'utf8') === 'kept';

describe('removing a run directory', () => {
  it('removes a small one before the call returns, unlinking the links it holds without following them', async () => {
    const root = usedRunDirectory('small');
    const removal = removeRunDirectory(root);
    expect(existsSync(root)).toBe(false);
    await removal;
    expect(outsideIntact()).toBe(true);
  });

  it('removes one with more entries than are removed at once, links unfollowed', async () => {
    const root = usedRunDirectory('large');
    for (let index = 0; index <= SYNC_REMOVAL_MAX_ENTRIES; index += 1) {
      writeFileSync(join(root, 'tmp', `file-${index}`), 'x');
    }
    await removeRunDirectory(root);
    expect(existsSync(root)).toBe(false);
    expect(outsideIntact()).toBe(true);
  });

  it('removes one nested deeper than is removed at once', async () => {
    const root = usedRunDirectory('deep');
    let folder = join(root, 'tmp');
    for (let depth = 0; depth < 20; depth += 1) {
      folder = join(folder, 'd');
      mkdirSync(folder);
    }
    symlinkSync(outside, join(folder, 'to-folder'));
    await removeRunDirectory(root);
    expect(existsSync(root)).toBe(false);
    expect(outsideIntact()).toBe(true);
  });

  it('removes a small detached one at once, links unfollowed, and says it is gone', () => {
    const detached = detachRunDirectory(usedRunDirectory('detached'));
    expect(removeSmallTree(detached)).toBe(true);
    expect(existsSync(detached)).toBe(false);
    expect(outsideIntact()).toBe(true);
  });

  it('removes a detached one through the thread pool, links unfollowed, and says it is gone', async () => {
    const detached = detachRunDirectory(usedRunDirectory('detached-off-thread'));
    expect(await removeDetachedOffThread(detached)).toBe(true);
    expect(existsSync(detached)).toBe(false);
    expect(outsideIntact()).toBe(true);
  });

  it('leaves a detached one larger than a small one to removeRunDirectory, saying so', async () => {
    const detached = detachRunDirectory(usedRunDirectory('detached-large'));
    for (let index = 0; index <= SYNC_REMOVAL_MAX_ENTRIES; index += 1) {
      writeFileSync(join(detached, 'tmp', `file-${index}`), 'x');
    }
    expect(removeSmallTree(detached)).toBe(false);
    await removeRunDirectory(detached);
    expect(existsSync(detached)).toBe(false);
    expect(outsideIntact()).toBe(true);
  });
});
