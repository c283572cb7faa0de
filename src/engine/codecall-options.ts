import { existsSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { CodecallError } from '../core/errors.js';
import type { SandboxMode } from '../core/isolation.js';
import { type Limits, resolveLimits } from '../core/limits.js';
import { checkBoolean, checkKnownKeys, knownKeys } from '../core/option-checks.js';
import { isInside } from '../core/paths.js';
import { defaultStateRoot } from '../core/state-folders.js';
import {
  DEFAULT_WORKSPACE_MOUNT,
  isWorkspaceMount,
  WORKSPACE_MOUNTS,
  type WorkspaceMount,
} from '../core/workspace-mount.js';
import { type DatabaseConfig, parseDatabases, type ResolvedDatabase } from '../databases/database-config.js';
import { type McpServerConfig, parseMcpServers } from '../mcp-client/server-config.js';
import { checkScriptVariables, type ScriptVariables } from '../sandbox/environment.js';
import type { FileToolsPolicyOptions } from '../tools/file-access-policy.js';
import type { ApproveToolCall } from '../tools/tool-approval.js';
import type { Tool } from '../tools/types.js';
import { type OutputsRetention, resolveOutputsRetention } from './result/outputs-retention.js';
import type { RunEvent, RunEventListener } from './supervise/run-events.js';
import { DEFAULT_MAX_LIVE_SESSIONS, DEFAULT_SESSION_IDLE_MS, type SessionOptions } from './supervise/session.js';
import { type PoolOptions, resolvePoolSize } from './supervise/warm-pool.js';

/** Default name of the generated module (`from tools import ...`). */
export const DEFAULT_MODULE_NAME = 'tools';
/** Default Python command; resolved once to the real interpreter. */
export const DEFAULT_PYTHON = 'python3';

/** Options of `createCodecall`. Every field is optional. */
export interface CodecallOptions {
  /** Host tools the script can call. */
  readonly tools?: readonly Tool<never, unknown>[] | readonly Tool[];
  /** Built-in tool sets: `files` (read_file, write_file, list_files, search_files rooted at `workspace`). */
  readonly builtinTools?: readonly string[];
  /** Folder the built-in file tools are confined to, and the script starts in (default: the current directory). */
  readonly workspace?: string;
  /**
   * How the script sees the workspace: `read-only` (default: mounted read-only, the script starts in it), `copy` (a
   * throwaway writable copy), `read-write` (the real files), or `none` (only through the file tools).
   */
  readonly workspaceMount?: WorkspaceMount;
  /** More host paths the sandboxed script may read (a data folder, a library outside the interpreter's prefix). */
  readonly readOnlyPaths?: readonly string[];
  /** Name of the generated Python module (default `tools`). */
  readonly moduleName?: string;
  /** Python command or path (default `python3`), resolved once to the real interpreter. */
  readonly python?: string;
  /** `auto` (bubblewrap when usable, else none), `bubblewrap` (required), or `none`. */
  readonly sandbox?: SandboxMode;
  /** Resource limits; see {@link Limits} for the defaults. */
  readonly limits?: Partial<Limits>;
  /** Upstream MCP servers whose tools become submodules (`from tools.<server> import fn`). */
  readonly mcpServers?: Readonly<Record<string, McpServerConfig>>;
  /**
   * Databases whose tools become submodules (`from tools.<name> import query, tables, describe`): a URL
   * (`"sqlite:./data/sales.db"`, relative to `workspace`; `"postgres://user:password@host/db"`) or
   * `{ url, readOnly, maxRows, statementTimeoutMs, description }`. Read-only unless `readOnly: false`. Needs the
   * optional package `sql.js` (SQLite) or `pg` (PostgreSQL).
   */
  readonly databases?: Readonly<Record<string, DatabaseConfig>>;
  /** Variables set in the script's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Names of host variables copied into the script's environment (default: `TZ`). */
  readonly envPassthrough?: readonly string[];
  /** Whether sandboxed scripts may use the network (default false; `none` isolation cannot prevent it). */
  readonly network?: boolean;
  /** Folder for run directories, generated modules and saved outputs (default `<tmpdir>/codecall-<uid>`). */
  readonly stateDir?: string;
  /**
   * Interpreters started ahead of time, each used for exactly one run and replaced in the background; results,
   * limits, environment and isolation are those of a cold run (default `{ size: 0 }`: no pool). Runs whose process
   * limits differ from the codecall's start cold.
   */
  readonly pool?: PoolOptions;
  /** Sessions of this codecall: live interpreters at once, and idle time before one is stopped. */
  readonly sessions?: SessionsOptions;
  /**
   * Mask secret-shaped tokens (API keys, access tokens, private keys, credentials next to their names) in stdout,
   * stderr and the error before they reach the result and the model (default true). The full output saved on disk
   * is not masked.
   */
  readonly redactSecrets?: boolean;
  /** What the built-in file tools must leave alone: `deniedPaths` patterns, version-control writes. */
  readonly files?: FileToolsPolicyOptions;
  /**
   * How much of the saved outputs (full stdout files, artifacts) in the state folder's `outputs/` is kept: entries
   * older than `maxAgeMs` go, then the oldest beyond `maxRuns` entries or `maxBytes` in all (defaults 24 hours, 500,
   * 512 MiB). Pruned in the background after runs, never blocking one.
   */
  readonly outputs?: Partial<OutputsRetention>;
  /**
   * Asked before every call of a tool that needs approval (its `needsApproval`), with `{ tool, arguments, runId,
   * signal }`; resolves to `true`, `false` or `{ allow: false, reason }`. A denied call raises ToolError in the script
   * with the reason. A throw or rejection denies; without this hook, every call that needs approval is denied. The
   * wait counts toward the call's `toolCallTimeoutMs`.
   */
  readonly approveToolCall?: ApproveToolCall;
  /**
   * Readies the argument checks in the background from creation on (default true): loads the checker (Ajv) and
   * compiles the first tool's schema, then the others one per turn of the event loop, so the first tool call does
   * not pay tens of milliseconds for them; the first run waits for the first part if it has not finished. A
   * short-lived process that may call no tool at all (the one-shot `codecall run`) starts faster without it.
   */
  readonly warmUp?: boolean;
  /**
   * Sends runs to a fleet of workers (`codecall worker --redis URL`) through a BullMQ queue on Redis instead of
   * running them here; tool calls come back to this process and run here. Needs the optional packages `bullmq` and
   * `ioredis`.
   */
  readonly remote?: RemoteOptions;
}

/** The `remote` option of `createCodecall`: where the fleet's queue is. */
export interface RemoteOptions {
  /** Redis (or Valkey) URL, e.g. `redis://queue.internal:6379`. */
  readonly redis: string;
  /** Name of the queue the workers take runs from (default `codecall`). */
  readonly queue?: string;
}

/** The `sessions` option of `createCodecall`. */
export interface SessionsOptions {
  /**
   * Session interpreters alive at once (default {@link DEFAULT_MAX_LIVE_SESSIONS}); past it the least recently used
   * idle one is stopped (its next cell starts fresh), or a new one waits while all are running a cell.
   */
  readonly maxLive?: number;
  /** Default idle time after which a session's interpreter is stopped (default 30 minutes). */
  readonly idleTimeoutMs?: number;
}

/** Per-call options of `execute`. */
export interface ExecuteOptions {
  /** Aborting kills the run and rejects with an AbortError. */
  readonly signal?: AbortSignal;
  /** Wall-clock limit of this run, overriding `limits.timeoutMs`. */
  readonly timeoutMs?: number;
  /** Other limits for this run only. */
  readonly limits?: Partial<Limits>;
  /** Receives the run's live events (`run-start` ... `run-end`); see {@link RunEvent}. A throwing listener is ignored. */
  readonly onEvent?: RunEventListener;
  /** Approval hook for this run's calls, in place of the codecall's `approveToolCall`. */
  readonly approveToolCall?: ApproveToolCall;
}

/** Names of the options `createCodecall` accepts (checked against {@link CodecallOptions} by the compiler). */
export const CODECALL_OPTION_NAMES = knownKeys<keyof CodecallOptions>({
  tools: true,
  builtinTools: true,
  workspace: true,
  workspaceMount: true,
  readOnlyPaths: true,
  moduleName: true,
  python: true,
  sandbox: true,
  limits: true,
  mcpServers: true,
  databases: true,
  env: true,
  envPassthrough: true,
  network: true,
  stateDir: true,
  pool: true,
  sessions: true,
  redactSecrets: true,
  files: true,
  outputs: true,
  approveToolCall: true,
  warmUp: true,
  remote: true,
});

const SESSIONS_OPTION_NAMES = knownKeys<keyof SessionsOptions>({ maxLive: true, idleTimeoutMs: true });
const SESSION_OPTION_NAMES = knownKeys<keyof SessionOptions>({ limits: true, idleTimeoutMs: true });

const SANDBOX_MODES: readonly SandboxMode[] = ['auto', 'bubblewrap', 'none'];

/** The options of a codecall after checking, with every default filled in. */
export interface ResolvedCodecallOptions {
  readonly limits: Limits;
  readonly moduleName: string;
  readonly sandbox: SandboxMode;
  readonly python: string;
  /** Absolute path of the workspace of the built-in file tools. */
  readonly workspace: string;
  readonly workspaceMount: WorkspaceMount;
  /** Absolute host paths bound read-only into the sandbox. */
  readonly readOnlyPaths: readonly string[];
  readonly builtinTools: readonly string[];
  readonly tools: readonly Tool[];
  /** The enabled upstream servers, each entry checked. */
  readonly mcpServers: Readonly<Record<string, McpServerConfig>>;
  /** The databases, each entry checked (relative SQLite paths resolved against the workspace). */
  readonly databases: Readonly<Record<string, ResolvedDatabase>>;
  /** `env` and `envPassthrough`, checked and copied. */
  readonly variables: ScriptVariables;
  readonly network: boolean;
  readonly redactSecrets: boolean;
  /** The `files` option as given; checked whole by the built-in file tools when the codecall is created. */
  readonly files: FileToolsPolicyOptions | undefined;
  readonly approveToolCall: ApproveToolCall | undefined;
  /** Absolute path of the state folder. */
  readonly stateRoot: string;
  readonly poolSize: number;
  readonly sessions: { readonly maxLive: number; readonly idleTimeoutMs: number };
  /** The `outputs` option with its defaults. */
  readonly outputs: OutputsRetention;
  readonly warmUp: boolean;
}

/**
 * Checks every option of `createCodecall` and fills in the defaults, so that a bad value fails the creation rather
 * than the first run. Tools and the generated module are checked by the preparation.
 * @throws CodecallError `INVALID_CONFIG` naming the bad key or value.
 */
export function resolveCodecallOptions(options: unknown): ResolvedCodecallOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new CodecallError('INVALID_CONFIG', 'createCodecall takes an options object');
  }
  checkKnownKeys(options, 'createCodecall options', CODECALL_OPTION_NAMES);
  const given = options as CodecallOptions;
  const limits = resolveLimits(given.limits);
  // `null` is a value given, refused below like any other that is not a mode (not taken for the default).
  const sandbox = given.sandbox === undefined ? 'auto' : given.sandbox;
  if (!SANDBOX_MODES.includes(sandbox)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `sandbox must be one of ${SANDBOX_MODES.join(', ')}, got ${JSON.stringify(sandbox)}`,
      { sandbox },
    );
  }
  const python = given.python === undefined ? DEFAULT_PYTHON : given.python;
  if (typeof python !== 'string' || python.length === 0) {
    throw new CodecallError('INVALID_CONFIG', `python must be a command or path, got ${JSON.stringify(python)}`);
  }
  const network = checkBoolean(given.network, 'network', false);
  const redactSecrets = checkBoolean(given.redactSecrets, 'redactSecrets', true);
  const warmUp = checkBoolean(given.warmUp, 'warmUp', true);
  const workspace = resolvePath(checkPath(given.workspace, 'workspace') ?? process.cwd());
  // Checked now (this imports no MCP SDK code), so a bad server entry is a configuration error at creation.
  const mcpServers = parseMcpServers(given.mcpServers ?? {});
  // Checked now too (no driver is loaded, only looked up), and so is a name given to a server and a database alike.
  const databases = parseDatabases(given.databases ?? {}, { baseDirectory: workspace });
  const shared = Object.keys(databases).filter((name) => Object.hasOwn(mcpServers, name));
  if (shared.length > 0) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `"${shared[0]}" names both an MCP server and a database, and each becomes the submodule of that name; ` +
        'rename one of them',
      { name: shared[0] },
    );
  }
  const approveToolCall = given.approveToolCall;
  if (approveToolCall !== undefined && typeof approveToolCall !== 'function') {
    throw new CodecallError(
      'INVALID_CONFIG',
      `approveToolCall must be a function of { tool, arguments, runId }, got ${JSON.stringify(approveToolCall)}`,
    );
  }
  const stateRoot = resolvePath(checkPath(given.stateDir, 'stateDir') ?? defaultStateRoot());
  return {
    limits,
    approveToolCall,
    moduleName: given.moduleName ?? DEFAULT_MODULE_NAME,
    sandbox,
    python,
    workspace,
    workspaceMount: checkWorkspaceMount(given.workspaceMount, workspace, stateRoot),
    readOnlyPaths: checkReadOnlyPaths(given.readOnlyPaths),
    builtinTools: given.builtinTools ?? [],
    tools: (given.tools ?? []) as readonly Tool[],
    mcpServers,
    databases,
    variables: checkScriptVariables({ extra: given.env, passthrough: given.envPassthrough }),
    network,
    redactSecrets,
    files: given.files,
    stateRoot,
    poolSize: resolvePoolSize(given.pool),
    sessions: resolveSessionsOptions(given.sessions),
    outputs: resolveOutputsRetention(given.outputs),
    warmUp,
  };
}

