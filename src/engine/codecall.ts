import {
  describeExecuteCodeTool,
  EXECUTE_CODE_TOOL_NAME,
  executeCodeInputSchema,
} from '../codegen/execute-code-description.js';
import type { GeneratedPythonModule } from '../codegen/python-module.js';
import { CodecallError } from '../core/errors.js';
import { type Limits, resolveCallLimits } from '../core/limits.js';
import type { ExecuteResult } from '../core/result.js';
import { importablePackagesOf } from '../sandbox/notable-packages.js';
import type { ToolSourceStatus } from '../tools/registered-tool.js';
import type { JsonSchema } from '../tools/types.js';
import {
  type CodecallOptions,
  type ExecuteOptions,
  resolveCodecallOptions,
  resolveSessionOptions,
} from './codecall-options.js';
import { CodecallPreparation, type PreparationExtras, type Prepared } from './codecall-preparation.js';
import { launchInterpreter } from './launch/interpreter-launch.js';
import { createRunId } from './launch/run-directory.js';
import { countRunInFlight } from './launch/runs-in-flight.js';
import { leftSavedOutputs, OutputsPruner } from './result/outputs-retention.js';
import { RunTracking } from './run-tracking.js';
import { checkCode, emptyCodeResult, isEmptyCode } from './supervise/check-code.js';
import { runPooledScript, runScript } from './supervise/run-script.js';
import { type CodecallSession, InterpreterSession, type SessionOptions } from './supervise/session.js';
import { WarmPool } from './supervise/warm-pool.js';

export type { McpServerConfig } from '../mcp-client/server-config.js';
export {
  CODECALL_OPTION_NAMES,
  type CodecallOptions,
  DEFAULT_MODULE_NAME,
  DEFAULT_PYTHON,
  type ExecuteOptions,
  type RemoteOptions,
  type SessionsOptions,
} from './codecall-options.js';
export type { PreparationExtras, Prepared } from './codecall-preparation.js';
export { RUNTIME_DIR } from './codecall-preparation.js';

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
  /** Upstream MCP servers and databases, and their health (connects to the servers if not yet connected). */
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

/**
 * Creates a codecall. Returns synchronously after checking the configuration; the interpreter, the sandbox and
 * upstream servers are set up on first use.
 * @throws CodecallError `INVALID_CONFIG` / `INVALID_TOOL` / `DUPLICATE_TOOL` naming the bad value.
 */
export function createCodecall(options: CodecallOptions = {}): Codecall {
  return createLocalCodecall(options);
}

/** What the remote layer reads of a local codecall it runs beside: the preparation of its tools. */
const preparations = new WeakMap<Codecall, () => Promise<Prepared>>();

/**
 * The preparation of a codecall made here (its tools, their registry, the generated module): an agent answers the
 * tool calls of its remote runs with it.
 */
export function preparedOf(codecall: Codecall): Promise<Prepared> {
  const prepare = preparations.get(codecall);
  if (prepare === undefined) throw new CodecallError('INVALID_CONFIG', 'this codecall was not made by createCodecall');
  return prepare();
}

/**
 * {@link createCodecall} with the internal extras a remote worker needs; runs stay on this machine.
 * @throws CodecallError `INVALID_CONFIG` for the `remote` option: that is the root entry's `createCodecall`'s job.
 */
