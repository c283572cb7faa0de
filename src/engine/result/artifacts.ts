import { extname } from 'node:path';

/** Artifacts kept from one run or cell at most. */
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
