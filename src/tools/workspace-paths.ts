import { realpathSync, statSync } from 'node:fs';
import { lstat, mkdir, realpath } from 'node:fs/promises';
import * as path from 'node:path';
import { CodecallError } from '../core/errors.js';
import { isInside } from '../core/paths.js';

/** The directory the built-in file tools are confined to. */
export interface Workspace {
  /** The workspace as configured, made absolute (absolute paths under it are accepted too). */
  readonly path: string;
  /** Its real path (symbolic links resolved): every accessed path must resolve inside it. */
  readonly realPath: string;
}

/** A requested path that resolved inside the workspace. */
export interface ResolvedPath {
  /** Real path on the host (never shown to the script). */
  readonly realPath: string;
  /** The path relative to the workspace, with `/` separators, as results show it (`.` for the root). */
  readonly displayPath: string;
}

/** A path for writing: either an existing file, or a new one whose parent directories are created inside. */
export interface WritablePath extends ResolvedPath {
  /** Whether something already exists at the path. */
  readonly exists: boolean;
}

/**
 * Resolves the workspace directory once.
 *
 * @throws CodecallError('INVALID_CONFIG') when it does not exist or is not a directory.
 */
export function openWorkspace(workspace: string): Workspace {
  if (typeof workspace !== 'string' || workspace === '') {
    throw new CodecallError(
      'INVALID_CONFIG',
      'workspace must be a non-empty directory path for the built-in file tools',
      {
        workspace,
      },
    );
  }
  const absolute = path.resolve(workspace);
  let realPath: string;
  try {
    realPath = realpathSync(absolute);
  } catch (error) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `workspace '${workspace}' does not exist or cannot be read; create it or set workspace to an existing directory`,
      { workspace, code: (error as NodeJS.ErrnoException).code },
      { cause: error },
    );
  }
  if (!statSync(realPath).isDirectory()) {
    throw new CodecallError('INVALID_CONFIG', `workspace '${workspace}' is not a directory; point it at a directory`, {
      workspace,
    });
  }
  return Object.freeze({ path: absolute, realPath });
}

/**
 * A file tool's failure; the message (naming the tool and the path as the script wrote it, never a host path) is
 * what the script's ToolError shows.
 */
export class FileToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FileToolError';
  }
}

/**
 * Resolves a path that must exist, refusing any that leads outside the workspace: absolute paths elsewhere, `..`,
 * and symbolic links (of the file or of any parent directory) whose target is outside.
 */
export async function resolveExistingPath(
  workspace: Workspace,
  toolName: string,
  requested: string,
): Promise<ResolvedPath> {
  const located = await locate(workspace, toolName, requested);
  if (located.realPath === undefined) {
    throw new FileToolError(`${toolName}: no such file or directory '${requested}'`);
  }
  return { realPath: located.realPath, displayPath: located.displayPath };
}

/**
 * Resolves a path to write: an existing target is resolved like {@link resolveExistingPath}; for a new one the nearest
 * existing ancestor is resolved and checked, the missing parent directories are created, and the parent is checked
 * again (so a link swapped in meanwhile is caught).
 */
export async function resolveWritablePath(
  workspace: Workspace,
  toolName: string,
  requested: string,
): Promise<WritablePath> {
  const located = await locate(workspace, toolName, requested);
  if (located.realPath !== undefined) {
    return { realPath: located.realPath, displayPath: located.displayPath, exists: true };
  }
  const target = path.join(located.realAncestor, located.remainder);
  const parent = path.dirname(target);
  try {
    await mkdir(parent, { recursive: true });
  } catch (error) {
    throw fileSystemError(toolName, requested, error);
  }
  const realParent = await realpath(parent).catch((error: unknown) => {
    throw fileSystemError(toolName, requested, error);
  });
  if (!isInside(realParent, workspace.realPath)) throw outsideError(toolName, requested, true);
  return { realPath: path.join(realParent, path.basename(target)), displayPath: located.displayPath, exists: false };
}

/**
 * Turns a Node file-system error into a message for the script: what went wrong with the requested path, without
 * the host path Node puts in its own messages.
 */