export function createLocalCodecall(options: CodecallOptions = {}, extras: PreparationExtras = {}): Codecall {
  const resolved = resolveCodecallOptions(options);
  if (options.remote !== undefined) {
    throw new CodecallError(
      'INVALID_CONFIG',
      'the remote option is handled by createCodecall of the package entry (import { createCodecall } from "codecall")',
      { option: 'remote' },
    );
  }
  const { limits, moduleName, network, workspaceMount } = resolved;
  const preparation = new CodecallPreparation(resolved, extras);
  const tracking = new RunTracking({ maxLiveSessions: resolved.sessions.maxLive });
  const pool =
    resolved.poolSize > 0
      ? new WarmPool({
          size: resolved.poolSize,
          limits,
          launch: (environment) => launchInterpreter(environment, { runId: createRunId(), limits, mode: 'pooled' }),
          deferCleanup: tracking.deferCleanup,
        })
      : undefined;
  // Started now, in the background; the first run waits for it (see the `warmUp` option).
  const warmedUp = resolved.warmUp ? preparation.warmUp() : undefined;
  const prepare = async (): Promise<Prepared> => {
    tracking.assertOpen();
    if (warmedUp === undefined) return preparation.prepare();
    const [prepared] = await Promise.all([preparation.prepare(), warmedUp]);
    return prepared;
  };
  // Describing the tool needs the module, not the argument checks: it does not wait for the warm-up (an MCP
  // client's tools/list would otherwise wait for the checker to load and compile the first schema).
  const prepareToDescribe = async (): Promise<Prepared> => {
    tracking.assertOpen();
    return preparation.prepare();
  };
  // Made with the first prepared environment (it names the outputs folder); each run and session start asks for a
  // prune, saying whether the run left outputs (a session's cells are not seen: a session counts as saving).
  let pruner: OutputsPruner | undefined;
  let sessionStarted = false;
  const pruneSoon = (prepared: Prepared, saved: boolean) => {
    pruner ??= new OutputsPruner(prepared.environment.outputRoot, resolved.outputs, {
      stampDirectory: prepared.hostCacheDirectory,
    });
    pruner.schedule(saved);
  };

  const codecall: Codecall = {
    limits,
    moduleName,
    async execute(code, executeOptions = {}) {
      checkCode(code);
      const runLimits = resolveCallLimits(limits, executeOptions);
      const prepared = await prepare();
      const { environment } = prepared;
      if (isEmptyCode(code)) return emptyCodeResult(environment.runner.isolation);
      // The pool starts no replacement right beside a run: it waits for a quiet moment (see WarmPool).
      const endRunInFlight = countRunInFlight();
      // A run that threw may have left files: it counts as saving.
      let saved = true;
      try {
        const pooled = await pool?.take(environment, runLimits);
        const result = await tracking.track((onStart) => {
          const runOptions = {
            limits: runLimits,
            signal: executeOptions.signal,
            onStart,
            deferCleanup: tracking.deferCleanup,
            onEvent: executeOptions.onEvent,
            approveToolCall: executeOptions.approveToolCall,
          };
          return pooled !== undefined
            ? runPooledScript(environment, pooled, code, runOptions)
            : runScript(environment, code, runOptions);
        });
        saved = leftSavedOutputs(result);
        return result;
      } finally {
        endRunInFlight();
        pool?.runEnded();
        pruneSoon(prepared, saved);
      }
    },
    async describe() {
      const { generated, failedSources, environment } = await prepareToDescribe();
      pool?.fill(environment);
      return describeExecuteCodeTool({
        moduleName,
        functions: generated.functions,
        submodules: generated.submodules,
        limits,
        isolation: environment.runner.isolation,
        isolationWarning: environment.runner.isolationWarning,
        network,
        workspaceMount,
        failedSources,
        importable: importablePackagesOf(environment.interpreter.siteModuleNames),
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
      return (await prepareToDescribe()).generated;
    },
    async toolSources() {
      await prepare().catch(() => undefined);
      const sources = await preparation.sources();
      return sources.map((source) => ({ name: source.name, status: source.status() }));
    },
    async isolation() {
      return (await preparation.runner()).isolation;
    },
    session(sessionOptions = {}) {
      tracking.assertOpen();
      const { limits: sessionLimits, idleTimeoutMs } = resolveSessionOptions(sessionOptions, {
        limits,
        idleTimeoutMs: resolved.sessions.idleTimeoutMs,
      });
      return tracking.addSession(
        new InterpreterSession({
          context: tracking.sessionContext(async () => {
            const prepared = await prepare();
            // Asked for when the session starts (or restarts) its interpreter; runs ask after each run.
            sessionStarted = true;
            pruneSoon(prepared, true);
            return prepared.environment;
          }),
          limits: sessionLimits,
          idleTimeoutMs,
        }),
      );
    },
    async close() {
      await tracking.close({
        pool,
        closeSources: () => preparation.closeSources(),
        closeRunner: () => preparation.closeRunner(),
      });
      // What the last runs saved is pruned before close resolves (a scheduled prune would otherwise be dropped); the
      // cells of sessions are not seen one by one, so a codecall that started one prunes at close.
      await pruner?.close({ saved: sessionStarted });
    },
  };
  preparations.set(codecall, prepare);
  return codecall;
}
