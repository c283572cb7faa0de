import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { checkKnownKeys } from '../core/option-checks.js';
import { isRecord } from '../core/values.js';
import { resolveRelativeSqlitePaths } from '../databases/database-config.js';
import { CODECALL_OPTION_NAMES, type CodecallOptions } from '../engine/codecall.js';
import { parseMcpServers } from '../mcp-client/server-config.js';
import { loadToolModules } from './tool-modules.js';

/** Name of the configuration file looked for in the current directory. */
export const CONFIG_FILE_NAME = 'codecall.json';

/**
 * Keys a configuration file may have: every option of createCodecall but `tools`, whose handlers are code, not JSON;
 * instead `toolModules` names JavaScript modules that export them.
 */
const CONFIG_KEYS: ReadonlySet<string> = new Set([
  ...[...CODECALL_OPTION_NAMES].filter((name) => name !== 'tools'),
  'toolModules',
]);

/** Defaults of the command line when no configuration says otherwise: the built-in file tools on the workspace. */
export const CLI_DEFAULTS: CodecallOptions = Object.freeze({ builtinTools: ['files'] });

/**
 * Reads a configuration file. With no explicit path, `codecall.json` in the current directory is used when present.
 * Relative paths inside it (`workspace`, `stateDir`, `readOnlyPaths`, a `python` path, a stdio server's `cwd`, a
 * `sqlite:` database, `toolModules`) are resolved against the file's folder; the tools of `toolModules` are loaded
 * into `tools`.
 * @throws CodecallError `INVALID_CONFIG` naming the file and the bad key or value; `DUPLICATE_TOOL` for two tool
 *   modules' tools of one name.
 */
export async function loadConfigFile(path: string | undefined): Promise<CodecallOptions> {
  const file = resolve(path ?? CONFIG_FILE_NAME);
  let text: string;
  try {
    // Read at once, not through the thread pool: a one-shot run's first asynchronous file operation starts the pool's
    // threads and pays for the promise file API's first use, before its launch, for a file of a few lines.
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (path === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CodecallError('INVALID_CONFIG', `cannot read configuration file ${file}: ${(error as Error).message}`, {
      file,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CodecallError('INVALID_CONFIG', `${file} is not valid JSON: ${(error as Error).message}`, { file });
  }
  if (!isRecord(parsed)) {
    throw new CodecallError('INVALID_CONFIG', `${file} must hold a JSON object`, { file });
  }
  const config = parsed;
  checkKnownKeys(config, file, CONFIG_KEYS, { file });
  const base = dirname(file);
  for (const key of ['workspace', 'stateDir'] as const) {
    const value = config[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length === 0) {
      throw new CodecallError('INVALID_CONFIG', `${file}: "${key}" must be a path, got ${JSON.stringify(value)}`, {
        file,
        key,
      });
    }
    config[key] = resolve(base, value);
  }
  if (Array.isArray(config.readOnlyPaths)) {
    config.readOnlyPaths = config.readOnlyPaths.map((path) => (typeof path === 'string' ? resolve(base, path) : path));
  }
  // A path to an interpreter (`./.venv/bin/python`) is relative to the file; a bare command is looked up on PATH.
  if (typeof config.python === 'string' && config.python.includes('/')) config.python = resolve(base, config.python);
  if (config.mcpServers !== undefined) {
    // Relative `cwd` of stdio servers is relative to the file, like `workspace`.
    config.mcpServers = parseMcpServers(config.mcpServers, { baseDirectory: base });
  }
  if (config.databases !== undefined) {
    // A relative SQLite path is relative to the file too (createCodecall would take it relative to the workspace).
    config.databases = resolveRelativeSqlitePaths(config.databases, base);
  }
  if (config.toolModules !== undefined) {
    config.tools = await loadToolModules(config.toolModules, { file, baseDirectory: base });
    delete config.toolModules;
  }
  return config as CodecallOptions;
}
