import * as path from 'node:path';
import { CodecallError } from '../core/errors.js';
import { createFileTools } from './builtin-files.js';
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

/** The built-in tool sets by the name used in `builtinTools` (`files`: read_file, write_file, list_files, search_files). */
export const BUILTIN_TOOL_SETS: ReadonlyMap<string, BuiltinToolSetFactory> = new Map([
  [
    'files',
    (options: BuiltinToolSetOptions) =>
      createFileTools({
        ...options.files,
        workspace: options.workspace,
        unreachableDirectories: options.stateDir === undefined ? [] : [path.resolve(options.stateDir)],
      }),
  ],
]);

/** Options of {@link resolveBuiltinTools}. */
export interface ResolveBuiltinToolsOptions extends BuiltinToolSetOptions {
  /** Names of the sets to include, e.g. `['files']`; repeated names count once. */
  readonly names: readonly string[];
}

/**
 * Creates the tools of the named built-in sets, in the order named.
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
    tools.push(...factory({ workspace: options.workspace, stateDir: options.stateDir, files }));
  }
  return tools;
}