/**
 * Checks the options of `codecall.session()` and merges them over the codecall's.
 * @throws CodecallError `INVALID_CONFIG` naming the bad key or value.
 */
export function resolveSessionOptions(
  value: unknown,
  codecall: { readonly limits: Limits; readonly idleTimeoutMs: number },
): { readonly limits: Limits; readonly idleTimeoutMs: number } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `session takes an options object, got ${JSON.stringify(value)}`);
  }
  checkKnownKeys(value, 'session options', SESSION_OPTION_NAMES);
  const { limits, idleTimeoutMs } = value as SessionOptions;
  return {
    idleTimeoutMs:
      idleTimeoutMs === undefined ? codecall.idleTimeoutMs : positiveInteger(idleTimeoutMs, 'idleTimeoutMs'),
    limits: limits === undefined ? codecall.limits : resolveLimits(limits, codecall.limits),
  };
}

function resolveSessionsOptions(value: unknown): ResolvedCodecallOptions['sessions'] {
  if (value === undefined) return { maxLive: DEFAULT_MAX_LIVE_SESSIONS, idleTimeoutMs: DEFAULT_SESSION_IDLE_MS };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `sessions must be an object, got ${JSON.stringify(value)}`);
  }
  checkKnownKeys(value, 'sessions', SESSIONS_OPTION_NAMES);
  const { maxLive, idleTimeoutMs } = value as SessionsOptions;
  return {
    maxLive: maxLive === undefined ? DEFAULT_MAX_LIVE_SESSIONS : positiveInteger(maxLive, 'sessions.maxLive'),
    idleTimeoutMs:
      idleTimeoutMs === undefined ? DEFAULT_SESSION_IDLE_MS : positiveInteger(idleTimeoutMs, 'sessions.idleTimeoutMs'),
  };
}

