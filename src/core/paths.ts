import { isAbsolute, relative, sep } from 'node:path';

/** Whether `path` is `root` or lies inside it, compared as absolute paths after normalisation (no file is read). */
export function isInside(path: string, root: string): boolean {
  const rest = relative(root, path);
  return rest === '' || (rest !== '..' && !rest.startsWith(`..${sep}`) && !isAbsolute(rest));
}
