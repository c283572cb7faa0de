import { CodecallError } from '../core/errors.js';
import {
  createFileTools,
  createReadOnlyFileTools,
  FILE_TOOL_NAMES,
  READ_ONLY_FILE_TOOL_NAMES,
} from './builtin-files.js';
import type { Tool } from './types.js';

/** What every built-in tool set is created with. */
export interface BuiltinToolSetOptions {
  /** Directory the built-in tools work in (the `workspace` option of codecall). */
  readonly workspace: string;
}

/** Creates the tools of one built-in set. */
export type BuiltinToolSetFactory = (options: BuiltinToolSetOptions) => Tool[];

/**
 * The built-in tool sets by the name used in `builtinTools`: `files` (read_file, write_file, list_files,
 * search_files) and `files:read` (the same without write_file).
 */
export const BUILTIN_TOOL_SETS: ReadonlyMap<string, BuiltinToolSetFactory> = new Map([
  ['files', createFileTools],
  ['files:read', createReadOnlyFileTools],
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
 * @throws CodecallError('INVALID_CONFIG') for an unknown set name or an unusable workspace.
 */
export function resolveBuiltinTools(options: ResolveBuiltinToolsOptions): Tool[] {
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
    for (const tool of factory({ workspace: options.workspace })) {
      if (!tools.some((existing) => existing.name === tool.name)) tools.push(tool);
    }
  }
  return tools;
}
