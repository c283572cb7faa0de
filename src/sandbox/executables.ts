import { accessSync, constants } from 'node:fs';

/** The first of `candidates` (paths) that this process may execute, or undefined when there is none. */
export function firstExecutable(candidates: readonly string[]): string | undefined {
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Next candidate.
    }
  }
  return undefined;
}
