import type { Stats } from 'node:fs';
import { constants as fsConstants, fstatSync, realpathSync, statSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { CodecallError } from '../core/errors.js';
import { isInside } from '../core/paths.js';
import type { FileAccess, FileAccessPolicy, FileToolsPolicyOptions } from './file-access-policy.js';
import { createFileAccessPolicy } from './file-access-policy.js';
import {
  closeDescriptor,
  closeDirectory,
  descriptorPathsWork,
  makeDirectoryAtSync,
  openDirectoryAt,
  openDirectorySync,
  openEntryAt,
  openEntryAtSync,
  statEntryAtSync,
} from './open-beneath.js';

/** Longest path the file tools accept (PATH_MAX); longer ones are refused before anything is checked. */
export const MAX_PATH_CHARS = 4_096;
/** Times `write_file` retries when a file it is creating appears or vanishes under it. */
const MAX_CREATE_ATTEMPTS = 4;

/**
 * The directory the built-in file tools are confined to, opened once: every access walks from this descriptor one
 * component at a time and never follows a link, so no path check can be raced.
 */
export interface Workspace {
  /** The workspace as configured, made absolute (absolute paths under it are accepted too). */
  readonly path: string;
  /** Its real path when it was opened (absolute paths under it are accepted too). */
  readonly realPath: string;
  /** Descriptor of the workspace directory, open for the life of the tools. */
  readonly fd: number;
  /** What the tools must leave alone. */
  readonly policy: FileAccessPolicy;
}

/** Options of {@link openWorkspace}. */
export interface OpenWorkspaceOptions extends FileToolsPolicyOptions {
  /** The workspace directory; relative paths resolve against the current directory. */
  readonly workspace: string;
  /**
   * Absolute directories the tools never reach when they lie inside the workspace, such as codecall's state folder
   * (run directories, outputs). A workspace inside one of them is refused.
   */
  readonly unreachableDirectories?: readonly string[];
}

/** A requested path, checked lexically: its components below the workspace root. */
export interface WorkspacePath {
  /** Components relative to the workspace root (none for the root itself); never `.`, `..` or empty. */
  readonly components: readonly string[];
  /** The path relative to the workspace, with `/` separators, as results show it (`.` for the root). */
  readonly displayPath: string;
}

/** A directory of the workspace, opened without following links. */
export interface OpenDirectory {
  /** Its descriptor (the workspace's own for the root). */
  readonly fd: number;
  /** Its components below the workspace root. */
  readonly components: readonly string[];
  /** Closes it (the workspace root stays open). */
  close(): void;
}

// The workspace descriptor lives as long as the tools that use it: closed when they are garbage-collected.
const workspaceDescriptors = new FinalizationRegistry<number>(closeDirectory);

/**
 * Opens the workspace directory once.
 *
 * @throws CodecallError('INVALID_CONFIG') when it does not exist, is not a directory, lies inside an unreachable
 * directory, when /proc/self/fd is not available, or for a bad policy option.
 */
export function openWorkspace(options: OpenWorkspaceOptions): Workspace {
  const { workspace } = options;
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
  const unreachable = (options.unreachableDirectories ?? []).flatMap((directory) => {
    const components = componentsInside(realPath, directory);
    if (components?.length === 0) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `workspace '${workspace}' is inside codecall's state folder '${directory}', where runs keep their files; ` +
          'choose a workspace outside it, or set stateDir to a folder outside the workspace',
        { workspace, stateDir: directory },
      );
    }
    return components === undefined ? [] : [components];
  });
  const policy = createFileAccessPolicy({ ...options, unreachable });
  let fd: number;
  try {
    fd = openDirectorySync(realPath);
  } catch (error) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `workspace '${workspace}' cannot be opened (${(error as NodeJS.ErrnoException).code ?? 'unknown error'})`,
      { workspace },
      { cause: error },
    );
  }
  if (!descriptorPathsWork(fd)) {
    closeDirectory(fd);
    throw new CodecallError(
      'INVALID_CONFIG',
      'the built-in file tools need /proc/self/fd (Linux with /proc mounted) to open paths without following links',
      { workspace },
    );
  }
  const opened: Workspace = Object.freeze({ path: absolute, realPath, fd, policy });
  workspaceDescriptors.register(opened, fd);
  return opened;
}

