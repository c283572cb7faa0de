import { constants, readdirSync } from 'node:fs';
import { copyFile, lstat, mkdir, rename, unlink } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { Artifact } from '../../core/result.js';

/** Files kept from one run's artifacts directory at most. */
export const MAX_ARTIFACTS = 100;
/** Bytes kept from one run's artifacts at most. */
export const MAX_ARTIFACT_BYTES = 100 * 1024 * 1024;

const MIME_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.svg': 'image/svg+xml',
  '.pdf': 'application/pdf',
  '.json': 'application/json',
  '.csv': 'text/csv',
  '.txt': 'text/plain',
  '.md': 'text/markdown',
  '.html': 'text/html',
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
};

/** MIME type of a file name by its extension (`application/octet-stream` when unknown). */
export function mimeTypeOf(name: string): string {
  return MIME_TYPES[extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Moves the regular files of a run's artifacts directory (top level only) to `destination`, before the run directory
 * is removed. Symbolic links and special files are ignored, never followed (a script could point one at /etc/shadow).
 */
export async function collectArtifacts(artifactsDir: string, destination: string): Promise<Artifact[]> {
  let names: string[];
  try {
    // Synchronous: one getdents on a usually empty folder, on every run's critical path.
    names = readdirSync(artifactsDir);
  } catch {
    return [];
  }
  if (names.length === 0) return [];
  names.sort();
  const artifacts: Artifact[] = [];
  let totalBytes = 0;
  for (const name of names) {
    if (artifacts.length >= MAX_ARTIFACTS) break;
    const source = join(artifactsDir, name);
    const stats = await lstat(source).catch(() => undefined);
    if (stats === undefined || !stats.isFile() || totalBytes + stats.size > MAX_ARTIFACT_BYTES) continue;
    if (artifacts.length === 0) await mkdir(destination, { recursive: true, mode: 0o700 });
    const target = join(destination, name);
    try {
      await rename(source, target);
    } catch {
      try {
        await copyFile(source, target, constants.COPYFILE_EXCL);
        await unlink(source).catch(() => {});
      } catch {
        continue;
      }
    }
    totalBytes += stats.size;
    artifacts.push({ path: target, mimeType: mimeTypeOf(name), bytes: stats.size });
  }
  return artifacts;
}
