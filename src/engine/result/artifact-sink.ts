import { constants, readdirSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { filePromises } from '../../core/file-promises.js';
import { mimeTypeOf } from '../../core/media-types.js';
import type { Artifact } from '../../core/result.js';
import { MAX_ARTIFACT_BYTES, MAX_ARTIFACTS } from './artifacts.js';

/** Bytes of an artifact's name at most (a file name's limit on Linux). */
export const MAX_ARTIFACT_NAME_BYTES = 255;

/** What a run or cell sent as artifacts: the files kept on the host, and what was dropped (for the model). */
export interface ReceivedArtifacts {
  readonly artifacts: readonly Artifact[];
  /** Set when artifacts were refused or cut (bad name, count or size cap, incomplete): one sentence. */
  readonly note?: string | undefined;
}

/** One `$artifact` frame's parameters, as the script sent them (untrusted). */
interface ArtifactChunk {
  readonly name: string;
  readonly offset: number;
  readonly data: string;
  readonly final: boolean;
  readonly mimeType: string | undefined;
}

/** An artifact being received. */
interface OpenArtifact {
  readonly path: string;
  readonly mimeType: string;
  readonly handle: Promise<FileHandle | undefined>;
  bytes: number;
  /** A write failed: the file is removed at its end. */
  failed: boolean;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MIME_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/;
// Control characters (C0, DEL, C1) and the path separators: a name is one plain file name.
const UNSAFE_NAME_CHARACTER = /[\u0000-\u001f\u007f-\u009f/\\]/;

/** The name an artifact is saved under, or undefined when the script's name cannot be one plain file name. */
export function checkArtifactName(name: string): string | undefined {
  if (name.length === 0 || name === '.' || name === '..' || name.startsWith('.')) return undefined;
  if (UNSAFE_NAME_CHARACTER.test(name) || name.includes('..')) return undefined;
  if (Buffer.byteLength(name) > MAX_ARTIFACT_NAME_BYTES) return undefined;
  return name;
}

function chunkOf(params: unknown): ArtifactChunk | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const { name, offset, data, final, mimeType } = params as Record<string, unknown>;
  if (typeof name !== 'string' || typeof data !== 'string' || typeof offset !== 'number') return undefined;
  if (!Number.isSafeInteger(offset) || offset < 0) return undefined;
  return {
    name,
    offset,
    data,
    final: final === true,
    mimeType: typeof mimeType === 'string' && MIME_TYPE.test(mimeType) ? mimeType : undefined,
  };
}

/** `name` if unused, else `stem-2.ext`, `stem-3.ext`... (the first free one). */
function uniqueName(name: string, used: ReadonlySet<string>): string {
  if (!used.has(name)) return name;
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const extension = dot > 0 ? name.slice(dot) : '';
  for (let index = 2; ; index++) {
    const candidate = `${stem}-${index}${extension}`;
    if (!used.has(candidate) && Buffer.byteLength(candidate) <= MAX_ARTIFACT_NAME_BYTES) return candidate;
  }
}

/** Options of {@link ArtifactSink}. */
export interface ArtifactSinkOptions {
  /** The host-only folder the artifacts are written into (created on the first artifact, mode 0700). */
  readonly folder: string;
  /** Artifacts kept at most (default {@link MAX_ARTIFACTS}). */
  readonly maxArtifacts?: number | undefined;
  /** Bytes kept at most, all artifacts together (default {@link MAX_ARTIFACT_BYTES}). */
  readonly maxBytes?: number | undefined;
}

/**
 * Receives the artifacts of one run or cell from its `$artifact` frames and writes them into a folder only the host
 * writes: the script never names a host path. Names are checked (one plain file name) and made unique; the count
 * and the total size are capped; files are created exclusively and never through a link. What was dropped is said in
 * the note of {@link finish}.
 */
export class ArtifactSink {
  readonly #folder: string;
  readonly #maxArtifacts: number;
  readonly #maxBytes: number;
  readonly #open = new Map<string, OpenArtifact>();
  readonly #used = new Set<string>();
  readonly #kept: Artifact[] = [];
  #folderReady: Promise<boolean> | undefined;
  // Writes happen in frame order, one at a time.
  #queue: Promise<void> = Promise.resolve();
  #totalBytes = 0;
  #started = 0;
  #refusedNames = 0;
  #overCount = 0;
  #overSize = 0;
  #incomplete = 0;
  #closed = false;
  /** The folder was handed to a tool call: the tool may have saved files there. */
  #handedToTools = false;
  /** A frame came (well-formed or not). */
  #received = false;

  constructor(options: ArtifactSinkOptions) {
    this.#folder = options.folder;
    this.#maxArtifacts = options.maxArtifacts ?? MAX_ARTIFACTS;
    this.#maxBytes = options.maxBytes ?? MAX_ARTIFACT_BYTES;
  }

  /** Takes one `$artifact` frame's parameters; anything malformed is dropped (and counted). */
  receive(params: unknown): void {
    if (this.#closed) return;
    this.#received = true;
    const chunk = chunkOf(params);
    if (chunk === undefined || !BASE64.test(chunk.data) || chunk.data.length % 4 !== 0) {
      this.#refusedNames++;
      return;
    }
    let artifact = this.#open.get(chunk.name);
    if (chunk.offset === 0 && artifact === undefined) {
      artifact = this.#start(chunk);
      if (artifact === undefined) return;
    }
    if (artifact === undefined || artifact.bytes !== chunk.offset) {
      // A chunk of an artifact that was refused, or out of order.
      if (artifact !== undefined) this.#abandon(chunk.name, artifact);
      return;
    }
    const data = Buffer.from(chunk.data, 'base64');
    if (this.#totalBytes + data.length > this.#maxBytes) {
      this.#overSize++;
      this.#abandon(chunk.name, artifact);
      return;
    }
    this.#totalBytes += data.length;
    artifact.bytes += data.length;
    const opened = artifact;
    this.#enqueue(async () => {
      const handle = await opened.handle;
      if (handle === undefined || data.length === 0 || opened.failed) return;
      await handle.write(data).catch(() => {
        opened.failed = true;
      });
    });
    if (chunk.final) {
      this.#open.delete(chunk.name);
      this.#enqueue(async () => {
        const handle = await opened.handle;
        if (handle === undefined) return;
        await handle.close();
        if (opened.failed) {
          this.#incomplete++;
          await filePromises().unlink(opened.path);
          return;
        }
        this.#kept.push({ path: opened.path, mimeType: opened.mimeType, bytes: opened.bytes });
      });
    }
  }

  /**
   * The folder, for a tool call of this run or cell to save files in (found by {@link finish}). Only a folder handed
   * out is looked at: a run whose tools never got it has nothing there but what its frames wrote.
   */
  folderForTools(): string {
    this.#handedToTools = true;
    return this.#folder;
  }

  /**
   * No more frames, when none came and no tool got the folder (most runs and cells): nothing was written, so there is
   * nothing to wait for, and nothing was kept. Undefined otherwise, when {@link finish} ends it.
   */
  finishUnused(): ReceivedArtifacts | undefined {
    if (this.#received || this.#handedToTools) return undefined;
    this.#closed = true;
    return { artifacts: [] };
  }

  /** No more frames: waits for the writes, removes what is incomplete, and says what was kept and dropped. */
  async finish(): Promise<ReceivedArtifacts> {
    this.#closed = true;
    for (const [name, artifact] of this.#open) {
      this.#incomplete++;
      this.#abandon(name, artifact);
    }
    await this.#queue;
    await this.#addToolFiles();
    const dropped: string[] = [];
    if (this.#refusedNames > 0) dropped.push(`${this.#refusedNames} malformed frame(s) or unusable name(s)`);
    if (this.#overCount > 0) dropped.push(`${this.#overCount} over the limit of ${this.#maxArtifacts} artifacts`);
    if (this.#overSize > 0) dropped.push(`${this.#overSize} over the limit of ${this.#maxBytes} bytes in all`);
    if (this.#incomplete > 0) dropped.push(`${this.#incomplete} incomplete`);
    const note = dropped.length > 0 ? `artifacts dropped: ${dropped.join('; ')}` : undefined;
    return { artifacts: [...this.#kept], ...(note !== undefined ? { note } : {}) };
  }

  /**
   * Files the run's tools saved in the folder (an upstream MCP server's image): the folder is the host's own, never
   * the script's, so listing it follows nothing the script controls.
   */
  async #addToolFiles(): Promise<void> {
    if (!this.#handedToTools) return;
    let names: string[];
    try {
      // Synchronous: one lookup of a folder that often does not exist (the tools saved nothing).
      names = readdirSync(this.#folder);
    } catch {
      return;
    }
    const known = new Set(this.#kept.map((artifact) => artifact.path));
    for (const name of names.sort()) {
      const path = join(this.#folder, name);
      if (known.has(path) || this.#kept.length >= this.#maxArtifacts) continue;
      const stats = await filePromises()
        .lstat(path)
        .catch(() => undefined);
      if (stats === undefined || !stats.isFile()) continue;
      this.#kept.push({ path, mimeType: mimeTypeOf(name), bytes: stats.size });
    }
  }

  #start(chunk: ArtifactChunk): OpenArtifact | undefined {
    const checked = checkArtifactName(chunk.name);
    if (checked === undefined) {
      this.#refusedNames++;
      return undefined;
    }
    if (this.#started >= this.#maxArtifacts) {
      this.#overCount++;
      return undefined;
    }
    this.#started++;
    const name = uniqueName(checked, this.#used);
    this.#used.add(name);
    const path = join(this.#folder, name);
    this.#folderReady ??= filePromises()
      .mkdir(this.#folder, { recursive: true, mode: 0o700 })
      .then(
        () => true,
        () => false,
      );
    const folderReady = this.#folderReady;
    const handle = (async () => {
      if (!(await folderReady)) return undefined;
      // Created here, never an existing file and never through a link.
      const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
      return filePromises()
        .open(path, flags, 0o600)
        .catch(() => undefined);
    })();
    const artifact: OpenArtifact = {
      path,
      mimeType: chunk.mimeType ?? mimeTypeOf(name),
      handle,
      bytes: 0,
      failed: false,
    };
    this.#open.set(chunk.name, artifact);
    return artifact;
  }

  /** Drops an artifact being received: its file is closed and removed. */
  #abandon(name: string, artifact: OpenArtifact): void {
    this.#open.delete(name);
    this.#enqueue(async () => {
      const handle = await artifact.handle;
      if (handle === undefined) return;
      await handle.close();
      await filePromises().unlink(artifact.path);
    });
  }

  #enqueue(step: () => Promise<void>): void {
    this.#queue = this.#queue.then(step).catch(() => {});
  }
}