// Components of `directory` (its real path, where it exists) below `root`: [] when `root` is inside it or is it,
// undefined when it is outside.
function componentsInside(root: string, directory: string): string[] | undefined {
  const real = realPathOfNearestAncestor(path.resolve(directory));
  if (isInside(root, real)) return [];
  if (!isInside(real, root)) return undefined;
  return path.relative(root, real).split(path.sep);
}

// The state folder may not exist yet: resolve links in the part that does.
function realPathOfNearestAncestor(absolute: string): string {
  let existing = absolute;
  const missing: string[] = [];
  for (;;) {
    try {
      return path.join(realpathSync(existing), ...missing.reverse());
    } catch {
      const parent = path.dirname(existing);
      if (parent === existing) return absolute;
      missing.push(path.basename(existing));
      existing = parent;
    }
  }
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
 * Checks a requested path lexically: a non-empty string, relative to the workspace or absolute inside it, with `..`
 * resolved as text (links are never followed, so text is what the path means).
 */
export function parseWorkspacePath(workspace: Workspace, toolName: string, requested: string): WorkspacePath {
  if (typeof requested !== 'string' || requested === '') {
    throw new FileToolError(`${toolName}: path must be a non-empty string`);
  }
  if (requested.length > MAX_PATH_CHARS) {
    throw new FileToolError(`${toolName}: the path is longer than ${MAX_PATH_CHARS} characters`);
  }
  if (requested.includes('\0')) throw new FileToolError(`${toolName}: path '${requested}' contains a NUL character`);
  const plain = plainRelativeComponents(requested);
  if (plain !== undefined) return { components: plain, displayPath: requested };
  const candidate = path.resolve(workspace.realPath, requested);
  const root = [workspace.realPath, workspace.path].find((directory) => isInside(candidate, directory));
  if (root === undefined) throw outsideError(toolName, requested);
  const relative = path.relative(root, candidate);
  const components = relative === '' ? [] : relative.split(path.sep);
  return { components, displayPath: components.join('/') || '.' };
}

// The components of a relative path that has no empty, `.` or `..` component (the common `src/main.py`), which the
// lexical resolution above would leave as they are; undefined for any other path. Spares every call its
// path.resolve and path.relative.
function plainRelativeComponents(requested: string): string[] | undefined {
  if (requested.charCodeAt(0) === SLASH) return undefined;
  const components = requested.split('/');
  for (const component of components) {
    if (component === '' || component === '.' || component === '..') return undefined;
  }
  return components;
}

const SLASH = 0x2f;

/** Throws the policy's refusal of a path, if any. */
export function checkAccess(
  workspace: Workspace,
  toolName: string,
  requested: string,
  target: WorkspacePath,
  options: { readonly isDirectory: boolean; readonly access: FileAccess },
): void {
  const refusal = workspace.policy.refusal(target.components, options.isDirectory, options.access);
  if (refusal !== undefined) throw new FileToolError(`${toolName}: '${requested}' ${refusal}`);
}

/**
 * Opens the first `count` directories of `components` one by one from the workspace root, never following a link;
 * with `create`, missing ones are created (each inside the directory just opened). Returns the descriptor of the last
 * one opened (the workspace's own for none), to close with {@link closeBelowRoot}. Synchronous: each step is one
 * system call in an open directory, cheaper than a trip through the thread pool.
 */
function openDirectories(
  workspace: Workspace,
  toolName: string,
  requested: string,
  components: readonly string[],
  count: number,
  create: boolean,
  finalIsDirectory: boolean,
): number {
  let fd = workspace.fd;
  try {
    for (let index = 0; index < count; index += 1) {
      const name = components[index] as string;
      // Whether this component is the last of the path asked for (not only of the directories opened).
      const isLast = index === count - 1 && finalIsDirectory;
      let next: number;
      try {
        next = openDirectoryAt(fd, name);
      } catch (error) {
        if (!create || (error as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw directoryError(toolName, requested, fd, name, isLast, error);
        }
        try {
          makeDirectoryAtSync(fd, name);
        } catch (mkdirError) {
          // Created meanwhile by someone else: open whatever is there now, without following it.
          if ((mkdirError as NodeJS.ErrnoException).code !== 'EEXIST') {
            throw fileSystemError(toolName, requested, mkdirError);
          }
        }
        try {
          next = openDirectoryAt(fd, name);
        } catch (openError) {
          throw directoryError(toolName, requested, fd, name, isLast, openError);
        }
      }
      closeBelowRoot(workspace, fd);
      fd = next;
    }
  } catch (error) {
    closeBelowRoot(workspace, fd);
    throw error;
  }
  return fd;
}

/** Closes a directory descriptor {@link openDirectories} gave, unless it is the workspace's own. */
function closeBelowRoot(workspace: Workspace, fd: number): void {
  if (fd !== workspace.fd) closeDirectory(fd);
}

function directoryHandle(workspace: Workspace, fd: number, components: readonly string[]): OpenDirectory {
  return {
    fd,
    components,
    close: () => closeBelowRoot(workspace, fd),
  };
}

// O_DIRECTORY | O_NOFOLLOW says ENOTDIR for a link as for a file: look at the entry to say which it was.
function directoryError(
  toolName: string,
  requested: string,
  parentFd: number,
  name: string,
  isLast: boolean,
  error: unknown,
): FileToolError {
  if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') {
    if (statEntryAtSync(parentFd, name)?.isSymbolicLink() === true) return linkError(toolName, requested, name, isLast);
  }
  return fileSystemError(toolName, requested, error);
}

/** Opens the directory at `target` (the root for no components). */
export function openWorkspaceDirectory(
  workspace: Workspace,
  toolName: string,
  requested: string,
  target: WorkspacePath,
): OpenDirectory {
  checkAccess(workspace, toolName, requested, target, { isDirectory: true, access: 'read' });
  const { components } = target;
  const fd = openDirectories(workspace, toolName, requested, components, components.length, false, true);
  return directoryHandle(workspace, fd, components);
}

/** A regular file opened for reading: its descriptor (close it with `closeDescriptor`) and its stats, taken on it. */
export interface OpenFile {
  readonly fd: number;
  readonly stats: Stats;
}

/** An opened entry: a regular file, or a directory. */
export type OpenEntry =
  | ({ readonly kind: 'file' } & OpenFile)
  | { readonly kind: 'directory'; readonly directory: OpenDirectory };

/**
 * Opens what is at `target` for reading, without following a link at any component: a regular file (as a
 * descriptor, with its stats taken on the open descriptor) or a directory. Anything else (link, FIFO, device, socket)
 * is refused. Synchronous, like {@link openDirectories}: the lookups in open directories and the fstat cost
 * microseconds each, less than a trip through the thread pool or a promise per step.
 */
export function openForReading(
  workspace: Workspace,
  toolName: string,
  requested: string,
  target: WorkspacePath,
): OpenEntry {
  checkAccess(workspace, toolName, requested, target, { isDirectory: false, access: 'read' });
  const { components } = target;
  const parents = components.length - 1;
  if (parents < 0) return { kind: 'directory', directory: directoryHandle(workspace, workspace.fd, []) };
  const name = components[parents] as string;
  const parentFd = openDirectories(workspace, toolName, requested, components, parents, false, false);
  let fd: number;
  try {
    fd = openEntryAtSync(parentFd, name, fsConstants.O_RDONLY);
  } catch (error) {
    closeBelowRoot(workspace, parentFd);
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw linkError(toolName, requested, name, true);
    // A Unix socket cannot be opened (ENXIO).
    if (code === 'ENXIO') throw new FileToolError(`${toolName}: '${requested}' is not a regular file`);
    throw fileSystemError(toolName, requested, error);
  }
  closeBelowRoot(workspace, parentFd);
  let stats: Stats;
  try {
    stats = fstatSync(fd);
  } catch (error) {
    closeDescriptor(fd);
    throw fileSystemError(toolName, requested, error);
  }
  if (stats.isFile()) return { kind: 'file', fd, stats };
  closeDescriptor(fd);
  if (stats.isDirectory()) {
    checkAccess(workspace, toolName, requested, target, { isDirectory: true, access: 'read' });
    // Reopened by the same walk, so it is the directory itself (a descriptor opened for a file cannot be listed).
    const directoryFd = openDirectories(workspace, toolName, requested, components, components.length, false, true);
    return { kind: 'directory', directory: directoryHandle(workspace, directoryFd, components) };
  }
  throw new FileToolError(`${toolName}: '${requested}' is not a regular file`);
}

/**
 * Opens a regular file at `target` for reading (see {@link openForReading}); a directory is refused.
 */
export function openFileForReading(
  workspace: Workspace,
  toolName: string,
  requested: string,
  target: WorkspacePath,
): OpenFile {
  const entry = openForReading(workspace, toolName, requested, target);
  if (entry.kind === 'file') return entry;
  entry.directory.close();
  throw new FileToolError(`${toolName}: '${requested}' is a directory; use list_files to see what it contains`);
}

/** A file opened by {@link openFileForWriting}, not yet truncated. */
export interface WritableFile {
  readonly handle: FileHandle;
  /** Whether the file was created by this open. */
  readonly created: boolean;
}

/**
 * Opens the file at `target` for writing, creating missing parent directories (each inside the one just opened) and
 * the file itself (O_CREAT | O_EXCL, so never through a link). An existing target must be a regular file with one
 * link: writing a file with several hard links would change its other names too, which may be outside the
 * workspace. The caller truncates and writes.
 */
export async function openFileForWriting(
  workspace: Workspace,
  toolName: string,
  requested: string,
  target: WorkspacePath,
): Promise<WritableFile> {
  checkAccess(workspace, toolName, requested, target, { isDirectory: false, access: 'write' });
  const name = target.components.at(-1);
  if (name === undefined) throw new FileToolError(`${toolName}: '${requested}' is a directory`);
  const components = target.components;
  const parentFd = openDirectories(workspace, toolName, requested, components, components.length - 1, true, false);
  try {
    for (let attempt = 0; attempt < MAX_CREATE_ATTEMPTS; attempt += 1) {
      let handle: FileHandle;
      try {
        handle = await openEntryAt(parentFd, name, fsConstants.O_WRONLY);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ELOOP') throw linkError(toolName, requested, name, true);
        // A FIFO without a reader, or a Unix socket.
        if (code === 'ENXIO') throw new FileToolError(`${toolName}: '${requested}' is not a regular file`);
        // A denied directory is refused as denied, not described.
        if (code === 'EISDIR') {
          checkAccess(workspace, toolName, requested, target, { isDirectory: true, access: 'write' });
        }
        if (code !== 'ENOENT') throw fileSystemError(toolName, requested, error);
        try {
          const created = await openEntryAt(
            parentFd,
            name,
            fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL,
          );
          return { handle: created, created: true };
        } catch (createError) {
          // Something appeared at the name meanwhile: look again at what it is.
          if ((createError as NodeJS.ErrnoException).code === 'EEXIST') continue;
          throw fileSystemError(toolName, requested, createError);
        }
      }
      const stats = await statOpened(handle, toolName, requested);
      if (stats.isFile() && stats.nlink <= 1) return { handle, created: false };
      await handle.close();
      if (stats.isFile()) {
        throw new FileToolError(
          `${toolName}: '${requested}' has ${stats.nlink} hard links; write_file does not write a file that has other ` +
            'names, which may be outside the workspace',
        );
      }
      throw new FileToolError(`${toolName}: '${requested}' is not a regular file`);
    }
    throw new FileToolError(`${toolName}: '${requested}' kept changing while it was being created; try again`);
  } finally {
    closeBelowRoot(workspace, parentFd);
  }
}

async function statOpened(handle: FileHandle, toolName: string, requested: string): Promise<Stats> {
  try {
    return await handle.stat();
  } catch (error) {
    await handle.close();
    throw fileSystemError(toolName, requested, error);
  }
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
      return new FileToolError(
        `${toolName}: ${quoted} goes through a symbolic link, which the file tools do not follow`,
      );
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

function linkError(toolName: string, requested: string, name: string, isLast: boolean): FileToolError {
  const what = isLast ? 'is a symbolic link' : `goes through the symbolic link '${name}'`;
  return new FileToolError(
    `${toolName}: '${requested}' ${what}; the file tools never follow links (use the path of the target if it is ` +
      'inside the workspace)',
  );
}

function outsideError(toolName: string, requested: string): FileToolError {
  return new FileToolError(
    `${toolName}: path '${requested}' is outside the workspace; use a path relative to the workspace root`,
  );
}
