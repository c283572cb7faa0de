import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The public API, pinned: every name each entry point exports, values and types. A name added to or dropped from an
 * entry fails here, so the change is made on purpose (and the README and docs follow it).
 */
const ROOT_VALUES = [
  'CodecallAbortError',
  'CodecallError',
  'DEFAULT_LIMITS',
  'createCodecall',
  'defineTool',
  'describeExecuteCode',
  'describeSandboxProbe',
  'formatResultForModel',
  'probeSandbox',
];
const ROOT_TYPES = [
  'ApprovalCheck',
  'ApproveToolCall',
  'Artifact',
  'ArtifactEvent',
  'OutputEvent',
  'RunEndEvent',
  'RunEvent',
  'RunEventListener',
  'RunStartEvent',
  'RunTrace',
  'TraceCallStatus',
  'TracedCall',
  'ToolApprovalDecision',
  'ToolApprovalRequest',
  'ToolCallEndEvent',
  'ToolCallStartEvent',
  'CellOptions',
  'Codecall',
  'CodecallErrorCode',
  'CodecallOptions',
  'CodecallSession',
  'DatabaseConfig',
  'DatabaseOptions',
  'ExecuteCodeToolDefinition',
  'ExecuteOptions',
  'ExecuteResult',
  'ExecuteStatus',
  'GeneratedFunction',
  'GeneratedPythonModule',
  'InferToolArguments',
  'IsolationLevel',
  'JsonSchema',
  'LimitReason',
  'Limits',
  'McpServerConfig',
  'PoolOptions',
  'QueryResult',
  'RemoteFailureReason',
  'RemoteOptions',
  'SandboxMode',
  'SandboxProbe',
  'SandboxProbeOptions',
  'ScriptError',
  'SessionOptions',
  'SessionsOptions',
  'StandardSchema',
  'StdoutTruncation',
  'Tool',
  'ToolContext',
  'ToolDefinition',
];
const MCP_VALUES = ['createExecuteCodeServer', 'createMcpToolSource', 'parseMcpServers', 'serveHttp', 'serveStdio'];
const MCP_TYPES = [
  'ExecuteCodeServerOptions',
  'HttpExecuteCodeServer',
  'HttpSessionLimits',
  'McpServerConfig',
  'ServeHttpOptions',
  'ServeStdioOptions',
  'StdioExecuteCodeServer',
];

const REMOTE_VALUES = [
  'DEFAULT_QUEUE_NAME',
  'DEFAULT_WORKER_CONCURRENCY',
  'HEARTBEAT_INTERVAL_MS',
  'HEARTBEAT_TTL_MS',
  'IDLE_CODECALL_MS',
  'MAX_RUN_ATTEMPTS',
  'MAX_SENT_ARTIFACT_BYTES',
  'MAX_WORKER_CODECALLS',
  'createRemoteCodecall',
  'startFleetWorker',
];
const REMOTE_TYPES = [
  'FleetWorker',
  'FleetWorkerOptions',
  'RemoteCodecall',
  'RemoteExecuteOptions',
  'RemoteFailureReason',
  'RemoteOptions',
  'WorkerCodecallOptions',
];

function sorted(names: readonly string[]): string[] {
  return [...names].sort();
}

/** Every name a module exports, types included, as the TypeScript compiler sees the entry's declarations. */
function exportedNames(files: readonly string[]): Map<string, string[]> {
  const program = ts.createProgram(
    files.map((file) => join(repositoryRoot, file)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  const names = new Map<string, string[]>();
  for (const file of files) {
    const source = program.getSourceFile(join(repositoryRoot, file));
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`${file}: not a module`);
    names.set(file, sorted(checker.getExportsOfModule(module).map((symbol) => symbol.name)));
  }
  return names;
}

describe('public API', () => {
  it('the root entry exports exactly the curated values at run time', async () => {
    const root = await import('../src/index.js');
    expect(sorted(Object.keys(root))).toEqual(sorted(ROOT_VALUES));
  });

  it('codecall/mcp exports exactly the curated values at run time', async () => {
    const mcp = await import('../src/mcp-server/index.js');
    expect(sorted(Object.keys(mcp))).toEqual(sorted(MCP_VALUES));
  });

  it('codecall/remote exports exactly the curated values at run time', async () => {
    const remote = await import('../src/remote/index.js');
    expect(sorted(Object.keys(remote))).toEqual(sorted(REMOTE_VALUES));
  });

  it('both entries export exactly the curated values and types to TypeScript', { timeout: 120_000 }, () => {
    const names = exportedNames(['src/index.ts', 'src/mcp-server/index.ts', 'src/remote/index.ts']);
    expect(names.get('src/remote/index.ts')).toEqual(sorted([...REMOTE_VALUES, ...REMOTE_TYPES]));
    expect(names.get('src/index.ts')).toEqual(sorted([...ROOT_VALUES, ...ROOT_TYPES]));
    expect(names.get('src/mcp-server/index.ts')).toEqual(sorted([...MCP_VALUES, ...MCP_TYPES]));
  });
});
