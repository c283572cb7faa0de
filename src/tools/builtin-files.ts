import { type Dirent, constants as fsConstants, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { formatBytes, formatSeconds } from '../core/wording.js';
import { type BufferedReadResult, defineBufferedRead } from './buffered-read.js';
import { defineTool } from './define-tool.js';
import { defineEncodedText } from './encoded-text.js';
import type { FileToolsPolicyOptions } from './file-access-policy.js';
import { VERSION_CONTROL_NAMES } from './file-access-policy.js';
import type { LineSearch } from './line-search.js';
import { startLineSearch } from './line-search.js';
import { compileNamePattern, compilePathPattern, isPathPattern, NamePatternError } from './name-pattern.js';
import { countNewlines } from './newline-count.js';
import {
  closeDescriptor,
  closeDirectory,
  listDirectoryAt,
  openDirectoryAt,
  openEntryAt,
  readDescriptor,
  statEntryAt,
} from './open-beneath.js';
import { SearchBudget, SearchRefusedError } from './search-budget.js';
import type { JsonSchema, Tool, ToolContext } from './types.js';
import type { OpenDirectory, OpenEntry, Workspace } from './workspace-paths.js';
import {
  FileToolError,
  fileSystemError,
  openFileForReading,
  openFileForWriting,
  openForReading,
  openWorkspace,
  openWorkspaceDirectory,
  parseWorkspacePath,
} from './workspace-paths.js';

/** Most bytes of text `read_file` returns in one call; the result says where to continue when it is reached. */
export const MAX_READ_BYTES = 1024 * 1024;
/** Most entries `list_files` returns. */
export const MAX_LIST_ENTRIES = 1_000;
/** Most entries a recursive `list_files` looks at before it stops (a huge tree must not stall the host). */
export const MAX_LIST_VISITED_ENTRIES = 50_000;
/** Most matching lines `search_files` returns. */
export const MAX_SEARCH_MATCHES = 200;
/** Most files `search_files` reads in one call. */
export const MAX_SEARCH_FILES = 5_000;
/** Files larger than this are skipped by `search_files`. */
export const MAX_SEARCH_FILE_BYTES = 10 * 1024 * 1024;
/** Directory levels `search_files` descends below its starting directory. */
export const MAX_SEARCH_DEPTH = 64;
/** Longest line text in a search match; longer lines are cut and end with `…`. */
export const MAX_MATCH_TEXT_CHARS = 300;
/** Time one `search_files` call may take; it returns what it found so far when this runs out. */
export const SEARCH_TIMEOUT_MS = 15_000;
/** `search_files` calls of one run that work at once; the others wait their turn. */
export const MAX_CONCURRENT_SEARCHES_PER_RUN = 1;
/** Host time the `search_files` calls of one run (or session) may take together before they must wait. */
export const SEARCH_TIME_PER_RUN_MS = 60_000;
/** Search time a run gets back per unit of time passed: one second every five. */
export const SEARCH_TIME_REFILL_RATIO = 0.2;
/** Runs whose spent search time is remembered (least recently used idle ones are forgotten past it). */
export const MAX_REMEMBERED_SEARCH_RUNS = 4_096;
/** A NUL byte among a file's first this-many bytes marks it as binary (skipped by `search_files`). */
export const BINARY_SNIFF_BYTES = 8_000;
/** Directories `search_files` does not descend into (unless asked to search inside one directly). */
export const SKIPPED_DIRECTORY_NAMES: ReadonlySet<string> = new Set([...VERSION_CONTROL_NAMES, 'node_modules']);

/** The tools of the built-in set `files`, in order. */
export const FILE_TOOL_NAMES: readonly string[] = ['read_file', 'write_file', 'list_files', 'search_files'];
/** The tools of the built-in set `files:read`: the file tools that do not write. */
export const READ_ONLY_FILE_TOOL_NAMES: readonly string[] = ['read_file', 'list_files', 'search_files'];

/** Size of the reads `read_file` streams a file with, past what it read in one go (a file that grew, a large one). */
const READ_CHUNK_BYTES = 256 * 1024;
/** Largest file `read_file` reads in one buffer sized from its stats; larger files are streamed in chunks. */
const WHOLE_READ_MAX_BYTES = 4 * 1024 * 1024;
/**
 * Bytes of a file `read_file` reads synchronously, on the event loop: a read of this much from the page cache takes
 * tens of microseconds, less than one trip through the thread pool. Past it, reads go through the thread pool.
 */
const SYNC_READ_MAX_BYTES = 256 * 1024;
/** The byte that ends a line. */
const NEWLINE = 0x0a;
/** Options of {@link createFileTools}. */
export interface FileToolsOptions extends FileToolsPolicyOptions {
  /** Directory the tools are confined to; must exist. Relative paths resolve against the current directory. */
  readonly workspace: string;
  /**
   * Absolute directories the tools never reach when they lie inside the workspace: codecall passes its state folder
   * (run directories and outputs) here. A workspace inside one of them is refused.
   */
  readonly unreachableDirectories?: readonly string[];
}

/**
 * The built-in tool set `files`: `read_file`, `write_file`, `list_files` and `search_files`, confined to the
 * workspace. The workspace is opened once; every path is then opened one component at a time from it without ever
 * following a symbolic link (a link anywhere in a path is refused, whatever it points to), so no concurrent rename
 * or swap can lead a tool outside. Only regular files are read or written; `write_file` refuses version-control
 * metadata (`.git`, `.hg`, `.svn`) unless allowed, and every tool refuses the `deniedPaths` patterns.
 * `search_files` works in a worker thread per call, one call at a time per run, within a time budget per run, and
 * stops when its call is cancelled.
 *
 * @throws CodecallError('INVALID_CONFIG') when the workspace is not an existing directory, lies inside an unreachable
 * directory, or for a bad policy option.
 */
export function createFileTools(options: FileToolsOptions): Tool[] {
  const workspace = openWorkspace(options);
  const searchBudget = new SearchBudget({
    maxConcurrentPerRun: MAX_CONCURRENT_SEARCHES_PER_RUN,
    timePerRunMs: SEARCH_TIME_PER_RUN_MS,
    refillRatio: SEARCH_TIME_REFILL_RATIO,
    callTimeoutMs: SEARCH_TIMEOUT_MS,
    maxRememberedRuns: MAX_REMEMBERED_SEARCH_RUNS,
  });
  const readFile = defineTool({
    name: 'read_file',
    description:
      'Read a text file of the workspace (UTF-8; invalid bytes become U+FFFD). `offset` is the first line to ' +
      `return (1-based, default 1) and \`limit\` the most lines to return (default: all). At most ${formatBytes(MAX_READ_BYTES)} ` +
      'of text comes back per call: when that cap cuts the requested lines, `truncated` is true and `nextOffset` is ' +
      'the line to pass as `offset` to continue. `totalLines` counts the whole file. Symbolic links are not followed.',
    inputSchema: READ_FILE_INPUT,
    outputSchema: READ_FILE_OUTPUT,
    execute: (args, context) => readFileTool(workspace, args, context),
  });
  defineBufferedRead(readFile, (args, context, buffer) => readFileBuffered(workspace, args, context, buffer));
  return [
    readFile,
    defineTool({
      name: 'write_file',
      description:
        'Write text (UTF-8) to a file of the workspace, replacing it if it exists and creating missing parent ' +
        'directories. Returns the number of bytes written. Symbolic links are not followed, and version-control ' +
        'folders (.git, .hg, .svn) are not written.',
      inputSchema: WRITE_FILE_INPUT,
      outputSchema: WRITE_FILE_OUTPUT,
      execute: (args) => writeFileTool(workspace, args),
    }),
    defineTool({
      name: 'list_files',
      description:
        'List a directory of the workspace, sorted by name. `pattern` filters names with a glob such as ' +
        "'*.txt' or '*.{ts,js}'. With `recursive` (or a pattern holding '/' or '**', such as '**/*.md'), the " +
        'subdirectories are listed too and each name is the path relative to the listed directory (links are not ' +
        `followed; ${[...SKIPPED_DIRECTORY_NAMES].join('/')} are listed, not entered); a pattern without '/' then ` +
        'matches the last component at any depth. Each entry has a name, a type (file, directory, symlink or other) ' +
        `and, for files, a size in bytes. At most ${MAX_LIST_ENTRIES} entries come back; \`truncated\` says when ` +
        'there were more, and `note` why a recursive listing stopped.',
      inputSchema: LIST_FILES_INPUT,
      outputSchema: LIST_FILES_OUTPUT,
      execute: (args) => listFilesTool(workspace, args),
    }),
    defineTool({
      name: 'search_files',
      description:
        'Search the text files under a path of the workspace (recursively; a file path searches that file) for lines ' +
        'matching a regular expression (JavaScript syntax; a leading (?i) makes it case-insensitive). Binary files, ' +
        `files over ${formatBytes(MAX_SEARCH_FILE_BYTES)}, symbolic links and ${[...SKIPPED_DIRECTORY_NAMES].join('/')} ` +
        `directories are skipped. Returns at most ${MAX_SEARCH_MATCHES} matches ({path, line, text}) from at most ` +
        `${MAX_SEARCH_FILES} files within ${formatSeconds(SEARCH_TIMEOUT_MS)}; \`truncated\` says when it stopped early. ` +
        `Searches of one run take turns and together may take ${formatSeconds(SEARCH_TIME_PER_RUN_MS)} (it comes back ` +
        `at 1 second every ${formatSeconds(1000 / SEARCH_TIME_REFILL_RATIO)}).`,
      inputSchema: SEARCH_FILES_INPUT,
      outputSchema: SEARCH_FILES_OUTPUT,
      execute: (args, context) => searchFilesTool(workspace, searchBudget, args, context),
    }),
  ];
}

/**
 * The built-in tool set `files:read`: `read_file`, `list_files` and `search_files` of {@link createFileTools},
 * without `write_file`.
 *
 * @throws CodecallError('INVALID_CONFIG') when the workspace is not an existing directory.
 */
export function createReadOnlyFileTools(options: FileToolsOptions): Tool[] {
  return createFileTools(options).filter((tool) => READ_ONLY_FILE_TOOL_NAMES.includes(tool.name));
}

const READ_FILE_INPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'File path relative to the workspace root.' },
    offset: {
      type: ['integer', 'null'],
      minimum: 1,
      default: null,
      description: 'First line to return, 1-based (default 1).',
    },
    limit: {
      type: ['integer', 'null'],
      minimum: 1,
      default: null,
      description: 'Most lines to return (default: all, up to the byte cap).',
    },
  },
  required: ['path'],
  additionalProperties: false,
} as const satisfies JsonSchema;

