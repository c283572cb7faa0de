import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { filePromises } from '../../core/file-promises.js';

/** Image types every supported model provider and MCP client accepts. */
export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/** The image types of {@link ImageMediaType}: the only artifacts sent on as images. */
export const IMAGE_MEDIA_TYPES: ReadonlySet<string> = new Set<ImageMediaType>([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
]);

/**
 * Reads a file an artifact names, at most `maxBytes`, or says why it cannot. What the script wrote is hostile, and a
 * result file may name any path: the file is opened without following a link and without blocking (a FIFO or a
 * device in its place must not hang the host), and only a regular file within the cap, unchanged while read, counts.
 */
export async function readRegularFile(path: string, maxBytes: number): Promise<Buffer | string> {
  let handle: FileHandle;
  try {
    handle = await filePromises().open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch {
    return 'no longer available';
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return 'not a regular file';
    if (stats.size > maxBytes) return `larger than ${maxBytes.toLocaleString('en-US')} bytes`;
    // One byte more than the size shows a file that grew after the check.
    const buffer = Buffer.alloc(stats.size + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length !== stats.size) return 'changed while it was read';
    return buffer.subarray(0, length);
  } catch {
    return 'could not be read';
  } finally {
    await handle.close();
  }
}

/**
 * Reads an image artifact (see {@link readRegularFile}) and the type its bytes show, or says why it cannot be sent:
 * a provider rejects a whole request for one broken image, so the name's type is never trusted.
 */
export async function readImageFile(
  path: string,
  maxBytes: number,
): Promise<{ readonly data: Buffer; readonly mediaType: ImageMediaType } | string> {
  const data = await readRegularFile(path, maxBytes);
  if (typeof data === 'string') return data;
  const mediaType = imageTypeOf(data);
  if (mediaType === undefined) return 'not a valid PNG, JPEG, GIF or WebP image';
  return { data, mediaType };
}

/** The image type that `data`'s signature shows, if any. */
export function imageTypeOf(data: Uint8Array): ImageMediaType | undefined {
  const starts = (signature: readonly number[], offset = 0) =>
    data.length >= offset + signature.length && signature.every((byte, index) => data[offset + index] === byte);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (starts([0x47, 0x49, 0x46, 0x38, 0x37, 0x61]) || starts([0x47, 0x49, 0x46, 0x38, 0x39, 0x61])) return 'image/gif';
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return 'image/webp';
  return undefined;
}