function positiveInteger(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new CodecallError('INVALID_CONFIG', `${name} must be a positive integer, got ${JSON.stringify(value)}`, {
      [name]: value,
    });
  }
  return value;
}

function checkWorkspaceMount(value: unknown, workspace: string, stateRoot: string): WorkspaceMount {
  // `codecall run` from /tmp: the default state folder /tmp/codecall-<uid> lies in the workspace, and mounting it would
  // show scripts other runs; by default the workspace then stays behind the file tools (the description says so).
  if (value === undefined) return isInside(stateRoot, workspace) ? 'none' : DEFAULT_WORKSPACE_MOUNT;
  if (!isWorkspaceMount(value)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `workspaceMount must be one of ${WORKSPACE_MOUNTS.join(', ')}, got ${JSON.stringify(value)}`,
      { workspaceMount: value },
    );
  }
  return value;
}

function checkReadOnlyPaths(value: unknown): readonly string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `readOnlyPaths must be an array of paths, got ${JSON.stringify(value)}`);
  }
  return Object.freeze(
    value.map((path) => {
      const absolute = resolvePath(checkPath(path, 'readOnlyPaths') as string);
      if (!existsSync(absolute)) {
        throw new CodecallError('INVALID_CONFIG', `readOnlyPaths: ${absolute} does not exist; remove it or create it`, {
          path: absolute,
        });
      }
      return absolute;
    }),
  );
}

function checkPath(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) {
    throw new CodecallError('INVALID_CONFIG', `${name} must be a path, got ${JSON.stringify(value)}`, {
      [name]: value,
    });
  }
  return value;
}