const READ_FILE_OUTPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'The path, relative to the workspace.' },
    content: { type: 'string', description: 'The requested lines, with their line endings.' },
    totalLines: { type: 'integer', description: 'Lines in the whole file.' },
    offset: { type: 'integer', description: 'First line returned (1-based).' },
    limit: { type: ['integer', 'null'], description: 'Line limit asked for, or null.' },
    truncated: { type: 'boolean', description: 'True when the byte cap cut the requested lines.' },
    nextOffset: { type: ['integer', 'null'], description: 'Line to continue from, or null at the end of the file.' },
    note: { type: 'string', description: 'Present when something needs saying (cap reached, offset past the end).' },
  },
  required: ['path', 'content', 'totalLines', 'offset', 'limit', 'truncated', 'nextOffset'],
} as const satisfies JsonSchema;

const WRITE_FILE_INPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'File path relative to the workspace root.' },
    content: { type: 'string', description: 'The complete new text of the file.' },
  },
  required: ['path', 'content'],
  additionalProperties: false,
} as const satisfies JsonSchema;

const WRITE_FILE_OUTPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'The path, relative to the workspace.' },
    bytesWritten: { type: 'integer', description: 'Bytes written (UTF-8).' },
    created: { type: 'boolean', description: 'True when the file did not exist before.' },
  },
  required: ['path', 'bytesWritten', 'created'],
} as const satisfies JsonSchema;

