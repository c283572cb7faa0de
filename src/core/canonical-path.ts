import { realpathSync } from 'node:fs';

/**
 * The canonical path of `path`, as `realpathSync` gives it, from one realpath(3) call: Node's `realpathSync` resolves
 * in JavaScript, an lstat and some string work per component (a quarter of a millisecond a path, several paths before
 * a one-shot run's launch). When that call fails, the answer is `realpathSync`'s own, so a path that cannot be
 * resolved fails with the error it always did.
 */
export function canonicalPath(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return realpathSync(path);
  }
}
