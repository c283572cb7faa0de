/**
 * `codecall`: one `execute_code` tool for AI agents. This entry holds what a user of the library calls and the types
 * they name in their own code (options, results, tools, sessions, errors); everything else is internal. MCP lives in
 * the `codecall/mcp` entry, the worker fleet in `codecall/remote`.
 */

export type { GeneratedFunction, GeneratedPythonModule } from './codegen/python-module.js';
export type { CodecallErrorCode } from './core/errors.js';
export { CodecallAbortError, CodecallError } from './core/errors.js';
export type { IsolationLevel, LimitReason, SandboxMode } from './core/isolation.js';
export type { Limits } from './core/limits.js';
export { DEFAULT_LIMITS } from './core/limits.js';
export type {
  Artifact,
  ExecuteResult,
  ExecuteStatus,
  RemoteFailureReason,
  RunTrace,
  ScriptError,
  StdoutTruncation,
  TraceCallStatus,
  TracedCall,
} from './core/result.js';
export type { DatabaseConfig, DatabaseOptions } from './databases/database-config.js';
export type { QueryResult } from './databases/query-result.js';
export type {
  Codecall,
  CodecallOptions,
  ExecuteCodeToolDefinition,
  ExecuteOptions,
  McpServerConfig,
  RemoteOptions,
  SessionsOptions,
} from './engine/codecall.js';
export { formatResultForModel } from './engine/result/format-result.js';
export { describeExecuteCode } from './engine/result/tool-definition.js';
export type {
  ArtifactEvent,
  OutputEvent,
  RunEndEvent,
  RunEvent,
  RunEventListener,
  RunStartEvent,
  ToolCallEndEvent,
  ToolCallStartEvent,
} from './engine/supervise/run-events.js';
export type { CellOptions, CodecallSession, SessionOptions } from './engine/supervise/session.js';
export type { PoolOptions } from './engine/supervise/warm-pool.js';
export { createCodecall } from './remote/create-codecall.js';
export type { SandboxProbe, SandboxProbeOptions } from './sandbox/bubblewrap-probe.js';
export { describeSandboxProbe, probeSandbox } from './sandbox/bubblewrap-probe.js';
export type { InferToolArguments, ToolDefinition } from './tools/define-tool.js';
export { defineTool } from './tools/define-tool.js';
export type { ApproveToolCall, ToolApprovalDecision, ToolApprovalRequest } from './tools/tool-approval.js';
export type { ApprovalCheck, JsonSchema, StandardSchema, Tool, ToolContext } from './tools/types.js';
