import { lstatSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** This user's folder of codecall working files, by name: `codecall-<uid>`. */
export function stateFolderName(): string {
  return `codecall-${process.getuid?.() ?? 'user'}`;
}

/** Default root of codecall's working files: `<tmpdir>/codecall-<uid>`. */
export function defaultStateRoot(): string {
  return join(tmpdir(), stateFolderName());
}

/**
 * Creates a folder (and missing parents) with `mode` and says whether it is a real directory owned by this user: a
 * shared /tmp lets anyone create the path first, as a link or a folder of their own.
 */
export function makeOwnedDirectory(path: string, mode: number): boolean {
  mkdirSync(path, { recursive: true, mode });
  const stats = lstatSync(path);
  const uid = process.getuid?.();
  return stats.isDirectory() && (uid === undefined || stats.uid === uid);
}
