import { randomUUID } from 'node:crypto';
import { basename, extname, join } from 'node:path';
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import { filePromises } from '../core/file-promises.js';
import { extensionOfMimeType } from '../core/media-types.js';

/** Where and for whom an upstream result's files are saved. */
export interface UpstreamResultContext {
  /** Configured server name (part of saved file names). */
  readonly server: string;
  /** Tool name as the server knows it (part of saved file names). */
  readonly tool: string;
  /**
   * The host-only folder of the run's (or cell's) artifacts, created when a file must be saved (mode 0700). Never a
   * folder the script can write: the files become artifacts of the result.
   */
  readonly artifactsDir: string;
}

/**
 * What the script receives in place of an image, an audio clip or an embedded resource: the artifact it became (the
 * file is on the host, out of the script's reach) and, when small, its bytes in base64.
 */
export interface SavedContentFile {
  readonly type: 'image' | 'audio' | 'resource';
  /** The artifact's file name, as the result lists it. */
  readonly name: string;
  readonly mimeType: string;
  /** Size of the content in bytes. */
  readonly bytes: number;
  /** The content in base64, when it is at most {@link MAX_INLINE_MEDIA_BYTES}. */
  readonly data?: string;
  /** The resource's URI (embedded resources only). */
  readonly uri?: string;
}

/** Media up to this size also reach the script as base64 `data`, so it can use them (larger ones only as artifacts). */
export const MAX_INLINE_MEDIA_BYTES = 256 * 1024;

/** Nesting depth past which structured content is returned unchanged instead of searched for media blocks. */
const MAX_STRUCTURED_SEARCH_DEPTH = 64;
/** Longest part of a tool or server name kept in a saved file's name. */
const MAX_FILE_NAME_PART_CHARACTERS = 40;

/**
 * Turns a successful `tools/call` result into the value the script receives:
 * - `structuredContent` when present (any image/audio/resource block embedded in it, as server-filesystem's
 *   `read_media_file` does, is replaced by the dict of its saved file);
 * - otherwise, when every content block is text: the texts joined with newlines, parsed when they form a JSON
 *   object or array, else the text itself; no content at all gives `None`;
 * - otherwise one non-text block alone gives its dict, and a mix gives a list in the server's order (texts as
 *   strings, each parsed when it is a JSON object or array).
 * Images, audio and embedded resources are always saved as files in the host-only `artifactsDir` (they become the
 * run's artifacts) and appear as `{ "type": "image", "name": ..., "mimeType": ..., "bytes": ..., "data"?: ... }`
 * (resources also carry their `uri`); resource links are returned as their own small dicts.
 */
export async function convertUpstreamResult(result: CallToolResult, context: UpstreamResultContext): Promise<unknown> {
  const files = new SavedFiles(context);
  const content = Array.isArray(result.content) ? result.content : [];
  if (result.structuredContent !== undefined) {
    for (const block of content) {
      if (isSavableBlock(block)) await files.save(block);
    }
    return replaceEmbeddedBlocks(result.structuredContent, files, 0);
  }
  if (content.length === 0) return null;
  if (content.every((block) => block.type === 'text')) {
    return parseJsonText(content.map((block) => (block.type === 'text' ? block.text : '')).join('\n'));
  }
  const values: unknown[] = [];
  for (const block of content) values.push(await convertBlock(block, files));
  return values.length === 1 ? values[0] : values;
}

/** Text of an error result (`isError: true`), for the ToolError the script sees. */
export function errorTextOf(result: CallToolResult): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const text = content
    .map((block) => (block.type === 'text' ? block.text : ''))
    .filter((part) => part !== '')
    .join('\n')
    .trim();
  if (text !== '') return text;
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return 'the tool reported an error without a message';
}

async function convertBlock(block: ContentBlock, files: SavedFiles): Promise<unknown> {
  switch (block.type) {
    case 'text':
      return parseJsonText(block.text);
    case 'image':
    case 'audio':
    case 'resource':
      return files.save(block);
    case 'resource_link':
      return {
        type: 'resource_link',
        uri: block.uri,
        name: block.name,
        ...(block.mimeType === undefined ? {} : { mimeType: block.mimeType }),
        ...(block.description === undefined ? {} : { description: block.description }),
      };
    default:
      return block;
  }
}

type SavableBlock = Extract<ContentBlock, { type: 'image' | 'audio' | 'resource' }>;

function isSavableBlock(block: ContentBlock): block is SavableBlock {
  return block.type === 'image' || block.type === 'audio' || block.type === 'resource';
}

