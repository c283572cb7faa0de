import { chmodSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  fileSignature,
  hostCacheDirectory,
  MAX_HOST_CACHE_FACTS,
  readHostCache,
  trimHostCacheEntries,
  writeHostCache,
} from '../../src/core/host-cache.js';

describe('host cache', () => {
  let root: string;
  let directory: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'codecall-host-cache-'));
    directory = hostCacheDirectory(root) ?? '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('returns what was stored under the same key, nothing under another', () => {
    writeHostCache(directory, 'facts', { path: '/x', size: 1 }, { answer: 42 });
    expect(readHostCache(directory, 'facts', { path: '/x', size: 1 })).toEqual({ answer: 42 });
    expect(readHostCache(directory, 'facts', { path: '/x', size: 2 })).toBeUndefined();
    expect(readHostCache(directory, 'other', { path: '/x', size: 1 })).toBeUndefined();
  });

  it('keeps the facts of the last keys stored, so hosts that alternate keep theirs, and drops the oldest', () => {
    for (let index = 0; index <= MAX_HOST_CACHE_FACTS; index += 1) {
      writeHostCache(directory, 'facts', { folder: `/project-${index}` }, index);
    }
    expect(readHostCache(directory, 'facts', { folder: '/project-0' })).toBeUndefined();
    for (let index = 1; index <= MAX_HOST_CACHE_FACTS; index += 1) {
      expect(readHostCache(directory, 'facts', { folder: `/project-${index}` })).toBe(index);
    }
    writeHostCache(directory, 'facts', { folder: '/project-1' }, 'again');
    expect(readHostCache(directory, 'facts', { folder: '/project-1' })).toBe('again');
    expect(readHostCache(directory, 'facts', { folder: '/project-2' })).toBe(2);
  });

  it('keeps the folder private and leaves no temporary file behind', () => {
    writeHostCache(directory, 'facts', 1, 'one');
    writeHostCache(directory, 'facts', 2, 'two');
    expect(readdirSync(directory)).toEqual(['facts.json']);
    expect(readHostCache(directory, 'facts', 2)).toBe('two');
  });

  it('ignores a corrupt entry, a link in place of an entry and an entry others may write', () => {
    writeFileSync(join(directory, 'corrupt.json'), '{"version":2,"facts":[{"key":1,"value":');
    expect(readHostCache(directory, 'corrupt', 1)).toBeUndefined();

    writeHostCache(directory, 'target', 1, 'planted');
    symlinkSync(join(directory, 'target.json'), join(directory, 'linked.json'));
    expect(readHostCache(directory, 'linked', 1)).toBeUndefined();

    writeHostCache(directory, 'shared', 1, 'value');
    chmodSync(join(directory, 'shared.json'), 0o666);
    expect(readHostCache(directory, 'shared', 1)).toBeUndefined();
  });

  it('refuses a cache folder others may write into', () => {
    chmodSync(directory, 0o777);
    expect(hostCacheDirectory(root)).toBeUndefined();
    chmodSync(directory, 0o700);
    expect(hostCacheDirectory(root)).toBe(directory);
  });

  it('gives a file a signature that changes with its content, and none when it is missing', () => {
    const file = join(root, 'file');
    writeFileSync(file, 'a');
    const before = fileSignature(file);
    writeFileSync(file, 'ab');
    expect(fileSignature(file)).not.toBe(before);
    expect(fileSignature(join(root, 'missing'))).toBeUndefined();
  });

  it('trims a family of entries to the most recently written, leaving other entries alone', () => {
    for (let index = 0; index < 5; index += 1) {
      writeHostCache(directory, `family-${index}`, 'key', index);
      utimesSync(join(directory, `family-${index}.json`), index, index);
    }
    writeHostCache(directory, 'other', 'key', 'kept');
    trimHostCacheEntries(directory, 'family-', 2);
    expect(readdirSync(directory).sort()).toEqual(['family-3.json', 'family-4.json', 'other.json']);
  });
});
