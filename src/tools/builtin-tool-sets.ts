import * as path from 'node:path';
import { CodecallError } from '../core/errors.js';
import type { FileToolsOptions } from './builtin-files.js';
import {
  createFileTools,
  createReadOnlyFileTools,
  FILE_TOOL_NAMES,
  READ_ONLY_FILE_TOOL_NAMES,
} from './builtin-files.js';
import type { FileToolsPolicyOptions } from './file-access-policy.js';
import { checkFileToolsPolicyOptions } from './file-access-policy.js';
import type { Tool } from './types.js';

/** What every built-in tool set is created with. */
export interface BuiltinToolSetOptions {
  /** Directory the built-in tools work in (the `workspace` option of codecall). */
  readonly workspace: string;
  /**
   * codecall's state folder (run directories, outputs): the tools never reach it, even when it lies inside the
   * workspace (`codecall run` from `/tmp` with the default state folder `/tmp/codecall-<uid>`).
   */
  readonly stateDir?: string | undefined;
  /** The `files` option of codecall: denied paths, version-control writes. */
  readonly files?: FileToolsPolicyOptions | undefined;
}

/** Creates the tools of one built-in set. */
export type BuiltinToolSetFactory = (options: BuiltinToolSetOptions) => Tool[];

/** The options of the file tools for one codecall: its workspace, its `files` policy, its state folder out of reach. */
function fileToolsOptions(options: BuiltinToolSetOptions): FileToolsOptions {
  return {
    ...options.files,
    workspace: options.workspace,
    unreachableDirectories: options.stateDir === undefined ? [] : [path.resolve(options.stateDir)],
  };
}

/**
 * The built-in tool sets by the name used in `builtinTools`: `files` (read_file, write_file, list_files,
 * search_files) and `files:read` (the same without write_file).
 */
export const BUILTIN_TOOL_SETS: ReadonlyMap<string, BuiltinToolSetFactory> = new Map([
  ['files', (options: BuiltinToolSetOptions) => createFileTools(fileToolsOptions(options))],
  ['files:read', (options: BuiltinToolSetOptions) => createReadOnlyFileTools(fileToolsOptions(options))],
]);

/** The names of each built-in set's tools (what `doctor` shows without opening the workspace). */
export const BUILTIN_TOOL_SET_MEMBERS: ReadonlyMap<string, readonly string[]> = new Map([
  ['files', FILE_TOOL_NAMES],
  ['files:read', READ_ONLY_FILE_TOOL_NAMES],
]);

/** The built-in sets made of file tools. */
export const FILE_TOOL_SET_NAMES: readonly string[] = ['files', 'files:read'];

/** Options of {@link resolveBuiltinTools}. */
export interface ResolveBuiltinToolsOptions extends BuiltinToolSetOptions {
  /** Names of the sets to include, e.g. `['files']`; repeated names count once. */
  readonly names: readonly string[];
}

/**
 * Creates the tools of the named built-in sets, in the order named; a tool in several of the sets (`files` and
 * `files:read`) is created once.
 *
 * @throws CodecallError('INVALID_CONFIG') for an unknown set name, an unusable workspace, a bad `files` option, or a
 * workspace inside the state folder.
 */
export function resolveBuiltinTools(options: ResolveBuiltinToolsOptions): Tool[] {
  const files = checkFileToolsPolicyOptions(options.files);
  const tools: Tool[] = [];
  for (const name of new Set(options.names)) {
    const factory = BUILTIN_TOOL_SETS.get(name);
    if (factory === undefined) {
      const known = [...BUILTIN_TOOL_SETS.keys()].map((key) => `'${key}'`).join(', ');
      throw new CodecallError(
        'INVALID_CONFIG',
        `unknown built-in tool set ${JSON.stringify(name)} in builtinTools; the known sets are ${known}`,
        { name, known: [...BUILTIN_TOOL_SETS.keys()] },
      );
    }
    for (const tool of factory({ workspace: options.workspace, stateDir: options.stateDir, files })) {
      if (!tools.some((existing) => existing.name === tool.name)) tools.push(tool);
    }
  }
  return tools;
}
