import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  describeExecuteCodeTool,
  EXECUTE_CODE_TOOL_NAME,
  executeCodeInputSchema,
} from '../codegen/execute-code-description.js';
import { type GeneratedPythonModule, generatePythonModule } from '../codegen/python-module.js';
import type { LimitReason, SandboxMode } from '../core/isolation.js';
import { type McpServerConfig, parseMcpServers } from '../mcp-client/server-config.js';
import { resolvePythonInterpreter } from '../sandbox/interpreter.js';
import type { SandboxRunner } from '../sandbox/runner.js';
import { createSandboxRunner } from '../sandbox/select-runner.js';
import { resolveBuiltinTools } from '../tools/builtin-tool-sets.js';
import type { RegisteredTool, ToolSource, ToolSourceStatus } from '../tools/registered-tool.js';
import { createToolRegistry, registerTool, type ToolRegistry } from '../tools/registry.js';
import type { JsonSchema, Tool, ToolModuleDescriptor } from '../tools/types.js';

export type { McpServerConfig } from '../mcp-client/server-config.js';

import { CodecallError } from '../core/errors.js';
import { type Limits, resolveLimits } from '../core/limits.js';
import type { ExecuteResult } from '../core/result.js';
import { launchInterpreter } from './interpreter-launch.js';
import { materializeModule, readPythonFiles } from './module-cache.js';
import { createRunId, type RunEnvironment, runPooledScript, runScript } from './run-script.js';
import {
  type CodecallSession,
  DEFAULT_MAX_LIVE_SESSIONS,
  DEFAULT_SESSION_IDLE_MS,
  InterpreterSession,
  type SessionOptions,
} from './session.js';
import { SessionSlots } from './session-slots.js';
import { defaultStateRoot, prepareStateDirectories, type StateDirectories } from './state-directory.js';
import { type PoolOptions, resolvePoolSize, WarmPool } from './warm-pool.js';

/** Default name of the generated module (`from tools import ...`). */
export const DEFAULT_MODULE_NAME = 'tools';
/** Default Python command; resolved once to the real interpreter. */
export const DEFAULT_PYTHON = 'python3';

/** Options of {@link createCodecall}. Every field is optional. */
export interface CodecallOptions {
  /** Host tools the script can call. */
  readonly tools?: readonly Tool<never, unknown>[] | readonly Tool[];
  /** Built-in tool sets: `files` (read_file, write_file, list_files, search_files rooted at `workspace`). */
  readonly builtinTools?: readonly string[];
  /** Folder the built-in file tools are confined to (default: the current directory). */
  readonly workspace?: string;
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
}

/** The `execute_code` tool as a provider-neutral definition: name, description, JSON input schema. */
export interface ExecuteCodeToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
}

/** A configured codecall: runs scripts against a fixed set of tools. */
export interface Codecall {
  /** The configured limits (after defaults). */
  readonly limits: Limits;
  /** Name of the generated module. */
  readonly moduleName: string;
  /** Runs a script. Resolves with the result for every failure of the script; rejects for host problems. */
  execute(code: string, options?: ExecuteOptions): Promise<ExecuteResult>;
  /** The model-facing description of `execute_code`, from the real tool list and the configured limits. */
  describe(): Promise<string>;
  /** Name, description and JSON input schema of `execute_code`. */
  toolDefinition(): Promise<ExecuteCodeToolDefinition>;
  /** The generated Python module (what `codecall stubs` prints). */
  generateModule(): Promise<GeneratedPythonModule>;
  /** Upstream MCP servers and their health (connects to them if not yet connected). */
  toolSources(): Promise<readonly { readonly name: string; readonly status: ToolSourceStatus }[]>;
  /** The isolation runs get here (`bubblewrap` or `none`). */
  isolation(): Promise<'bubblewrap' | 'none'>;
  /**
   * Starts a session: one interpreter kept alive (started on the first `execute`) whose variables and imports persist
   * between `execute` calls. Same isolation, environment and limits as a fresh run.
   * @throws CodecallError `CLOSED` after `close()`, `INVALID_CONFIG` for bad options.
   */
  session(options?: SessionOptions): CodecallSession;
  /** Kills every run in progress (status `aborted`), sessions and pooled interpreters, and closes upstream connections. */
  close(): Promise<void>;
}

/** Names of the options `createCodecall` accepts; anything else is a configuration error. */
export const CODECALL_OPTION_NAMES: ReadonlySet<string> = new Set([
  'tools',
  'builtinTools',
  'workspace',
  'moduleName',
  'python',
  'sandbox',
  'limits',
  'mcpServers',
  'env',
  'envPassthrough',
  'network',
  'stateDir',
  'pool',
  'sessions',
]);