const LIST_FILES_INPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', default: '.', description: 'Directory relative to the workspace root (default ".").' },
    pattern: {
      type: ['string', 'null'],
      default: null,
      description: "Glob on entry names, e.g. '*.txt', or on relative paths, e.g. '**/*.md' (default: every entry).",
    },
    recursive: { type: 'boolean', default: false, description: 'List subdirectories too (default false).' },
  },
  additionalProperties: false,
} as const satisfies JsonSchema;

const LIST_FILES_OUTPUT = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'The directory, relative to the workspace.' },
    entries: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          type: { enum: ['file', 'directory', 'symlink', 'other'] },
          size: { type: ['integer', 'null'], description: 'Bytes, for files; null otherwise.' },
        },
        required: ['name', 'type', 'size'],
      },
    },
    totalEntries: { type: 'integer', description: 'Entries matching the pattern, including those left out.' },
    truncated: { type: 'boolean', description: 'True when entries were left out.' },
    note: { type: 'string', description: 'Why a recursive listing stopped early, and what to do.' },
  },
  required: ['path', 'entries', 'totalEntries', 'truncated'],
} as const satisfies JsonSchema;

const SEARCH_FILES_INPUT = {
  type: 'object',
  properties: {
    pattern: { type: 'string', description: 'Regular expression matched against each line.' },
    path: {
      type: 'string',
      default: '.',
      description: 'Directory (searched recursively) or file, relative to the workspace root (default ".").',
    },
  },
  required: ['pattern'],
  additionalProperties: false,
} as const satisfies JsonSchema;

const SEARCH_FILES_OUTPUT = {
  type: 'object',
  properties: {
    matches: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          path: { type: 'string', description: 'File, relative to the workspace.' },
          line: { type: 'integer', description: 'Line number, 1-based.' },
          text: { type: 'string', description: 'The line (cut when very long).' },
        },
        required: ['path', 'line', 'text'],
      },
    },
    truncated: { type: 'boolean', description: 'True when the search stopped before covering everything.' },
    filesSearched: { type: 'integer' },
    filesSkipped: { type: 'integer', description: 'Binary, too large or unreadable files.' },
    note: { type: 'string', description: 'Why the search stopped early, when it did.' },
  },
  required: ['matches', 'truncated', 'filesSearched', 'filesSkipped'],
} as const satisfies JsonSchema;

/** Result of `read_file`. */
export interface ReadFileResult {
  path: string;
  content: string;
  totalLines: number;
  offset: number;
  limit: number | null;
  truncated: boolean;
  nextOffset: number | null;
  note?: string;
}

async function readFileTool(
  workspace: Workspace,
  args: Record<string, unknown>,
  context: ToolContext,
): Promise<ReadFileResult> {
  const { result, bytes } = await readFileParts(workspace, args, context, undefined);
  // Longer text stays bytes until someone reads it: the channel sends it to the script as it is.
  if (bytes.length > EAGER_DECODE_MAX_BYTES) defineEncodedText(result, 'content', bytes);
  else result.content = bytes.toString('utf8');
  return result;
}

// read_file for the tool-call server alone (see BufferedRead): a file that fits is read into the server's buffer, and
// its text goes back as the bytes read, beside a result that never refers to them. A file read without waiting (the
// usual case) is read in this call, not across a chain of promises: the one promise returned is already settled.
function readFileBuffered(
  workspace: Workspace,
  args: Record<string, unknown>,
  context: ToolContext,
  buffer: Buffer,
): Promise<BufferedReadResult> {
  let parts: FileParts | Promise<FileParts>;
  try {
    parts = readFileParts(workspace, args, context, buffer);
  } catch (error) {
    return Promise.reject(error);
  }
  return parts instanceof Promise ? parts.then(bufferedReadResult) : Promise.resolve(bufferedReadResult(parts));
}