export function fileSystemError(toolName: string, requested: string, error: unknown): FileToolError {
  if (error instanceof FileToolError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const quoted = `'${requested}'`;
  switch (code) {
    case 'ENOENT':
      return new FileToolError(`${toolName}: no such file or directory ${quoted}`);
    case 'EACCES':
    case 'EPERM':
      return new FileToolError(`${toolName}: permission denied for ${quoted}`);
    case 'EISDIR':
      return new FileToolError(`${toolName}: ${quoted} is a directory`);
    case 'ENOTDIR':
      return new FileToolError(`${toolName}: ${quoted} (or one of its parents) is not a directory`);
    case 'EEXIST':
      return new FileToolError(`${toolName}: a parent of ${quoted} exists and is not a directory`);
    case 'ELOOP':
      return new FileToolError(`${toolName}: ${quoted} is a symbolic link, or has too many levels of them`);
    case 'ENAMETOOLONG':
      return new FileToolError(`${toolName}: the path ${quoted} is too long`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new FileToolError(`${toolName}: no space left to write ${quoted}`);
    case 'EROFS':
      return new FileToolError(`${toolName}: ${quoted} is on a read-only file system`);
    case 'EMFILE':
    case 'ENFILE':
      return new FileToolError(`${toolName}: the host has too many open files; try again`);
    default:
      return new FileToolError(`${toolName}: cannot access ${quoted} (${code ?? 'unknown error'})`);
  }
}

interface Location {
  readonly displayPath: string;
  /** Real path of the target when it exists. */
  readonly realPath: string | undefined;
  /** Real path of the nearest existing ancestor (the target itself when it exists). */
  readonly realAncestor: string;
  /** Path of the target below `realAncestor` ('' when it exists). */
  readonly remainder: string;
}

async function locate(workspace: Workspace, toolName: string, requested: string): Promise<Location> {
  if (typeof requested !== 'string' || requested === '') {
    throw new FileToolError(`${toolName}: path must be a non-empty string`);
  }
  if (requested.includes('\0')) throw new FileToolError(`${toolName}: path '${requested}' contains a NUL character`);
  // Checked lexically first, so a path outside is refused without touching (or probing) anything outside.
  const candidate = path.resolve(workspace.realPath, requested);
  const lexicalRoot = [workspace.realPath, workspace.path].find((root) => isInside(candidate, root));
  if (lexicalRoot === undefined) throw outsideError(toolName, requested, false);
  const displayPath = path.relative(lexicalRoot, candidate).split(path.sep).join('/') || '.';

  let ancestor = candidate;
  for (;;) {
    let realAncestor: string | undefined;
    try {
      realAncestor = await realpath(ancestor);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw fileSystemError(toolName, requested, error);
    }
    if (realAncestor !== undefined) {
      if (!isInside(realAncestor, workspace.realPath)) throw outsideError(toolName, requested, true);
      const remainder = path.relative(ancestor, candidate);
      if (remainder === '') return { displayPath, realPath: realAncestor, realAncestor, remainder };
      await refuseDanglingLink(toolName, requested, path.join(realAncestor, remainder.split(path.sep)[0] ?? ''));
      return { displayPath, realPath: undefined, realAncestor, remainder };
    }
    const parent = path.dirname(ancestor);
    // Only reachable when the workspace itself vanished: nothing above it may be used.
    if (parent === ancestor) throw outsideError(toolName, requested, false);
    ancestor = parent;
  }
}

// The first missing component exists as an entry only if it is a link to nothing (or to a missing place outside).
async function refuseDanglingLink(toolName: string, requested: string, firstMissing: string): Promise<void> {
  const entry = await lstat(firstMissing).catch(() => undefined);
  if (entry?.isSymbolicLink()) {
    throw new FileToolError(
      `${toolName}: path '${requested}' goes through a symbolic link that points to nothing inside the workspace; ` +
        'it is outside the workspace or missing',
    );
  }
}

function outsideError(toolName: string, requested: string, throughLink: boolean): FileToolError {
  const how = throughLink ? ' (through a symbolic link)' : '';
  return new FileToolError(
    `${toolName}: path '${requested}' is outside the workspace${how}; use a path relative to the workspace root`,
  );
}