const SESSION_OPTIONS = new Set(['limits', 'idleTimeoutMs']);

const SANDBOX_MODES: readonly SandboxMode[] = ['auto', 'bubblewrap', 'none'];

/** Directory of the shipped Python runtime (`python/` at the package root). */
export const RUNTIME_DIR = fileURLToPath(new URL('../../python/', import.meta.url));

interface Prepared {
  readonly environment: RunEnvironment;
  readonly generated: GeneratedPythonModule;
  readonly failedSources: readonly { name: string; error: string }[];
}

/**
 * Creates a codecall. Returns synchronously after checking the configuration; the interpreter, the sandbox and
 * upstream servers are set up on first use.
 * @throws CodecallError `INVALID_CONFIG` / `INVALID_TOOL` / `DUPLICATE_TOOL` naming the bad value.
 */
export function createCodecall(options: CodecallOptions = {}): Codecall {
  if (typeof options !== 'object' || options === null) {
    throw new CodecallError('INVALID_CONFIG', 'createCodecall takes an options object');
  }
  for (const key of Object.keys(options)) {
    if (!CODECALL_OPTION_NAMES.has(key)) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `unknown option "${key}"; known options: ${[...CODECALL_OPTION_NAMES].join(', ')}`,
        { key },
      );
    }
  }
  const limits = resolveLimits(options.limits);
  const moduleName = options.moduleName ?? DEFAULT_MODULE_NAME;
  const sandbox = options.sandbox ?? 'auto';
  if (!SANDBOX_MODES.includes(sandbox)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `sandbox must be one of ${SANDBOX_MODES.join(', ')}, got ${JSON.stringify(sandbox)}`,
      { sandbox },
    );
  }
  const python = options.python ?? DEFAULT_PYTHON;
  if (typeof python !== 'string' || python.length === 0) {
    throw new CodecallError('INVALID_CONFIG', `python must be a command or path, got ${JSON.stringify(python)}`);
  }
  const workspace = resolvePath(options.workspace ?? process.cwd());
  const staticTools: RegisteredTool[] = [
    ...resolveBuiltinTools({ names: options.builtinTools ?? [], workspace }).map((tool) => registerTool(tool)),
    ...(options.tools ?? []).map((tool) => registerTool(tool as Tool)),
  ];
  // Checks wire-name uniqueness now, so a duplicate is a configuration error at creation.
  createToolRegistry(staticTools);
  // Generated once up front: a bad module name or tool name surfaces here, not at the first run (and runs reuse it).
  const staticModule =
    Object.keys(options.mcpServers ?? {}).length === 0
      ? generatePythonModule({ moduleName, tools: staticTools.map((tool) => tool.descriptor), modules: [] })
      : undefined;
  const poolSize = resolvePoolSize(options.pool);
  const sessionsOptions = resolveSessionsOptions(options.sessions);
  const stateRoot = resolvePath(options.stateDir ?? defaultStateRoot());
  // Checked now (this imports no MCP SDK code), so a bad server entry is a configuration error at creation.
  const mcpServers = parseMcpServers(options.mcpServers ?? {});
  const mcpServerNames = Object.keys(mcpServers);

  let closed = false;
  let directories: StateDirectories | undefined;
  let runnerPromise: Promise<SandboxRunner> | undefined;
  let sourcesPromise: Promise<ToolSource[]> | undefined;
  let prepared: { key: string; value: Promise<Prepared> } | undefined;
  const liveRuns = new Set<(reason: LimitReason) => void>();
  const pendingRuns = new Set<Promise<unknown>>();
  const pendingCleanups = new Set<Promise<void>>();
  const sessions = new Set<InterpreterSession>();
  const slots = new SessionSlots(sessionsOptions.maxLive);
  // Cleanup (leftover processes, sandbox resources, run directories) runs after the result is returned; close()
  // waits for it.
  const deferCleanup = (cleanup: Promise<void>): void => {
    const tracked = cleanup.catch(() => {});
    pendingCleanups.add(tracked);
    void tracked.then(() => pendingCleanups.delete(tracked));
  };
  const pool =
    poolSize > 0
      ? new WarmPool({
          size: poolSize,
          limits,
          launch: (environment) => launchInterpreter(environment, { runId: createRunId(), limits, mode: 'pooled' }),
          deferCleanup,
        })
      : undefined;

  const getSources = (): Promise<ToolSource[]> => {
    if (mcpServerNames.length === 0) return Promise.resolve([]);
    sourcesPromise ??= import('../mcp-client/upstream-tool-source.js').then((module) =>
      mcpServerNames.map((name) => module.createMcpToolSource(name, mcpServers[name] as McpServerConfig)),
    );
    return sourcesPromise;
  };

  const prepare = async (): Promise<Prepared> => {
    if (closed) throw new CodecallError('CLOSED', 'this codecall is closed; create a new one');
    // Without upstream servers the tool list never changes: every run after the first reuses the same preparation.
    if (mcpServerNames.length === 0 && prepared !== undefined) return prepared.value;
    directories ??= prepareStateDirectories(stateRoot);
    runnerPromise ??= createSandboxRunner(sandbox);
    const sources = await getSources();
    const listings = await Promise.all(
      sources.map(async (source) => {
        try {
          return { source, listing: await source.load() };
        } catch (error) {
          return { source, error: error instanceof Error ? error.message : String(error) };
        }
      }),
    );
    const modules: ToolModuleDescriptor[] = [];
    const dynamicTools: RegisteredTool[] = [];
    const failedSources: { name: string; error: string }[] = [];
    for (const entry of listings) {
      if ('error' in entry) {
        failedSources.push({ name: entry.source.name, error: entry.error ?? 'failed' });
        continue;
      }
      modules.push({
        name: entry.source.name,
        description: entry.listing.description,
        tools: entry.listing.tools.map((tool: RegisteredTool) => tool.descriptor),
      });
      dynamicTools.push(...entry.listing.tools);
    }
    const key = JSON.stringify([
      modules.map((module) => [module.name, module.tools.map((tool) => tool.name)]),
      failedSources,
    ]);
    if (prepared?.key === key) return prepared.value;
    const value = (async (): Promise<Prepared> => {
      const [interpreter, runner] = await Promise.all([resolvePythonInterpreter(python), runnerPromise]);
      if (interpreter.stdlibModuleNames.includes(moduleName)) {
        throw new CodecallError(
          'INVALID_CONFIG',
          `moduleName "${moduleName}" is a module of Python's standard library and would hide it; choose another name`,
          { moduleName },
        );
      }
      const generated =
        modules.length === 0 && staticModule !== undefined
          ? staticModule
          : generatePythonModule({ moduleName, tools: staticTools.map((tool) => tool.descriptor), modules });
      const modulesRoot = (directories as StateDirectories).modules;
      const [moduleDir, runtimeDir] = await Promise.all([
        materializeModule(modulesRoot, generated.files, interpreter.executable),
        readPythonFiles(RUNTIME_DIR).then((files) => materializeModule(modulesRoot, files, interpreter.executable)),
      ]);
      const registry: ToolRegistry = createToolRegistry([...staticTools, ...dynamicTools]);
      const rootFunctions = generated.functions.filter((fn) => fn.module === moduleName).map((fn) => fn.pythonName);
      return {
        generated,
        failedSources,
        environment: {
          interpreter,
          runner: runner as SandboxRunner,
          tools: registry,
          modulePaths: [moduleDir],
          runtimeDir,
          runsRoot: (directories as StateDirectories).runs,
          outputRoot: (directories as StateDirectories).outputs,
          environmentExtra: options.env,
          environmentPassthrough: options.envPassthrough,
          network: options.network ?? false,
          hintContext: {
            moduleName,
            functionNames: rootFunctions,
            submoduleNames: [
              ...new Set(
                generated.functions
                  .filter((fn) => fn.module !== moduleName)
                  .map((fn) => fn.module.slice(moduleName.length + 1)),
              ),
            ],
          },
        },
      };
    })();
    prepared = { key, value };
    value.catch(() => {
      if (prepared?.value === value) prepared = undefined;
    });
    return value;
  };

  const codecall: Codecall = {
    limits,
    moduleName,
    async execute(code, executeOptions = {}) {
      if (typeof code !== 'string') {
        throw new CodecallError('INVALID_CONFIG', `execute takes the script as a string, got ${typeof code}`);
      }
      const runLimits =
        executeOptions.timeoutMs === undefined && executeOptions.limits === undefined
          ? limits
          : resolveLimits(
              {
                ...executeOptions.limits,
                ...(executeOptions.timeoutMs !== undefined ? { timeoutMs: executeOptions.timeoutMs } : {}),
              },
              limits,
            );
      const { environment } = await prepare();
      const pooled = await pool?.take(environment, runLimits);
      let stopRun: ((reason: LimitReason) => void) | undefined;
      const runOptions = {
        limits: runLimits,
        signal: executeOptions.signal,
        onStart: (stop: (reason: LimitReason) => void) => {
          stopRun = stop;
          liveRuns.add(stop);
          if (closed) stop('aborted');
        },
        deferCleanup,
      };
      const run =
        pooled !== undefined
          ? runPooledScript(environment, pooled, code, runOptions)
          : runScript(environment, code, runOptions);
      pendingRuns.add(run);
      try {
        return await run;
      } finally {
        pool?.refillSoon(environment);
        pendingRuns.delete(run);
        if (stopRun !== undefined) liveRuns.delete(stopRun);
      }
    },
    async describe() {
      const { generated, failedSources, environment } = await prepare();
      pool?.fill(environment);
      return describeExecuteCodeTool({
        moduleName,
        functions: generated.functions,
        limits,
        isolation: environment.runner.isolation,
        isolationWarning: environment.runner.isolationWarning,
        network: options.network ?? false,
        failedSources,
      });
    },
    async toolDefinition() {
      return {
        name: EXECUTE_CODE_TOOL_NAME,
        description: await codecall.describe(),
        inputSchema: structuredClone(executeCodeInputSchema) as unknown as JsonSchema,
      };
    },
    async generateModule() {
      return (await prepare()).generated;
    },
    async toolSources() {
      await prepare().catch(() => undefined);
      const sources = await getSources();
      return sources.map((source) => ({ name: source.name, status: source.status() }));
    },
    async isolation() {
      runnerPromise ??= createSandboxRunner(sandbox);
      const runner = await runnerPromise;
      return runner.isolation;
    },
    session(sessionOptions = {}) {
      if (closed) throw new CodecallError('CLOSED', 'this codecall is closed; create a new one');
      checkSessionOptions(sessionOptions);
      const session = new InterpreterSession({
        context: {
          prepare: async () => (await prepare()).environment,
          slots,
          deferCleanup,
          onClose: (closedSession) => sessions.delete(closedSession),
        },
        limits: sessionOptions.limits === undefined ? limits : resolveLimits(sessionOptions.limits, limits),
        idleTimeoutMs: sessionOptions.idleTimeoutMs ?? sessionsOptions.idleTimeoutMs,
      });
      sessions.add(session);
      return session;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const stop of liveRuns) stop('aborted');
      const poolClosed = pool?.close();
      await Promise.allSettled([...sessions].map((session) => session.close()));
      await poolClosed;
      await Promise.allSettled([...pendingRuns]);
      while (pendingCleanups.size > 0) await Promise.allSettled([...pendingCleanups]);
      const sources = sourcesPromise ? await sourcesPromise.catch(() => []) : [];
      await Promise.allSettled(sources.map((source) => source.close()));
    },
  };
  return codecall;
}

