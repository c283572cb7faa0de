import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CODE_CACHE_FILE,
  CODE_CACHE_KEY_BYTES,
  codeCacheFileName,
  codeCacheKey,
  fileCodeCacheKey,
  readBundle,
  readCodeCache,
  SETTLED_FILE_AGE_NS,
  STALE_CODE_CACHE_MS,
  writeCodeCache,
} from '../../src/cli/code-cache.js';
import { stateFolderName } from '../../src/core/state-folders.js';

/**
 * The command compiles its bundle with a V8 code cache kept in the default state folder's private cache folder. V8
 * runs what the cache holds, so a cache is used only when it was made for exactly this bundle and Node.js, and only
 * from a file this user alone could have written.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const bundle = join(root, 'dist/cli/command-line-bundle.cjs');
/** The code cache file of the built bundle for `command`, which the commands below use. */
const bundleCacheFile = (command = 'run') => cacheFile(`${bundle}#${command}`);
const originalTmpdir = process.env.TMPDIR;
let temporary: string;
beforeEach(() => {
  temporary = mkdtempSync(join(tmpdir(), 'codecall-code-cache-'));
  process.env.TMPDIR = temporary;
});
afterEach(() => {
  if (originalTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = originalTmpdir;
  rmSync(temporary, { recursive: true, force: true });
});

/** A bundle path for the tests of the cache files alone (nothing is read from it). */
const someBundle = '/opt/codecall/dist/cli/command-line-bundle.cjs';
const cacheFolder = () => join(temporary, stateFolderName(), 'cache');
const cacheFile = (bundleFile = someBundle) => join(cacheFolder(), codeCacheFileName(bundleFile));

describe('the code cache files', () => {
  it('gives back what was stored for the same key, and nothing for another bundle or Node.js', () => {
    const key = codeCacheKey('bundle text');
    expect(codeCacheKey('bundle text!')).not.toBe(key);
    writeCodeCache(key, Buffer.from('compiled code'), someBundle);
    expect(readCodeCache(key, someBundle)?.toString()).toBe('compiled code');
    expect(readCodeCache(codeCacheKey('bundle text!'), someBundle)).toBeUndefined();
    // The state folder is made with the mode runs expect of it, and the cache file private.
    expect(statSync(join(temporary, stateFolderName())).mode & 0o777).toBe(0o711);
    expect(statSync(cacheFile()).mode & 0o777).toBe(0o600);
  });

  it('ignores a cache file that others may write, or that is a link', () => {
    const key = codeCacheKey('bundle text');
    writeCodeCache(key, Buffer.from('compiled code'), someBundle);
    chmodSync(cacheFile(), 0o666);
    expect(readCodeCache(key, someBundle)).toBeUndefined();
    chmodSync(cacheFile(), 0o600);
    const elsewhere = join(temporary, 'elsewhere');
    writeFileSync(elsewhere, readFileSync(cacheFile()), { mode: 0o600 });
    rmSync(cacheFile());
    symlinkSync(elsewhere, cacheFile());
    expect(readCodeCache(key, someBundle)).toBeUndefined();
  });

  it('keeps one file per bundle: two installs started in turn do not replace each other’s cache', () => {
    const otherBundle = '/home/someone/project/node_modules/codecall/dist/cli/command-line-bundle.cjs';
    writeCodeCache(codeCacheKey('bundle text'), Buffer.from('compiled code'), someBundle);
    writeCodeCache(codeCacheKey('other text'), Buffer.from('other compiled code'), otherBundle);
    expect(cacheFile(otherBundle)).not.toBe(cacheFile());
    expect(readCodeCache(codeCacheKey('bundle text'), someBundle)?.toString()).toBe('compiled code');
    expect(readCodeCache(codeCacheKey('other text'), otherBundle)?.toString()).toBe('other compiled code');
  });

  it('removes other bundles’ cache files (and the single file of earlier versions) not written for a week', () => {
    const recent = '/srv/recent/dist/cli/command-line-bundle.cjs';
    const old = '/srv/old/dist/cli/command-line-bundle.cjs';
    writeCodeCache(codeCacheKey('recent'), Buffer.from('recent code'), recent);
    writeCodeCache(codeCacheKey('old'), Buffer.from('old code'), old);
    const legacy = join(cacheFolder(), CODE_CACHE_FILE);
    writeFileSync(legacy, 'a cache of an earlier version', { mode: 0o600 });
    const weekAgo = (Date.now() - STALE_CODE_CACHE_MS - 60_000) / 1000;
    for (const path of [cacheFile(old), legacy]) utimesSync(path, weekAgo, weekAgo);
    writeCodeCache(codeCacheKey('bundle text'), Buffer.from('compiled code'), someBundle);
    expect([cacheFile(), cacheFile(recent), cacheFile(old), legacy].map((path) => existsSync(path))).toEqual([
      true,
      true,
      false,
      false,
    ]);
  });
});

describe('the key of a bundle', () => {
  const identity = { dev: 2049n, ino: 1234n, size: 681_120n, mtimeNs: 1_700_000_000_000_000_000n };
  const settled = { ...identity, ctimeNs: identity.mtimeNs };
  const later = settled.ctimeNs + SETTLED_FILE_AGE_NS;

  it('comes from the file’s identity once the file has not changed for a while, and changes with any part of it', () => {
    const key = fileCodeCacheKey(settled, later);
    // The identity itself, padded to the key's length: nothing to hash, so node:crypto is not loaded on a start.
    expect(key).toHaveLength(CODE_CACHE_KEY_BYTES);
    expect(key?.trimEnd()).toBe(
      `file\0${process.version}\0${process.arch}\0${[2049, 1234, 681_120, settled.mtimeNs, settled.ctimeNs].join('\0')}`,
    );
    expect(codeCacheKey('bundle text')).toHaveLength(CODE_CACHE_KEY_BYTES);
    expect(fileCodeCacheKey(settled, later + 1_000n)).toBe(key);
    const changed = [
      { ...settled, dev: 2050n },
      { ...settled, ino: 1235n },
      { ...settled, size: 681_121n },
      { ...settled, mtimeNs: settled.mtimeNs + 1n },
      { ...settled, ctimeNs: settled.ctimeNs + 1n },
    ].map((other) => fileCodeCacheKey(other, later + 1n));
    expect(changed).not.toContain(key);
    expect(new Set(changed).size).toBe(changed.length);
  });

  it('is not taken from the identity of a file changed within the last moments (coarse timestamps)', () => {
    expect(fileCodeCacheKey(settled, later - 1n)).toBeUndefined();
  });

  it('is the hash of the text for a bundle just written, read with the text in one go', () => {
    const justWritten = join(temporary, 'bundle.cjs');
    writeFileSync(justWritten, 'module.exports = 1;\n');
    expect(readBundle(justWritten)).toMatchObject({
      source: 'module.exports = 1;\n',
      key: codeCacheKey('module.exports = 1;\n'),
    });
    expect(readBundle(join(temporary, 'missing.cjs'))).toBeUndefined();
  });

  it('gives the memory it read the bundle into, with room for a cache, and the cache is read into it', () => {
    const justWritten = join(temporary, 'bundle.cjs');
    writeFileSync(justWritten, 'module.exports = 1;\n'.repeat(1000));
    const read = readBundle(justWritten);
    if (read === undefined) throw new Error('no bundle read');
    expect(read.spare.length).toBeGreaterThanOrEqual(2 * read.source.length);
    const key = codeCacheKey(read.source);
    const compiled = Buffer.alloc(read.source.length + 100, 7);
    writeCodeCache(key, compiled, justWritten);
    const cached = readCodeCache(key, justWritten, read.spare);
    expect(cached?.equals(compiled)).toBe(true);
    expect(cached?.buffer).toBe(read.spare.buffer);
    // A cache larger than the memory given is read into a buffer of its own.
    const small = Buffer.alloc(16);
    expect(readCodeCache(key, justWritten, small)?.equals(compiled)).toBe(true);
    expect(small.equals(Buffer.alloc(16))).toBe(true);
  });
});

function codecall(args: readonly string[], environment: NodeJS.ProcessEnv) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: environment }, (error, stdout, stderr) => {
      resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Waits until the built bundle has not changed for SETTLED_FILE_AGE_NS, so its cache is keyed by its identity. */
async function bundleSettled(): Promise<void> {
  const bundleAge = BigInt(Date.now()) * 1_000_000n - statSync(bundle, { bigint: true }).ctimeNs;
  if (bundleAge < SETTLED_FILE_AGE_NS) await sleep(Number((SETTLED_FILE_AGE_NS - bundleAge) / 1_000_000n) + 100);
}

describe('codecall with its code cache', () => {
  const scriptFolder = mkdtempSync(join(tmpdir(), 'codecall-code-cache-script-'));
  afterAll(() => rmSync(scriptFolder, { recursive: true, force: true }));

  it('writes the cache on the first command, uses it on the next, and prints the same', async () => {
    // A bundle built moments ago is keyed by its text, later by its identity: both commands must see the same key.
    await bundleSettled();
    const script = join(scriptFolder, 'print.py');
    writeFileSync(script, 'print(6 * 7)\n');
    const environment = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: temporary };
    const first = await codecall(['run', '--sandbox', 'none', script], environment);
    expect(first).toMatchObject({ status: 0, stdout: '42\n', stderr: '' });
    const written = statSync(bundleCacheFile());
    const second = await codecall(['run', '--sandbox', 'none', script], environment);
    expect(second).toEqual(first);
    // Used, not made again: the file is the one the first command wrote.
    expect(statSync(bundleCacheFile()).ino).toBe(written.ino);
  }, 60_000);

  it('runs as usual from a cache made for another bundle, and replaces it', async () => {
    const script = join(scriptFolder, 'other.py');
    writeFileSync(script, 'print("other")\n');
    const environment = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: temporary };
    writeCodeCache(codeCacheKey('another bundle'), Buffer.from('not code for this bundle'), `${bundle}#run`);
    const stale = statSync(bundleCacheFile());
    const result = await codecall(['run', '--sandbox', 'none', script], environment);
    expect(result).toMatchObject({ status: 0, stdout: 'other\n', stderr: '' });
    expect(statSync(bundleCacheFile()).ino).not.toBe(stale.ino);
  }, 60_000);

  // V8 keeps in a cache the functions the process that made it compiled: a cache made by one command left another to
  // compile the rest of its path itself.
  it('keeps a cache per command: one command does not use, nor replace, the cache another made', async () => {
    await bundleSettled();
    const script = join(scriptFolder, 'stubs.py');
    writeFileSync(script, 'print("run")\n');
    const environment = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: temporary };
    expect(await codecall(['stubs', '--sandbox', 'none'], environment)).toMatchObject({ status: 0, stderr: '' });
    const stubs = statSync(bundleCacheFile('stubs'));
    expect(existsSync(bundleCacheFile())).toBe(false);
    expect(await codecall(['run', '--sandbox', 'none', script], environment)).toMatchObject({
      status: 0,
      stdout: 'run\n',
    });
    expect(statSync(bundleCacheFile('stubs')).ino).toBe(stubs.ino);
    expect(existsSync(bundleCacheFile())).toBe(true);
  }, 60_000);
});