// Structured content may mirror the content blocks, base64 data and all; a script can only use them as files.
async function replaceEmbeddedBlocks(value: unknown, files: SavedFiles, depth: number): Promise<unknown> {
  if (depth > MAX_STRUCTURED_SEARCH_DEPTH || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const items: unknown[] = [];
    for (const item of value) items.push(await replaceEmbeddedBlocks(item, files, depth + 1));
    return items;
  }
  const block = asEmbeddedBlock(value);
  if (block !== undefined) return files.save(block);
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[key] = await replaceEmbeddedBlocks(item, files, depth + 1);
  return copy;
}

function asEmbeddedBlock(value: object): SavableBlock | undefined {
  const candidate = value as Record<string, unknown>;
  if (
    (candidate.type === 'image' || candidate.type === 'audio') &&
    typeof candidate.data === 'string' &&
    typeof candidate.mimeType === 'string'
  ) {
    return candidate as SavableBlock;
  }
  if (candidate.type === 'resource' && typeof candidate.resource === 'object' && candidate.resource !== null) {
    const resource = candidate.resource as Record<string, unknown>;
    if (typeof resource.uri === 'string' && (typeof resource.blob === 'string' || typeof resource.text === 'string')) {
      return candidate as SavableBlock;
    }
  }
  return undefined;
}

function parseJsonText(text: string): unknown {
  const trimmed = text.trim();
  // Only objects and arrays: a tool that answers "42" or "true" in prose still means a string.
  if (!(trimmed.startsWith('{') || trimmed.startsWith('['))) return text;
  try {
    return JSON.parse(trimmed);
  } catch {
    return text;
  }
}

/** Saves media blocks of one result, once each even when they appear both in content and structured content. */
class SavedFiles {
  readonly #context: UpstreamResultContext;
  readonly #saved = new Map<string, Promise<SavedContentFile>>();
  #directoryReady: Promise<unknown> | undefined;

  constructor(context: UpstreamResultContext) {
    this.#context = context;
  }

  save(block: SavableBlock): Promise<SavedContentFile> {
    const key = identityOf(block);
    let saved = this.#saved.get(key);
    if (saved === undefined) {
      saved = this.#write(block);
      this.#saved.set(key, saved);
    }
    return saved;
  }

  async #write(block: SavableBlock): Promise<SavedContentFile> {
    this.#directoryReady ??= filePromises().mkdir(this.#context.artifactsDir, { recursive: true, mode: 0o700 });
    await this.#directoryReady;
    if (block.type === 'resource') {
      const resource = block.resource;
      const isBlob = 'blob' in resource;
      const mimeType = resource.mimeType ?? (isBlob ? 'application/octet-stream' : 'text/plain');
      const bytes = isBlob ? Buffer.from(resource.blob, 'base64') : Buffer.from(resource.text, 'utf8');
      const path = await this.#writeFile(bytes, extensionOf(mimeType, resource.uri));
      return { type: 'resource', uri: resource.uri, ...describeSaved(path, bytes, mimeType) };
    }
    const bytes = Buffer.from(block.data, 'base64');
    const path = await this.#writeFile(bytes, extensionOf(block.mimeType, undefined));
    return { type: block.type, ...describeSaved(path, bytes, block.mimeType) };
  }

  async #writeFile(bytes: Buffer, extension: string): Promise<string> {
    const { server, tool, artifactsDir } = this.#context;
    const name = `${fileNamePart(server)}-${fileNamePart(tool)}-${randomUUID().slice(0, 8)}${extension}`;
    const path = join(artifactsDir, name);
    await filePromises().writeFile(path, bytes, { flag: 'wx' });
    return path;
  }
}

function describeSaved(path: string, bytes: Buffer, mimeType: string): Omit<SavedContentFile, 'type'> {
  return {
    name: basename(path),
    mimeType,
    bytes: bytes.length,
    ...(bytes.length <= MAX_INLINE_MEDIA_BYTES ? { data: bytes.toString('base64') } : {}),
  };
}

function identityOf(block: SavableBlock): string {
  if (block.type === 'resource') {
    const resource = block.resource;
    const body = 'blob' in resource ? `blob:${resource.blob}` : `text:${resource.text}`;
    return `resource\u0000${resource.uri}\u0000${body}`;
  }
  return `${block.type}\u0000${block.mimeType}\u0000${block.data}`;
}

function extensionOf(mimeType: string, uri: string | undefined): string {
  const known = extensionOfMimeType(mimeType);
  if (known !== undefined) return known;
  if (uri !== undefined) {
    const fromUri = extname(uri.split(/[?#]/)[0] ?? '');
    if (/^\.[A-Za-z0-9]{1,10}$/.test(fromUri)) return fromUri;
  }
  return '.bin';
}

function fileNamePart(text: string): string {
  const safe = text.replace(/[^A-Za-z0-9_-]+/g, '_').slice(0, MAX_FILE_NAME_PART_CHARACTERS);
  return safe === '' ? 'tool' : safe;
}