function positiveInteger(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new CodecallError('INVALID_CONFIG', `${name} must be a positive integer, got ${JSON.stringify(value)}`, {
      [name]: value,
    });
  }
  return value;
}

function resolveSessionsOptions(value: unknown): { readonly maxLive: number; readonly idleTimeoutMs: number } {
  if (value === undefined) return { maxLive: DEFAULT_MAX_LIVE_SESSIONS, idleTimeoutMs: DEFAULT_SESSION_IDLE_MS };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `sessions must be an object, got ${JSON.stringify(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (key !== 'maxLive' && key !== 'idleTimeoutMs') {
      throw new CodecallError('INVALID_CONFIG', `unknown sessions option "${key}"; known: maxLive, idleTimeoutMs`, {
        key,
      });
    }
  }
  const { maxLive, idleTimeoutMs } = value as SessionsOptions;
  return {
    maxLive: maxLive === undefined ? DEFAULT_MAX_LIVE_SESSIONS : positiveInteger(maxLive, 'sessions.maxLive'),
    idleTimeoutMs:
      idleTimeoutMs === undefined ? DEFAULT_SESSION_IDLE_MS : positiveInteger(idleTimeoutMs, 'sessions.idleTimeoutMs'),
  };
}

function checkSessionOptions(value: unknown): asserts value is SessionOptions {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', `session takes an options object, got ${JSON.stringify(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!SESSION_OPTIONS.has(key)) {
      throw new CodecallError('INVALID_CONFIG', `unknown session option "${key}"; known: limits, idleTimeoutMs`, {
        key,
      });
    }
  }
  const { idleTimeoutMs } = value as SessionOptions;
  if (idleTimeoutMs !== undefined) positiveInteger(idleTimeoutMs, 'idleTimeoutMs');
}