// Not checked for valid UTF-8, as no encoded text is (see defineEncodedText).
function bufferedReadResult({ result, bytes }: FileParts): BufferedReadResult {
  if (bytes.length > EAGER_DECODE_MAX_BYTES) {
    return { value: result as unknown as Record<string, unknown>, key: 'content', bytes };
  }
  result.content = bytes.toString('utf8');
  return { value: result as unknown as Record<string, unknown>, key: 'content', bytes: undefined };
}

/** Longest content `read_file` decodes at once; longer content is decoded when read (see `defineEncodedText`). */
const EAGER_DECODE_MAX_BYTES = 4_096;

/** What {@link readFileParts} reads: the result with an empty `content`, and the bytes of that content. */
interface FileParts {
  readonly result: ReadFileResult;
  readonly bytes: Buffer;
}

/**
 * Reads the lines `args` ask for: the result with an empty `content`, and the bytes of that content (views of the
 * buffers read; of `lent` when given and the file fits in it). Synchronous unless the file is read through the thread
 * pool (see {@link scanLines}); the file is closed either way.
 */
function readFileParts(
  workspace: Workspace,
  args: Record<string, unknown>,
  context: ToolContext,
  lent: Buffer | undefined,
): FileParts | Promise<FileParts> {
  const requested = requireString('read_file', args, 'path');
  const offset = optionalPositiveInteger('read_file', args, 'offset') ?? 1;
  const limit = optionalPositiveInteger('read_file', args, 'limit');
  const target = parseWorkspacePath(workspace, 'read_file', requested);
  const { fd, stats } = openFileForReading(workspace, 'read_file', requested, target);
  let scan: LineScan | Promise<LineScan>;
  try {
    scan = scanLines(fd, stats.size, offset, limit, context, lent);
  } catch (error) {
    closeDescriptor(fd);
    throw error;
  }
  if (scan instanceof Promise) {
    return scan.finally(() => closeDescriptor(fd)).then((done) => fileParts(target.displayPath, offset, limit, done));
  }
  closeDescriptor(fd);
  return fileParts(target.displayPath, offset, limit, scan);
}

function fileParts(displayPath: string, offset: number, limit: number | undefined, scan: LineScan): FileParts {
  const kept = scan.kept.length === 1 ? (scan.kept[0] as Buffer) : Buffer.concat(scan.kept);
  // Built in one literal and filled in below (no spread): the keys keep this order in every case.
  const result: ReadFileResult = {
    path: displayPath,
    totalLines: scan.totalLines,
    offset,
    limit: limit ?? null,
    content: '',
    truncated: scan.capHit,
    nextOffset: null,
  };
  if (scan.capHit && scan.completeLines > 0) {
    const nextOffset = offset + scan.completeLines;
    result.nextOffset = nextOffset;
    result.note = `stopped at the ${formatBytes(MAX_READ_BYTES)} cap after ${scan.completeLines} lines; call read_file again with offset=${nextOffset} to continue`;
    return { result, bytes: kept.subarray(0, scan.bytesAtLastLineEnd) };
  }
  if (scan.capHit) {
    result.nextOffset = offset + 1 <= scan.totalLines ? offset + 1 : null;
    result.note = `line ${offset} is longer than the ${formatBytes(MAX_READ_BYTES)} cap and was cut`;
    return { result, bytes: withoutPartialCharacter(kept) };
  }
  const endLine = limit === undefined ? Number.POSITIVE_INFINITY : offset + limit;
  result.nextOffset = endLine <= scan.totalLines ? endLine : null;
  if (offset > scan.totalLines && scan.totalLines > 0) {
    result.note = `offset ${offset} is past the end of the file (${scan.totalLines} lines)`;
  }
  return { result, bytes: kept };
}

interface LineScan {
  /** The kept bytes, as views of the buffers read (never copied line by line). */
  readonly kept: Buffer[];
  readonly capHit: boolean;
  readonly completeLines: number;
  readonly bytesAtLastLineEnd: number;
  readonly totalLines: number;
}

/**
 * Counts the lines of a file chunk by chunk, in the order read, and keeps the bytes of the requested lines (up to the
 * byte cap) as views of the chunks.
 */
class LineScanner {
  readonly kept: Buffer[] = [];
  capHit = false;
  completeLines = 0;
  bytesAtLastLineEnd = 0;
  /** Bytes taken so far. */
  totalBytes = 0;
  readonly #offset: number;
  readonly #endLine: number;
  #keptBytes = 0;
  /** The line the next byte belongs to (1-based). */
  #line = 1;
  #lastByte = -1;

  constructor(offset: number, limit: number | undefined) {
    this.#offset = offset;
    this.#endLine = limit === undefined ? Number.POSITIVE_INFINITY : offset + limit;
  }

