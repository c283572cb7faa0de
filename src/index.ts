export { EXECUTE_CODE_TOOL_NAME, executeCodeInputSchema } from './codegen/execute-code-description.js';
export type { GeneratedFunction, GeneratedPythonModule } from './codegen/python-module.js';
export { generatePythonModule } from './codegen/python-module.js';
export type { CodecallErrorCode } from './core/errors.js';
export { CodecallAbortError, CodecallError } from './core/errors.js';
export type { IsolationLevel, LimitReason, SandboxMode } from './core/isolation.js';
export type { Limits } from './core/limits.js';
export {
  DEFAULT_LIMITS,
  DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_MAX_OPEN_FILES,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_MAX_PROCESSES,
  DEFAULT_MAX_STDERR_BYTES,
  DEFAULT_MAX_STDOUT_BYTES,
  DEFAULT_MAX_TOOL_CALLS,
  DEFAULT_MEMORY_BYTES,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_TOOL_CALL_TIMEOUT_MS,
  resolveLimits,
} from './core/limits.js';
export type { Artifact, ExecuteResult, ExecuteStatus, ScriptError, StdoutTruncation } from './core/result.js';
export type { DatabaseConfig, DatabaseOptions } from './databases/database-config.js';
export { DEFAULT_MAX_ROWS, DEFAULT_STATEMENT_TIMEOUT_MS } from './databases/database-config.js';
export type { ColumnEntry, QueryResult, TableDescription, TableEntry } from './databases/query-result.js';
export { MAX_RESULT_BYTES } from './databases/query-result.js';
export { SQLITE_MAX_FILE_BYTES } from './databases/sqlite-database.js';
export type {
  Codecall,
  CodecallOptions,
  ExecuteCodeToolDefinition,
  ExecuteOptions,
  McpServerConfig,
  SessionsOptions,
} from './engine/codecall.js';
export { createCodecall, DEFAULT_MODULE_NAME, DEFAULT_PYTHON } from './engine/codecall.js';
export { formatResultForModel } from './engine/format-result.js';
export type { CellOptions, CodecallSession, SessionOptions } from './engine/session.js';
export { CELL_INTERRUPT_GRACE_MS, DEFAULT_MAX_LIVE_SESSIONS, DEFAULT_SESSION_IDLE_MS } from './engine/session.js';
export { describeExecuteCode, executeCodeToolDefinition } from './engine/tool-definition.js';
export type { PoolOptions } from './engine/warm-pool.js';
export { MAX_POOL_SIZE } from './engine/warm-pool.js';
export type { SandboxProbe, SandboxProbeOptions } from './sandbox/bubblewrap-probe.js';
export { describeSandboxProbe, probeSandbox } from './sandbox/bubblewrap-probe.js';
export type { BubblewrapRunnerOptions } from './sandbox/bubblewrap-runner.js';
export { BubblewrapRunner, createBubblewrapRunner } from './sandbox/bubblewrap-runner.js';
export type { CgroupSupport } from './sandbox/cgroups.js';
export type { PythonInterpreter } from './sandbox/interpreter.js';
export { resolvePythonInterpreter } from './sandbox/interpreter.js';
export type { SandboxRunner } from './sandbox/runner.js';
export type { SeccompArchitecture } from './sandbox/seccomp.js';
export { buildSeccompProgram } from './sandbox/seccomp.js';
export type { SandboxRunnerOptions } from './sandbox/select-runner.js';
export { createSandboxRunner } from './sandbox/select-runner.js';
export { createFileTools, createReadOnlyFileTools } from './tools/builtin-files.js';
export { BUILTIN_TOOL_SETS } from './tools/builtin-tool-sets.js';
export type { InferToolArguments, ToolDefinition } from './tools/define-tool.js';
export { defineTool } from './tools/define-tool.js';
export { ToolResultError } from './tools/tool-result.js';
export type { JsonSchema, StandardSchema, Tool, ToolContext, ToolDescriptor } from './tools/types.js';
