import { CodecallError } from '../core/errors.js';
import { checkBoolean } from '../core/option-checks.js';
import type { DeniedPaths } from './denied-paths.js';
import { compileDeniedPaths } from './denied-paths.js';

/** What a file tool does with a path. */
export type FileAccess = 'read' | 'write';

/** Names of version-control metadata folders `write_file` refuses to write into (at any depth) by default. */
export const VERSION_CONTROL_NAMES: readonly string[] = ['.git', '.hg', '.svn'];

/** The `files` option of codecall: what the built-in file tools must leave alone. */
export interface FileToolsPolicyOptions {
  /**
   * gitignore-style patterns of workspace paths the file tools may never read, write, list or search, e.g.
   * `['.env', '*.pem', 'secrets/', '/config/production.json']` (see {@link compileDeniedPaths}).
   */
  readonly deniedPaths?: readonly string[];
  /**
   * Let `write_file` write into version-control metadata (`.git`, `.hg`, `.svn` at any depth, in any letter case).
   * Default false: a script that can write `.git/config` or `.git/hooks` runs commands on the host at the next `git`
   * command there.
   */
  readonly allowVersionControlWrites?: boolean;
}

/** Decides which workspace paths the file tools may touch. */
export interface FileAccessPolicy {
  /**
   * Why the tools may not touch the path (components relative to the workspace root; `isDirectory` says what the last
   * one is, its parents are directories), as the end of a sentence starting with the path; undefined when allowed.
   */
  refusal(components: readonly string[], isDirectory: boolean, access: FileAccess): string | undefined;
  /** True when the entry must not even appear in listings and searches. */
  hides(components: readonly string[], isDirectory: boolean): boolean;
}

/** Options of {@link createFileAccessPolicy}. */
export interface FileAccessPolicyOptions extends FileToolsPolicyOptions {
  /**
   * Directories inside the workspace (components relative to its root) the tools never reach, such as codecall's own
   * state folder when the workspace contains it.
   */
  readonly unreachable?: readonly (readonly string[])[];
}

const POLICY_OPTION_NAMES: ReadonlySet<string> = new Set(['deniedPaths', 'allowVersionControlWrites']);

/**
 * Checks the `files` option of codecall.
 * @throws CodecallError('INVALID_CONFIG') naming the bad key or value.
 */
export function checkFileToolsPolicyOptions(options: unknown): FileToolsPolicyOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new CodecallError('INVALID_CONFIG', 'files must be an object such as { "deniedPaths": [".env", "*.pem"] }', {
      files: options,
    });
  }
  for (const key of Object.keys(options)) {
    if (!POLICY_OPTION_NAMES.has(key)) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `unknown key "${key}" in files; known keys: ${[...POLICY_OPTION_NAMES].join(', ')}`,
        { key },
      );
    }
  }
  const { allowVersionControlWrites, deniedPaths } = options as FileToolsPolicyOptions;
  // Compiled here too, so a bad pattern is a configuration error even where the file tools are not enabled.
  if (deniedPaths !== undefined) compileDeniedPaths(deniedPaths);
  checkBoolean(allowVersionControlWrites, 'files.allowVersionControlWrites', false);
  return options as FileToolsPolicyOptions;
}

/**
 * Builds the policy of the file tools: unreachable directories (never touched, never listed), denied patterns
 * (never read, written, listed or searched) and version-control metadata (never written unless allowed).
 *
 * @throws CodecallError('INVALID_CONFIG') for a bad pattern or option.
 */
export function createFileAccessPolicy(options: FileAccessPolicyOptions): FileAccessPolicy {
  checkFileToolsPolicyOptions({
    deniedPaths: options.deniedPaths,
    allowVersionControlWrites: options.allowVersionControlWrites,
  });
  const denied: DeniedPaths | undefined =
    options.deniedPaths === undefined ? undefined : compileDeniedPaths(options.deniedPaths);
  const unreachable = options.unreachable ?? [];
  const protectVersionControl = options.allowVersionControlWrites !== true;
  const isUnreachable = (components: readonly string[]): boolean =>
    unreachable.some(
      (directory) =>
        directory.length <= components.length && directory.every((name, index) => components[index] === name),
    );
  const isDenied = (components: readonly string[], isDirectory: boolean): boolean =>
    denied !== undefined && denied.patterns.length > 0 && denied.matches(components, isDirectory);
  return {
    refusal(components, isDirectory, access) {
      if (isUnreachable(components)) return "is inside codecall's own state folder, which the file tools never reach";
      if (isDenied(components, isDirectory)) {
        return 'is a denied path (files.deniedPaths): the file tools may not read or write it';
      }
      if (access === 'write' && protectVersionControl) {
        const metadata = components.find(isVersionControlName);
        if (metadata !== undefined) {
          return `is version-control metadata (${metadata}), which the file tools do not write`;
        }
      }
      return undefined;
    },
    hides: (components, isDirectory) => isUnreachable(components) || isDenied(components, isDirectory),
  };
}

// Characters some file systems ignore in names (HFS+), so `.g\u200Cit` is `.git` there; removed before comparing.
const IGNORED_IN_NAMES = /[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u206A-\u206F\uFEFF]/g;

/**
 * True when a path component names version-control metadata: `.git`, `.hg` or `.svn` in any letter case, also with
 * the trailing dots and spaces or ignorable characters that case-insensitive file systems drop (`.GIT`, `.git.`,
 * `.g\u200Cit`), and the short names Windows file systems give them (`GIT~1`).
 */
export function isVersionControlName(name: string): boolean {
  const visible = name.replace(IGNORED_IN_NAMES, '');
  let end = visible.length;
  while (end > 0 && (visible[end - 1] === '.' || visible[end - 1] === ' ')) end -= 1;
  const folded = visible.slice(0, end).toLowerCase();
  if (VERSION_CONTROL_NAMES.includes(folded)) return true;
  return /^(git|hg|svn)~\d+$/.test(folded);
}