  /** Takes the next bytes of the file: a view of a buffer read into once, which the kept bytes may refer to. */
  add(chunk: Buffer): void {
    const length = chunk.length;
    this.totalBytes += length;
    this.#lastByte = chunk[length - 1] ?? -1;
    if (
      this.#line >= this.#offset &&
      this.#endLine === Number.POSITIVE_INFINITY &&
      this.#keptBytes + length <= MAX_READ_BYTES
    ) {
      // The usual read of a whole file: every line of the chunk is kept, so only its newlines are counted.
      this.kept.push(chunk);
      this.#keptBytes += length;
      const newlines = countNewlines(chunk);
      if (newlines > 0) {
        this.completeLines += newlines;
        this.#line += newlines;
        this.bytesAtLastLineEnd = this.#keptBytes - length + chunk.lastIndexOf(NEWLINE) + 1;
      }
      return;
    }
    let keptStart = -1;
    let keptEnd = -1;
    let start = 0;
    while (start < length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? length : newline + 1;
      if (this.#line >= this.#offset && this.#line < this.#endLine && !this.capHit) {
        if (keptStart === -1) keptStart = start;
        const room = MAX_READ_BYTES - this.#keptBytes;
        if (end - start > room) {
          this.capHit = true;
          keptEnd = start + room;
          this.#keptBytes += room;
        } else {
          keptEnd = end;
          this.#keptBytes += end - start;
          if (newline !== -1) {
            this.completeLines += 1;
            this.bytesAtLastLineEnd = this.#keptBytes;
          }
        }
      }
      if (newline === -1) break;
      this.#line += 1;
      start = end;
    }
    if (keptStart !== -1) this.kept.push(chunk.subarray(keptStart, keptEnd));
  }

  /** Lines in what was taken: a last line without a newline counts too. */
  get totalLines(): number {
    if (this.totalBytes === 0) return 0;
    return this.#lastByte === NEWLINE ? this.#line - 1 : this.#line;
  }
}

// Reads the whole file: keeps the requested lines (up to the byte cap) and counts every line. A file of up to
// WHOLE_READ_MAX_BYTES is read into one buffer sized from its stats (one read, plus none at the end when it holds
// what the stats said), and its kept lines are decoded where they lie. The reads that fit within
// SYNC_READ_MAX_BYTES are done here and now, and a file read whole by them gives its scan without a promise; the rest
// of a larger file goes through the thread pool. The first read goes into `lent` when one is given and the read fits
// in it and is synchronous; every other buffer read into is fresh. Each buffer is read into once, so the kept bytes
// are views of it, one per buffer.
function scanLines(
  fd: number,
  size: number,
  offset: number,
  limit: number | undefined,
  context: ToolContext,
  lent: Buffer | undefined,
): LineScan | Promise<LineScan> {
  const scanner = new LineScanner(offset, limit);
  // The first read asks for one byte more than the stats say, so a file that grew meanwhile is noticed.
  let readSize = size < WHOLE_READ_MAX_BYTES ? size + 1 : READ_CHUNK_BYTES;
  let unusedLent = lent;
  while (scanner.totalBytes + readSize <= SYNC_READ_MAX_BYTES) {
    let buffer: Buffer;
    if (unusedLent !== undefined && readSize <= unusedLent.length) {
      buffer = unusedLent;
      unusedLent = undefined;
    } else {
      buffer = Buffer.allocUnsafe(readSize);
    }
    if (tookLastRead(scanner, buffer, readSync(fd, buffer, 0, readSize, null), readSize, size)) return scanner;
    readSize = READ_CHUNK_BYTES;
  }
  return scanRest(fd, size, readSize, scanner, context);
}

// The reads of scanLines past SYNC_READ_MAX_BYTES, through the thread pool.
async function scanRest(
  fd: number,
  size: number,
  firstReadSize: number,
  scanner: LineScanner,
  context: ToolContext,
): Promise<LineScan> {
  let readSize = firstReadSize;
  for (;;) {
    const buffer = Buffer.allocUnsafe(readSize);
    // Only a read through the thread pool can outlast its call: checking there alone spares the quick reads the
    // making of the call's signal.
    if (context.signal.aborted) throw new FileToolError('read_file: the call was cancelled');
    if (tookLastRead(scanner, buffer, await readDescriptor(fd, buffer, 0, readSize), readSize, size)) return scanner;
    readSize = READ_CHUNK_BYTES;
  }
}

/**
 * Gives the scan the `bytesRead` bytes a read of `readSize` put in `buffer`; says whether it was the file's last read:
 * nothing came, or a regular file of `size` bytes by its stats gave less than asked once it had given them all.
 */
function tookLastRead(
  scanner: LineScanner,
  buffer: Buffer,
  bytesRead: number,
  readSize: number,
  size: number,
): boolean {
  if (bytesRead === 0) return true;
  scanner.add(buffer.subarray(0, bytesRead));
  return bytesRead < readSize && scanner.totalBytes >= size;
}

/** Result of `write_file`. */
export interface WriteFileResult {
  path: string;
  bytesWritten: number;
  created: boolean;
}

async function writeFileTool(workspace: Workspace, args: Record<string, unknown>): Promise<WriteFileResult> {
  const requested = requireString('write_file', args, 'path');
  const content = args.content;
  if (typeof content !== 'string') throw new FileToolError("write_file: argument 'content' must be string");
  const target = parseWorkspacePath(workspace, 'write_file', requested);
  const data = Buffer.from(content, 'utf8');
  const { handle, created } = await openFileForWriting(workspace, 'write_file', requested, target);
  try {
    await handle.truncate(0);
    await handle.writeFile(data);
  } catch (error) {
    throw fileSystemError('write_file', requested, error);
  } finally {
    await handle.close();
  }
  return { path: target.displayPath, bytesWritten: data.length, created };
}

