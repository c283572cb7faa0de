import { basename } from 'node:path';
import type { Artifact } from '../core/result.js';
import { IMAGE_MEDIA_TYPES, type ImageMediaType, readImageFile } from '../engine/result/artifact-files.js';

/** Largest image sent to the model (Anthropic's limit per image; base64 makes it a third larger on the wire). */
export const MAX_MODEL_IMAGE_BYTES = 5 * 1024 * 1024;
/** Images sent to the model per result at most; further ones are listed by name only. */
export const MAX_MODEL_IMAGES = 10;

/** Image types every supported provider accepts. */
export type ModelImageMediaType = ImageMediaType;

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
    if (!IMAGE_MEDIA_TYPES.has(artifact.mimeType)) {
      listed.push(entry);
      continue;
    }
    if (images.length >= MAX_MODEL_IMAGES) {
      listed.push({ ...entry, skipped: `more than ${MAX_MODEL_IMAGES} images` });
      continue;
    }
    const read = await readImageFile(artifact.path, MAX_MODEL_IMAGE_BYTES);
    if (typeof read === 'string') {
      listed.push({ ...entry, skipped: read });
      continue;
    }
    images.push({ name, mediaType: read.mediaType, base64: read.data.toString('base64'), bytes: read.data.length });
  }
  return { images, listed };
}
