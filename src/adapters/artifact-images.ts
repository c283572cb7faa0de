import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Artifact } from '../core/result.js';

/** Largest image sent to the model (Anthropic's limit per image; base64 makes it a third larger on the wire). */
export const MAX_MODEL_IMAGE_BYTES = 5 * 1024 * 1024;
/** Images sent to the model per result at most; further ones are listed by name only. */
export const MAX_MODEL_IMAGES = 10;

/** Image types every supported provider accepts. */
export type ModelImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/** An image artifact, read and checked, ready for a provider's message format. */
export interface ModelImage {
  /** File name of the artifact (no folder). */
  readonly name: string;
  /** The type its bytes show (not the one its name suggests). */
  readonly mediaType: ModelImageMediaType;
  /** The image, base64-encoded. */
  readonly base64: string;
  readonly bytes: number;
}

/** An artifact that is not sent as an image, and why. */
export interface ListedArtifact {
  readonly name: string;
  readonly mimeType: string;
  readonly bytes: number;
  /** Why an image artifact was not sent; undefined for files that are not images. */
  readonly skipped?: string | undefined;
}

/** The artifacts of one result, split into images for the model and files named in the text. */
export interface ArtifactsForModel {
  readonly images: readonly ModelImage[];
  readonly listed: readonly ListedArtifact[];
}

const LARGER_THAN_CAP = `larger than ${MAX_MODEL_IMAGE_BYTES.toLocaleString('en-US')} bytes`;

const IMAGE_MIME_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * Reads the image artifacts of a result (PNG, JPEG, GIF, WebP; at most {@link MAX_MODEL_IMAGES}, each at most
 * {@link MAX_MODEL_IMAGE_BYTES}) and lists the others. The files were written by the script, so each is opened
 * without following links, must be a regular file within the cap, and must start with the signature of an image type
 * (a provider rejects a whole request for one broken image).
 */
export async function readArtifactsForModel(artifacts: readonly Artifact[]): Promise<ArtifactsForModel> {
  const images: ModelImage[] = [];
  const listed: ListedArtifact[] = [];
  for (const artifact of artifacts) {
    const name = basename(artifact.path);
    const entry = { name, mimeType: artifact.mimeType, bytes: artifact.bytes };
    if (!IMAGE_MIME_TYPES.has(artifact.mimeType)) {
      listed.push(entry);
      continue;
    }
    if (images.length >= MAX_MODEL_IMAGES) {
      listed.push({ ...entry, skipped: `more than ${MAX_MODEL_IMAGES} images` });
      continue;
    }
    const read = await readImageFile(artifact.path);
    if (typeof read === 'string') {
      listed.push({ ...entry, skipped: read });
      continue;
    }
    images.push({ name, mediaType: read.mediaType, base64: read.data.toString('base64'), bytes: read.data.length });
  }
  return { images, listed };
}

/** The image at `path` and its type, or why it cannot be sent. */
async function readImageFile(path: string): Promise<{ data: Buffer; mediaType: ModelImageMediaType } | string> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    // O_NONBLOCK: a FIFO in place of the file must not hang the host.
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return 'no longer available';
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return 'not a regular file';
    if (stats.size > MAX_MODEL_IMAGE_BYTES) return LARGER_THAN_CAP;
    // One byte more than the size shows a file that grew after the check.
    const buffer = Buffer.alloc(stats.size + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length !== stats.size) return 'changed while it was read';
    const data = buffer.subarray(0, length);
    const mediaType = imageTypeOf(data);
    if (mediaType === undefined) return 'not a valid PNG, JPEG, GIF or WebP image';
    return { data, mediaType };
  } catch {
    return 'could not be read';
  } finally {
    await handle.close();
  }
}

/** The image type that `data`'s signature shows, if any. */
export function imageTypeOf(data: Uint8Array): ModelImageMediaType | undefined {
  const starts = (signature: readonly number[], offset = 0) =>
    data.length >= offset + signature.length && signature.every((byte, index) => data[offset + index] === byte);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (starts([0x47, 0x49, 0x46, 0x38, 0x37, 0x61]) || starts([0x47, 0x49, 0x46, 0x38, 0x39, 0x61])) return 'image/gif';
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return 'image/webp';
  return undefined;
}