/** One entry of `list_files`. */
export interface ListedEntry {
  /** The entry's name; in a recursive listing, its path relative to the listed directory (`docs/a.md`). */
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number | null;
}

/** Result of `list_files`. */
export interface ListFilesResult {
  path: string;
  entries: ListedEntry[];
  totalEntries: number;
  truncated: boolean;
  /** Why a recursive listing stopped early, and what to do. */
  note?: string;
}

function entryType(entry: Dirent): ListedEntry['type'] {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isDirectory()) return 'directory';
  return entry.isFile() ? 'file' : 'other';
}

async function listFilesTool(workspace: Workspace, args: Record<string, unknown>): Promise<ListFilesResult> {
  const requested = optionalString('list_files', args, 'path') ?? '.';
  const pattern = optionalString('list_files', args, 'pattern');
  const recursive = optionalBoolean('list_files', args, 'recursive') ?? false;
  const target = parseWorkspacePath(workspace, 'list_files', requested);
  const pathPattern = pattern !== undefined && isPathPattern(pattern);
  const matcher = pattern === undefined || pathPattern ? undefined : compileListPattern(compileNamePattern, pattern);
  const pathMatcher =
    pattern !== undefined && pathPattern ? compileListPattern(compilePathPattern, pattern) : undefined;
  let directory: OpenDirectory;
  try {
    directory = openWorkspaceDirectory(workspace, 'list_files', requested, target);
  } catch (error) {
    if (error instanceof FileToolError && error.message.endsWith('(or one of its parents) is not a directory')) {
      throw new FileToolError(`list_files: '${requested}' is not a directory; use read_file to read a file`);
    }
    throw error;
  }
  try {
    if (recursive || pathMatcher !== undefined) {
      return await listRecursively(workspace, directory, target.displayPath, (components, name) =>
        pathMatcher !== undefined ? pathMatcher.test(components) : matcher === undefined || matcher.test(name),
      );
    }
    const directoryEntries = await listDirectoryAt(directory.fd).catch((error: unknown) => {
      throw fileSystemError('list_files', requested, error);
    });
    const matching = directoryEntries
      .filter((entry) => matcher === undefined || matcher.test(entry.name))
      .filter((entry) => !workspace.policy.hides([...target.components, entry.name], entry.isDirectory()))
      .sort(byName);
    const shown = matching.slice(0, MAX_LIST_ENTRIES);
    const entries = await Promise.all(
      shown.map(async (entry): Promise<ListedEntry> => {
        const type = entryType(entry);
        if (type !== 'file') return { name: entry.name, type, size: null };
        const stats = await statEntryAt(directory.fd, entry.name).catch(() => undefined);
        return { name: entry.name, type, size: stats?.size ?? null };
      }),
    );
    return {
      path: target.displayPath,
      entries,
      totalEntries: matching.length,
      truncated: matching.length > shown.length,
    };
  } finally {
    directory.close();
  }
}

// A recursive listing walks at most MAX_LIST_VISITED_ENTRIES entries and keeps the first MAX_LIST_ENTRIES that match
// (counting the rest); past the walk cap `totalEntries` counts what it saw, not the whole tree.
async function listRecursively(
  workspace: Workspace,
  directory: OpenDirectory,
  displayPath: string,
  matches: (relativeComponents: readonly string[], name: string) => boolean,
): Promise<ListFilesResult> {
  const base = directory.components.length;
  const entries: ListedEntry[] = [];
  let visited = 0;
  let totalEntries = 0;
  let walkStopped = false;
  for await (const walked of walkEntries(workspace, directory, new AbortController().signal)) {
    visited += 1;
    if (visited > MAX_LIST_VISITED_ENTRIES) {
      walkStopped = true;
      break;
    }
    const relative = walked.components.slice(base);
    if (!matches(relative, walked.entry.name)) continue;
    totalEntries += 1;
    if (entries.length === MAX_LIST_ENTRIES) continue;
    const type = entryType(walked.entry);
    const stats =
      type === 'file' ? await statEntryAt(walked.directoryFd, walked.entry.name).catch(() => undefined) : undefined;
    entries.push({ name: relative.join('/'), type, size: type === 'file' ? (stats?.size ?? null) : null });
  }
  entries.sort(byName);
  const truncated = walkStopped || totalEntries > entries.length;
  const note = walkStopped
    ? `stopped after looking at ${MAX_LIST_VISITED_ENTRIES} entries; list a narrower path`
    : truncated
      ? `showing the first ${MAX_LIST_ENTRIES} of ${totalEntries} entries; list a narrower path or use a more specific pattern`
      : undefined;
  return { path: displayPath, entries, totalEntries, truncated, ...(note === undefined ? {} : { note }) };
}

/** One match of `search_files`. */
export interface SearchMatch {
  path: string;
  line: number;
  text: string;
}

/** Result of `search_files`. */
export interface SearchFilesResult {
  matches: SearchMatch[];
  truncated: boolean;
  filesSearched: number;
  filesSkipped: number;
  note?: string;
}

