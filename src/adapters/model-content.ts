import type { ExecuteResult } from '../core/result.js';
import { formatResultForModel } from '../engine/result/format-result.js';
import { type ListedArtifact, type ModelImage, readArtifactsForModel } from './artifact-images.js';

/** Characters of an artifact's name shown to the model at most. */
export const MAX_ARTIFACT_NAME_CHARACTERS = 200;

/** A result as every provider format needs it: the text, the images, and whether the run failed. */
export interface ModelContent {
  /** `formatResultForModel(result)`, then the artifacts by name (which images are attached, which files are not). */
  readonly text: string;
  /** The image artifacts to attach after the text, in the order the script saved them. */
  readonly images: readonly ModelImage[];
  /** The run did not succeed (status other than `success`). */
  readonly isError: boolean;
}

/**
 * Renders a result for a model: the text the model sees, a list of the files the script saved, and the image files
 * read for attaching (see `readArtifactsForModel`). Host paths stay out of the text; the caller has them in
 * `result.artifacts`.
 */
export async function toModelContent(result: ExecuteResult): Promise<ModelContent> {
  // The files are listed below, with whether each image is attached.
  const text = formatResultForModel(result, { listArtifacts: false });
  const artifacts = result.artifacts ?? [];
  const isError = result.status !== 'success';
  if (artifacts.length === 0) return { text, images: [], isError };
  const { images, listed } = await readArtifactsForModel(artifacts);
  const lines = ['[files saved by the script]'];
  for (const image of images) lines.push(`- ${describeFile(image.name, image.mediaType, image.bytes)}: image attached`);
  for (const file of listed) lines.push(`- ${describeListed(file)}`);
  return { text: `${text}${lines.join('\n')}\n`, images, isError };
}

function describeListed(file: ListedArtifact): string {
  const described = describeFile(file.name, file.mimeType, file.bytes);
  return file.skipped === undefined ? described : `${described}: image not attached (${file.skipped})`;
}

function describeFile(name: string, mimeType: string, bytes: number): string {
  return `${displayName(name)} (${mimeType}, ${bytes.toLocaleString('en-US')} bytes)`;
}

/** The script chose the name: no control characters (no forged lines, no escape sequences), bounded length. */
function displayName(name: string): string {
  const clean = name.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
  return clean.length <= MAX_ARTIFACT_NAME_CHARACTERS ? clean : `${clean.slice(0, MAX_ARTIFACT_NAME_CHARACTERS)}…`;
}
