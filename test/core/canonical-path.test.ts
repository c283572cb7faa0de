import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalPath } from '../../src/core/canonical-path.js';

/** canonicalPath answers as Node's realpathSync does: the same path, and for a path that cannot be resolved, the same error. */

const temporary = mkdtempSync(join(tmpdir(), 'codecall-canonical-path-'));
afterAll(() => rmSync(temporary, { recursive: true, force: true }));

function errorOf(resolve: () => unknown): unknown {
  try {
    resolve();
  } catch (error) {
    const { message, code, syscall, path } = error as NodeJS.ErrnoException;
    return { message, code, syscall, path };
  }
  throw new Error('no error thrown');
}

describe('canonicalPath', () => {
  it('resolves links, relative links, chains of links and .. as realpathSync does', () => {
    const real = join(temporary, 'real');
    mkdirSync(join(real, 'inner'), { recursive: true });
    writeFileSync(join(real, 'inner', 'file'), '');
    symlinkSync(real, join(temporary, 'absolute-link'));
    symlinkSync('real/inner', join(temporary, 'relative-link'));
    symlinkSync('absolute-link', join(temporary, 'chained-link'));
    for (const path of [
      temporary,
      join(temporary, 'absolute-link', 'inner', 'file'),
      join(temporary, 'relative-link', 'file'),
      join(temporary, 'chained-link', 'inner', '..', 'inner'),
      '/',
    ]) {
      expect(canonicalPath(path)).toBe(realpathSync(path));
    }
  });

  it('fails on a missing path, a dangling link or a loop with the error realpathSync throws', () => {
    symlinkSync(join(temporary, 'nowhere'), join(temporary, 'dangling'));
    symlinkSync('loop-b', join(temporary, 'loop-a'));
    symlinkSync('loop-a', join(temporary, 'loop-b'));
    writeFileSync(join(temporary, 'plain-file'), '');
    for (const path of [
      join(temporary, 'missing', 'file'),
      join(temporary, 'dangling'),
      join(temporary, 'loop-a'),
      join(temporary, 'plain-file', 'below'),
    ]) {
      expect(errorOf(() => canonicalPath(path))).toEqual(errorOf(() => realpathSync(path)));
    }
  });
});