async function searchFilesTool(
  workspace: Workspace,
  budget: SearchBudget,
  args: Record<string, unknown>,
  context: ToolContext,
): Promise<SearchFilesResult> {
  const patternText = requireString('search_files', args, 'pattern', true);
  const requested = optionalString('search_files', args, 'path') ?? '.';
  const pattern = compileSearchPattern(patternText);
  const target = parseWorkspacePath(workspace, 'search_files', requested);
  const { signal } = context;
  // Everything from here is host work for the run: it waits for the run's turn and counts against its budget.
  const turn = await budget.begin(context.runId, signal).catch((error: unknown) => {
    if (error instanceof SearchRefusedError) throw new FileToolError(`search_files: ${error.message}`);
    throw error;
  });
  const result: SearchFilesResult = { matches: [], truncated: false, filesSearched: 0, filesSkipped: 0 };
  const stop = (note: string): SearchFilesResult => {
    result.truncated = true;
    result.note = note;
    return result;
  };
  const timeNote = turn.limitedByRun
    ? `this run has used its ${SEARCH_TIME_PER_RUN_MS / 1000} s of search time`
    : `stopped after ${SEARCH_TIMEOUT_MS / 1000} s`;
  let search: LineSearch | undefined;
  let start: OpenEntry | undefined;
  try {
    start = openForReading(workspace, 'search_files', requested, target);
    for await (const file of searchableFiles(workspace, start, target.components, signal)) {
      if (signal.aborted) return stop('the call was cancelled');
      if (Date.now() >= turn.deadline) return stop(`${timeNote}; narrow the path`);
      if (result.filesSearched >= MAX_SEARCH_FILES) {
        return stop(`stopped after ${MAX_SEARCH_FILES} files; narrow the path`);
      }
      const text = await readSearchableText(file);
      if (text === undefined) {
        result.filesSkipped += 1;
        continue;
      }
      result.filesSearched += 1;
      const displayPath = file.components.join('/');
      search ??= startLineSearch({ pattern, maxLineChars: MAX_MATCH_TEXT_CHARS, signal });
      const room = MAX_SEARCH_MATCHES - result.matches.length;
      const outcome = await search.search(text, room + 1, turn.deadline).catch((error: unknown) => {
        if (signal.aborted) return undefined;
        throw new FileToolError(
          `search_files: the search failed on '${displayPath}' (${error instanceof Error ? error.message : 'unknown error'})`,
        );
      });
      if (outcome === undefined) return stop('the call was cancelled');
      if (outcome.timedOut) {
        return stop(
          `${timeNote} while matching '${displayPath}'; the regular expression may backtrack too much: simplify ` +
            'it, or narrow the path',
        );
      }
      for (const match of outcome.matches.slice(0, room)) result.matches.push({ path: displayPath, ...match });
      if (outcome.matches.length > room) return stop(`stopped at ${MAX_SEARCH_MATCHES} matches; refine the pattern`);
    }
    return result;
  } finally {
    if (start?.kind === 'file') closeDescriptor(start.fd);
    else start?.directory.close();
    await search?.close();
    turn.end();
  }
}

/** Compiles a `list_files` pattern (of names or of paths); a bad one is the tool's error, naming why. */
function compileListPattern<Pattern>(compile: (pattern: string) => Pattern, pattern: string): Pattern {
  try {
    return compile(pattern);
  } catch (error) {
    if (error instanceof NamePatternError) throw new FileToolError(`list_files: invalid pattern: ${error.message}`);
    throw error;
  }
}

// Models write Python: accept its inline case-insensitive flag and named-group syntax.
function compileSearchPattern(patternText: string): RegExp {
  let source = patternText;
  let flags = '';
  if (source.startsWith('(?i)')) {
    source = source.slice(4);
    flags = 'i';
  }
  source = source.replaceAll('(?P<', '(?<').replace(/\(\?P=(\w+)\)/g, '\\k<$1>');
  try {
    return new RegExp(source, flags);
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'invalid';
    throw new FileToolError(`search_files: invalid regular expression ${JSON.stringify(patternText)}: ${reason}`);
  }
}

/** A file `search_files` will read: an entry of an open directory, or the file it was asked to search. */
type SearchableFile =
  | { readonly directoryFd: number; readonly name: string; readonly components: readonly string[] }
  | { readonly fd: number; readonly size: number; readonly components: readonly string[] };

/** A directory the walk has opened, with the number of its subdirectories still to open (relative to it). */
interface WalkedDirectory {
  readonly directory: OpenDirectory;
  unopenedChildren: number;
}

// Every file under `start` (or `start` itself when it is a file), in the order of walkEntries.
async function* searchableFiles(
  workspace: Workspace,
  start: OpenEntry,
  startComponents: readonly string[],
  signal: AbortSignal,
): AsyncGenerator<SearchableFile> {
  if (start.kind === 'file') {
    yield { fd: start.fd, size: start.stats.size, components: startComponents };
    return;
  }
  for await (const walked of walkEntries(workspace, start.directory, signal)) {
    if (walked.entry.isFile())
      yield { directoryFd: walked.directoryFd, name: walked.entry.name, components: walked.components };
  }
}

/** An entry met by {@link walkEntries}: its directory's descriptor (open while the entry is handled) and path. */
interface WalkedEntry {
  readonly directoryFd: number;
  readonly entry: Dirent;
  readonly components: readonly string[];
}

