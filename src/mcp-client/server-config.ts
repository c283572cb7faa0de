import { isAbsolute, resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { checkKnownKeys, knownKeys } from '../core/option-checks.js';
import { isRecord } from '../core/values.js';
import { clipText } from '../core/wording.js';

/**
 * An upstream MCP server started as a child process that speaks MCP on its stdin/stdout, written the way MCP
 * clients' users already write it (Claude Desktop, Cursor, VS Code): `{ "command": "npx", "args": [...] }`.
 */
export interface McpStdioServerConfig {
  /** Optional transport marker some clients write; only `"stdio"` is accepted here. */
  readonly type?: 'stdio' | undefined;
  /** Executable to start (looked up on `PATH`). */
  readonly command: string;
  /** Its arguments. */
  readonly args?: readonly string[] | undefined;
  /**
   * Extra environment variables. The child gets a small safe default environment (`HOME`, `LOGNAME`, `PATH`,
   * `SHELL`, `TERM`, `USER`) plus these; the rest of the host's environment is not passed on.
   */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** Working directory of the child (default: the host's working directory). */
  readonly cwd?: string | undefined;
  /** When true the server is left out, as in the clients that support this key. */
  readonly disabled?: boolean | undefined;
  /** Only these of the server's tools become functions (the server's own tool names). */
  readonly allowedTools?: readonly string[] | undefined;
  /** These of the server's tools are left out (the server's own tool names). */
  readonly disabledTools?: readonly string[] | undefined;
  /** When true only the tools the server annotates as read-only (`readOnlyHint: true`) become functions. */
  readonly readOnly?: boolean | undefined;
}

/** An upstream MCP server reached over Streamable HTTP: `{ "url": "https://example.com/mcp", "headers": {...} }`. */
export interface McpHttpServerConfig {
  /** Optional transport marker some clients write; `"http"` and `"streamable-http"` are accepted. */
  readonly type?: 'http' | 'streamable-http' | undefined;
  /** Endpoint URL (`http:` or `https:`). */
  readonly url: string;
  /** HTTP headers sent with every request, e.g. `{ "Authorization": "Bearer ..." }`. */
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** When true the server is left out, as in the clients that support this key. */
  readonly disabled?: boolean | undefined;
  /** Only these of the server's tools become functions (the server's own tool names). */
  readonly allowedTools?: readonly string[] | undefined;
  /** These of the server's tools are left out (the server's own tool names). */
  readonly disabledTools?: readonly string[] | undefined;
  /** When true only the tools the server annotates as read-only (`readOnlyHint: true`) become functions. */
  readonly readOnly?: boolean | undefined;
}

/** One entry of the `mcpServers` map: a stdio server (`command`) or a Streamable HTTP server (`url`). */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** Options of {@link parseMcpServers}. */
export interface ParseMcpServersOptions {
  /** Directory that a relative `cwd` is resolved against, e.g. the folder of the configuration file. */
  readonly baseDirectory?: string | undefined;
}

/** Longest excerpt of a bad value quoted in an error message. */
const DESCRIBED_VALUE_MAX_CHARACTERS = 80;
const STDIO_KEYS = knownKeys<keyof McpStdioServerConfig>({
  type: true,
  command: true,
  args: true,
  env: true,
  cwd: true,
  disabled: true,
  allowedTools: true,
  disabledTools: true,
  readOnly: true,
});
const HTTP_KEYS = knownKeys<keyof McpHttpServerConfig>({
  type: true,
  url: true,
  headers: true,
  disabled: true,
  allowedTools: true,
  disabledTools: true,
  readOnly: true,
});
const HTTP_TYPES: ReadonlySet<string> = new Set(['http', 'streamable-http']);

/** Whether a (valid) server entry is reached over HTTP rather than started as a child process. */
export function isHttpServerConfig(config: McpServerConfig): config is McpHttpServerConfig {
  return 'url' in config && typeof config.url === 'string';
}

/**
 * Checks the `mcpServers` map of a configuration and returns the enabled servers, each checked by
 * {@link parseMcpServerConfig} (entries with `"disabled": true` are left out).
 * @throws CodecallError `INVALID_CONFIG` naming the server and the bad key.
 */
export function parseMcpServers(value: unknown, options: ParseMcpServersOptions = {}): Record<string, McpServerConfig> {
  if (value === undefined || value === null) return {};
  if (!isRecord(value)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `mcpServers must be an object mapping server names to server configurations, got ${describeValue(value)}`,
      { key: 'mcpServers', value },
    );
  }
  const servers: Record<string, McpServerConfig> = {};
  for (const [name, entry] of Object.entries(value)) {
    const config = parseMcpServerConfig(name, entry, options);
    if (config.disabled !== true) servers[name] = config;
  }
  return servers;
}

/**
 * Checks one server entry: a stdio server (`command`, `args`, `env`, `cwd`) or a Streamable HTTP server (`url`,
 * `headers`). Returns a copy with a relative `cwd` resolved against `options.baseDirectory` when one is given.
 * @throws CodecallError `INVALID_CONFIG` naming the server and the bad key.
 */
export function parseMcpServerConfig(
  name: string,
  value: unknown,
  options: ParseMcpServersOptions = {},
): McpServerConfig {
  checkServerName(name);
  if (!isRecord(value)) {
    throw invalid(name, undefined, `must be an object with "command" or "url", got ${describeValue(value)}`, value);
  }
  const hasCommand = value.command !== undefined;
  const hasUrl = value.url !== undefined;
  if (hasCommand && hasUrl) {
    throw invalid(name, 'url', 'has both "command" (stdio) and "url" (HTTP); give one of them', value.url);
  }
  if (!hasCommand && !hasUrl) {
    if (value.type === 'sse') throw unsupportedSse(name);
    throw invalid(name, undefined, 'needs "command" (a stdio server) or "url" (a Streamable HTTP server)', value);
  }
  return hasUrl ? parseHttpConfig(name, value) : parseStdioConfig(name, value, options);
}

function parseStdioConfig(
  name: string,
  value: Record<string, unknown>,
  options: ParseMcpServersOptions,
): McpStdioServerConfig {
  checkKnownKeys(value, `mcpServers.${name} (a stdio server)`, STDIO_KEYS, { server: name });
  if (value.type !== undefined && value.type !== 'stdio') {
    throw invalid(
      name,
      'type',
      `must be "stdio" for a server with "command", got ${describeValue(value.type)}`,
      value.type,
    );
  }
  const command = value.command;
  if (typeof command !== 'string' || command.trim() === '') {
    throw invalid(name, 'command', `must be a non-empty string, got ${describeValue(command)}`, command);
  }
  const args = value.args;
  if (args !== undefined && (!Array.isArray(args) || !args.every((argument) => typeof argument === 'string'))) {
    throw invalid(name, 'args', `must be an array of strings, got ${describeValue(args)}`, args);
  }
  const env = value.env === undefined ? undefined : parseStringRecord(name, 'env', value.env);
  const cwd = value.cwd;
  if (cwd !== undefined && (typeof cwd !== 'string' || cwd === '')) {
    throw invalid(name, 'cwd', `must be a non-empty string, got ${describeValue(cwd)}`, cwd);
  }
  const disabled = parseDisabled(name, value.disabled);
  const narrowing = parseNarrowing(name, value);
  const resolvedCwd =
    cwd !== undefined && options.baseDirectory !== undefined && !isAbsolute(cwd)
      ? resolve(options.baseDirectory, cwd)
      : cwd;
  return {
    ...(value.type === 'stdio' ? { type: 'stdio' as const } : {}),
    command,
    ...(args === undefined ? {} : { args: [...(args as string[])] }),
    ...(env === undefined ? {} : { env }),
    ...(resolvedCwd === undefined ? {} : { cwd: resolvedCwd }),
    ...(disabled === undefined ? {} : { disabled }),
    ...narrowing,
  };
}

function parseHttpConfig(name: string, value: Record<string, unknown>): McpHttpServerConfig {
  checkKnownKeys(value, `mcpServers.${name} (an HTTP server)`, HTTP_KEYS, { server: name });
  if (value.type === 'sse') throw unsupportedSse(name);
  if (value.type !== undefined && (typeof value.type !== 'string' || !HTTP_TYPES.has(value.type))) {
    throw invalid(
      name,
      'type',
      `must be "http" or "streamable-http" for a server with "url", got ${describeValue(value.type)}`,
      value.type,
    );
  }
  const url = value.url;
  if (typeof url !== 'string' || !isHttpUrl(url)) {
    throw invalid(name, 'url', `must be an http:// or https:// URL, got ${describeValue(url)}`, url);
  }
  const headers = value.headers === undefined ? undefined : parseStringRecord(name, 'headers', value.headers);
  const disabled = parseDisabled(name, value.disabled);
  return {
    ...(value.type === undefined ? {} : { type: value.type as 'http' | 'streamable-http' }),
    url,
    ...(headers === undefined ? {} : { headers }),
    ...(disabled === undefined ? {} : { disabled }),
    ...parseNarrowing(name, value),
  };
}

function checkServerName(name: string): void {
  if (name.trim() === '') {
    throw new CodecallError('INVALID_CONFIG', 'mcpServers: a server name must not be empty', { key: 'mcpServers' });
  }
  // `/` separates the server from the tool in wire names (`memory/create_entities`).
  if (name.includes('/')) {
    throw new CodecallError('INVALID_CONFIG', `mcpServers: server name "${name}" must not contain "/"`, {
      server: name,
      key: 'mcpServers',
    });
  }
}

function parseStringRecord(name: string, key: string, value: unknown): Record<string, string> {
  if (!isRecord(value)) {
    throw invalid(name, key, `must be an object of strings, got ${describeValue(value)}`, value);
  }
  const record: Record<string, string> = {};
  for (const [entryKey, entryValue] of Object.entries(value)) {
    if (typeof entryValue !== 'string') {
      throw invalid(name, `${key}.${entryKey}`, `must be a string, got ${describeValue(entryValue)}`, entryValue);
    }
    record[entryKey] = entryValue;
  }
  return record;
}

/** The keys that narrow a server's tools: `allowedTools`, `disabledTools` (lists of tool names) and `readOnly`. */
function parseNarrowing(
  name: string,
  value: Record<string, unknown>,
): Pick<McpStdioServerConfig, 'allowedTools' | 'disabledTools' | 'readOnly'> {
  const narrowing: { allowedTools?: string[]; disabledTools?: string[]; readOnly?: boolean } = {};
  for (const key of ['allowedTools', 'disabledTools'] as const) {
    const list = value[key];
    if (list === undefined) continue;
    if (!Array.isArray(list) || !list.every((item) => typeof item === 'string' && item !== '')) {
      throw invalid(name, key, `must be a list of the server's tool names, got ${describeValue(list)}`, list);
    }
    narrowing[key] = [...new Set(list as string[])];
  }
  const readOnly = value.readOnly;
  if (readOnly !== undefined) {
    if (typeof readOnly !== 'boolean') {
      throw invalid(name, 'readOnly', `must be true or false, got ${describeValue(readOnly)}`, readOnly);
    }
    narrowing.readOnly = readOnly;
  }
  return narrowing;
}

function parseDisabled(name: string, value: unknown): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') {
    throw invalid(name, 'disabled', `must be true or false, got ${describeValue(value)}`, value);
  }
  return value;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

function unsupportedSse(name: string): CodecallError {
  return invalid(
    name,
    'type',
    'uses the deprecated SSE transport, which codecall does not support; use the server\'s Streamable HTTP endpoint ("type": "http")',
    'sse',
  );
}

function invalid(name: string, key: string | undefined, problem: string, value: unknown): CodecallError {
  const where = key === undefined ? `mcpServers.${name}` : `mcpServers.${name}.${key}`;
  return new CodecallError('INVALID_CONFIG', `MCP server "${name}": ${where} ${problem}`, {
    server: name,
    ...(key === undefined ? {} : { key }),
    value,
  });
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array ${clipText(JSON.stringify(value), DESCRIBED_VALUE_MAX_CHARACTERS)}`;
  return `${typeof value} ${clipText(JSON.stringify(value) ?? String(value), DESCRIBED_VALUE_MAX_CHARACTERS)}`;
}
