import { closeSync, mkdtempSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openContentAddressedFile, writeContentAddressedFile } from '../../src/sandbox/sandbox-files.js';

/**
 * The files bubblewrap mounts into the sandbox (passwd, group, the seccomp program) are named by a fingerprint of
 * their content, which is no cryptographic hash: a file found under a name is used only when it holds that content.
 */

const temporary = mkdtempSync(join(tmpdir(), 'codecall-sandbox-files-'));
afterAll(() => rmSync(temporary, { recursive: true, force: true }));

const passwd = 'root:x:0:0::/:/sbin/nologin\nsandbox:x:65534:65534::/tmp:/sbin/nologin\n';

describe('writeContentAddressedFile', () => {
  it('writes the content once, mode 0644, and returns the same file for the same content', () => {
    const directory = mkdtempSync(join(temporary, 'files-'));
    const path = writeContentAddressedFile(directory, 'passwd', passwd);
    expect(basename(path)).toMatch(/^passwd-[0-9a-f]{16}$/);
    expect(readFileSync(path, 'utf8')).toBe(passwd);
    expect(statSync(path).mode & 0o777).toBe(0o644);
    expect(writeContentAddressedFile(directory, 'passwd', Buffer.from(passwd))).toBe(path);
    expect(statSync(path).ino).toBe(statSync(writeContentAddressedFile(directory, 'passwd', passwd)).ino);
    expect(writeContentAddressedFile(directory, 'passwd', `${passwd}x`)).not.toBe(path);
  });

  it('does not use a file under its name that holds other content, and writes its own under another name', () => {
    const name = basename(writeContentAddressedFile(mkdtempSync(join(temporary, 'files-')), 'passwd', passwd));
    const directory = mkdtempSync(join(temporary, 'files-'));
    const planted = join(directory, name);
    writeFileSync(planted, 'root:x:0:0::/root:/bin/sh\n', { mode: 0o644 });
    const path = writeContentAddressedFile(directory, 'passwd', passwd);
    expect(path).not.toBe(planted);
    expect(basename(path)).toMatch(/^passwd-[0-9a-f]{16}$/);
    expect(readFileSync(path, 'utf8')).toBe(passwd);
    expect(readFileSync(planted, 'utf8')).toBe('root:x:0:0::/root:/bin/sh\n');
    expect(writeContentAddressedFile(directory, 'passwd', passwd)).toBe(path);
  });
});

/** What a reader of the descriptor gets, read from its offset as bwrap reads it, to the end. */
function readFromOffset(descriptor: number): string {
  const chunks: Buffer[] = [];
  const chunk = Buffer.alloc(64);
  for (let read = readSync(descriptor, chunk); read > 0; read = readSync(descriptor, chunk)) {
    chunks.push(Buffer.from(chunk.subarray(0, read)));
  }
  return Buffer.concat(chunks).toString('utf8');
}

describe('openContentAddressedFile', () => {
  it('opens the file found under the name, checked through the descriptor it returns, at its start', () => {
    const directory = mkdtempSync(join(temporary, 'files-'));
    const path = writeContentAddressedFile(directory, 'passwd', passwd);
    const opened = openContentAddressedFile(directory, 'passwd', passwd);
    try {
      expect(opened.path).toBe(path);
      expect(readFromOffset(opened.descriptor)).toBe(passwd);
    } finally {
      closeSync(opened.descriptor);
    }
  });

  it('writes the file when none is there, and opens it at its start', () => {
    const directory = mkdtempSync(join(temporary, 'files-'));
    const opened = openContentAddressedFile(directory, 'passwd', passwd);
    try {
      expect(basename(opened.path)).toMatch(/^passwd-[0-9a-f]{16}$/);
      expect(statSync(opened.path).mode & 0o777).toBe(0o644);
      expect(readFromOffset(opened.descriptor)).toBe(passwd);
    } finally {
      closeSync(opened.descriptor);
    }
  });

  it('opens no file under the name that holds other content, and opens its own under another name', () => {
    const name = basename(writeContentAddressedFile(mkdtempSync(join(temporary, 'files-')), 'passwd', passwd));
    for (const plant of [
      (path: string) => writeFileSync(path, 'root:x:0:0::/root:/bin/sh\n', { mode: 0o644 }),
      (path: string) => writeFileSync(path, `${passwd}more`, { mode: 0o644 }),
    ]) {
      const directory = mkdtempSync(join(temporary, 'files-'));
      const planted = join(directory, name);
      plant(planted);
      const opened = openContentAddressedFile(directory, 'passwd', passwd);
      try {
        expect(opened.path).not.toBe(planted);
        expect(readFromOffset(opened.descriptor)).toBe(passwd);
        expect(statSync(opened.path).ino).toBe(statSync(writeContentAddressedFile(directory, 'passwd', passwd)).ino);
      } finally {
        closeSync(opened.descriptor);
      }
    }
  });
});