// Depth-first in name order, the entries of a directory before those of its subdirectories. Every directory is
// opened relative to its parent's descriptor, never following a link, so a directory swapped for a link during the
// walk is skipped, not followed. A directory stays open only while some of its subdirectories are still to be
// opened: at most one descriptor per level of the current path. Entries the policy hides are never yielded;
// skipped directories (node_modules, version control) are yielded but not entered.
async function* walkEntries(
  workspace: Workspace,
  start: OpenDirectory,
  signal: AbortSignal,
): AsyncGenerator<WalkedEntry> {
  const open = new Set<WalkedDirectory>();
  const release = (walked: WalkedDirectory): void => {
    open.delete(walked);
    if (walked.directory !== start) walked.directory.close();
  };
  const pending: Array<{ readonly parent: WalkedDirectory; readonly name: string }> = [];
  const maxDepth = start.components.length + MAX_SEARCH_DEPTH;
  let current: WalkedDirectory | undefined = { directory: start, unopenedChildren: 0 };
  try {
    while (current !== undefined) {
      open.add(current);
      const { fd, components } = current.directory;
      const entries = await listDirectoryAt(fd).catch(() => []);
      entries.sort(byName);
      const subdirectories: string[] = [];
      for (const entry of entries) {
        if (signal.aborted) return;
        const entryComponents = [...components, entry.name];
        if (workspace.policy.hides(entryComponents, entry.isDirectory())) continue;
        yield { directoryFd: fd, entry, components: entryComponents };
        if (entry.isDirectory() && !SKIPPED_DIRECTORY_NAMES.has(entry.name) && components.length < maxDepth) {
          subdirectories.push(entry.name);
        }
      }
      current.unopenedChildren = subdirectories.length;
      if (subdirectories.length === 0) release(current);
      for (const name of subdirectories.reverse()) pending.push({ parent: current, name });
      current = undefined;
      while (current === undefined && pending.length > 0) {
        if (signal.aborted) return;
        const { parent, name } = pending.pop() as { parent: WalkedDirectory; name: string };
        let fd: number | undefined;
        try {
          fd = openDirectoryAt(parent.directory.fd, name);
        } catch {
          fd = undefined;
        }
        parent.unopenedChildren -= 1;
        if (parent.unopenedChildren === 0) release(parent);
        if (fd !== undefined) {
          const components = [...parent.directory.components, name];
          current = { directory: { fd, components, close: () => closeDirectory(fd) }, unopenedChildren: 0 };
        }
      }
    }
  } finally {
    for (const walked of open) release(walked);
  }
}

// Undefined for files to skip: not regular, too large, binary, or unreadable.
async function readSearchableText(file: SearchableFile): Promise<string | undefined> {
  if ('fd' in file) {
    // The file asked for directly belongs to the caller, which closes it.
    return file.size > MAX_SEARCH_FILE_BYTES ? undefined : readSearchableBytes(file.fd, file.size);
  }
  let handle: FileHandle;
  try {
    handle = await openEntryAt(file.directoryFd, file.name, fsConstants.O_RDONLY);
  } catch {
    return undefined;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.size > MAX_SEARCH_FILE_BYTES) return undefined;
    return await readSearchableBytes(handle.fd, stats.size);
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

async function readSearchableBytes(fd: number, size: number): Promise<string | undefined> {
  try {
    const buffer = Buffer.allocUnsafe(size);
    let length = 0;
    while (length < buffer.length) {
      const bytesRead = await readDescriptor(fd, buffer, length, buffer.length - length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    const bytes = buffer.subarray(0, length);
    if (bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return undefined;
    return bytes.toString('utf8');
  } catch {
    return undefined;
  }
}

function requireString(toolName: string, args: Record<string, unknown>, name: string, allowEmpty = false): string {
  const value = args[name];
  if (typeof value !== 'string' || (!allowEmpty && value === '')) {
    throw new FileToolError(`${toolName}: argument '${name}' must be a non-empty string`);
  }
  return value;
}

function optionalString(toolName: string, args: Record<string, unknown>, name: string): string | undefined {
  const value = args[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new FileToolError(`${toolName}: argument '${name}' must be string`);
  return value;
}

function optionalBoolean(toolName: string, args: Record<string, unknown>, name: string): boolean | undefined {
  const value = args[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new FileToolError(`${toolName}: argument '${name}' must be boolean`);
  return value;
}

function optionalPositiveInteger(toolName: string, args: Record<string, unknown>, name: string): number | undefined {
  const value = args[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new FileToolError(`${toolName}: argument '${name}' must be an integer >= 1`);
  }
  return value;
}

// A cut at the byte cap may split a multi-byte character; drop its leading bytes rather than show U+FFFD.
function withoutPartialCharacter(bytes: Buffer): Buffer {
  let index = bytes.length - 1;
  let continuationBytes = 0;
  while (index >= 0 && continuationBytes < 3 && ((bytes[index] ?? 0) & 0xc0) === 0x80) {
    index -= 1;
    continuationBytes += 1;
  }
  if (index < 0) return bytes;
  const lead = bytes[index] ?? 0;
  const expected = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return expected > continuationBytes + 1 ? bytes.subarray(0, index) : bytes;
}

function byName(left: { name: string }, right: { name: string }): number {
  return left.name < right.name ? -1 : left.name > right.name ? 1 : 0;
}
