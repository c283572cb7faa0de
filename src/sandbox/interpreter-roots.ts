import { isInside } from '../core/paths.js';
import { systemRoots } from './bubblewrap-arguments.js';
import type { PythonInterpreter } from './interpreter.js';

/** Paths with every path inside another one of the list removed, sorted. */
export function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)].sort();
  return unique.filter((path) => !unique.some((other) => other !== path && isInside(path, other)));
}

/**
 * What a script needs of its interpreter outside the system directories (`/usr`, `/lib`, ...): the executable, the
 * prefix, the standard library and site directories, outermost only.
 */
export function interpreterRoots(interpreter: PythonInterpreter): string[] {
  const candidates = [
    interpreter.executable,
    interpreter.basePrefix,
    ...interpreter.stdlibPaths,
    ...interpreter.sitePaths,
  ];
  return outermost(candidates.filter((path) => !systemRoots().some((root) => isInside(path, root))));
}
