import { chmodSync, closeSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readExactly, readOwnedFile } from '../../src/core/owned-file.js';

/** What the host's caches read back (a code cache V8 runs, facts the host trusts) is read through these. */
let folder: string;
beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), 'codecall-owned-file-'));
});
afterEach(() => rmSync(folder, { recursive: true, force: true }));

describe('readOwnedFile', () => {
  it('reads a private file of this user whole', () => {
    writeFileSync(join(folder, 'entry'), 'cached', { mode: 0o600 });
    expect(readOwnedFile(join(folder, 'entry'), 100)?.toString()).toBe('cached');
  });

  it('refuses a link, a file others may write, a folder, a missing file and one over the bound', () => {
    writeFileSync(join(folder, 'entry'), 'cached', { mode: 0o600 });
    symlinkSync(join(folder, 'entry'), join(folder, 'link'));
    writeFileSync(join(folder, 'shared'), 'cached');
    chmodSync(join(folder, 'shared'), 0o666);
    expect(readOwnedFile(join(folder, 'link'), 100)).toBeUndefined();
    expect(readOwnedFile(join(folder, 'shared'), 100)).toBeUndefined();
    expect(readOwnedFile(folder, 100)).toBeUndefined();
    expect(readOwnedFile(join(folder, 'missing'), 100)).toBeUndefined();
    expect(readOwnedFile(join(folder, 'entry'), 5)).toBeUndefined();
  });
});

describe('readExactly', () => {
  it('reads the bytes asked for, and nothing when the file ends before them', () => {
    writeFileSync(join(folder, 'bundle'), 'abcdef');
    const descriptor = openSync(join(folder, 'bundle'), 'r');
    try {
      expect(readExactly(descriptor, 6)?.toString()).toBe('abcdef');
      expect(readExactly(descriptor, 4)?.toString()).toBe('abcd');
      expect(readExactly(descriptor, 7)).toBeUndefined();
    } finally {
      closeSync(descriptor);
    }
  });
});
