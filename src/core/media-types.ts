import { extname } from 'node:path';

/** A media type and the file name extensions it goes by (the first is the one given to new files). */
interface MediaType {
  readonly mimeType: string;
  readonly extensions: readonly string[];
  /** Other names servers use for the same type (`audio/x-wav`). */
  readonly aliases?: readonly string[];
}

/** The one table of media types and extensions: artifacts' types by name, and names of files saved by type. */
const MEDIA_TYPES: readonly MediaType[] = [
  { mimeType: 'image/png', extensions: ['.png'] },
  { mimeType: 'image/jpeg', extensions: ['.jpg', '.jpeg'] },
  { mimeType: 'image/gif', extensions: ['.gif'] },
  { mimeType: 'image/webp', extensions: ['.webp'] },
  { mimeType: 'image/svg+xml', extensions: ['.svg'] },
  { mimeType: 'image/bmp', extensions: ['.bmp'] },
  { mimeType: 'image/tiff', extensions: ['.tiff'] },
  { mimeType: 'audio/wav', extensions: ['.wav'], aliases: ['audio/x-wav', 'audio/wave'] },
  { mimeType: 'audio/mpeg', extensions: ['.mp3'], aliases: ['audio/mp3'] },
  { mimeType: 'audio/ogg', extensions: ['.ogg'] },
  { mimeType: 'audio/flac', extensions: ['.flac'] },
  { mimeType: 'audio/mp4', extensions: ['.m4a'] },
  { mimeType: 'audio/webm', extensions: ['.webm'] },
  { mimeType: 'application/pdf', extensions: ['.pdf'] },
  { mimeType: 'application/json', extensions: ['.json'] },
  { mimeType: 'application/xml', extensions: ['.xml'] },
  { mimeType: 'text/plain', extensions: ['.txt'] },
  { mimeType: 'text/markdown', extensions: ['.md'] },
  { mimeType: 'text/html', extensions: ['.html'] },
  { mimeType: 'text/csv', extensions: ['.csv'] },
];

/** The type of a file whose name is unknown to the table. */
export const UNKNOWN_MEDIA_TYPE = 'application/octet-stream';

const TYPE_BY_EXTENSION: ReadonlyMap<string, string> = new Map(
  MEDIA_TYPES.flatMap((type) => type.extensions.map((extension) => [extension, type.mimeType] as const)),
);

const EXTENSION_BY_TYPE: ReadonlyMap<string, string> = new Map(
  MEDIA_TYPES.flatMap((type) =>
    [type.mimeType, ...(type.aliases ?? [])].map((name) => [name, type.extensions[0] as string] as const),
  ),
);

/** MIME type of a file name by its extension, any letter case ({@link UNKNOWN_MEDIA_TYPE} when unknown). */
export function mimeTypeOf(name: string): string {
  return TYPE_BY_EXTENSION.get(extname(name).toLowerCase()) ?? UNKNOWN_MEDIA_TYPE;
}

/** The extension (with its dot) a file of this MIME type is given, parameters and letter case ignored; or undefined. */
export function extensionOfMimeType(mimeType: string): string | undefined {
  return EXTENSION_BY_TYPE.get(mimeType.toLowerCase().split(';')[0]?.trim() ?? '');
}
