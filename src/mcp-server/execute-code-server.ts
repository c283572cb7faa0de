import { basename } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type {
  CallToolResult,
  EmbeddedResource,
  ImageContent,
  Tool as McpTool,
  TextContent,
} from '@modelcontextprotocol/sdk/types.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { errorMessage } from '../core/errors.js';
import { codecallVersion } from '../core/package-version.js';
import type { Artifact, ExecuteResult } from '../core/result.js';
import type { Codecall } from '../engine/codecall.js';
import { IMAGE_MEDIA_TYPES, readImageFile, readRegularFile } from '../engine/result/artifact-files.js';
import { formatResultForModel } from '../engine/result/format-result.js';
import type { CodecallSession } from '../engine/supervise/session.js';
import { ClientLogLevel, clientSupportsElicitation, elicitationApprover, mcpRunListener } from './run-notifications.js';

/** Images returned as MCP image content per call at most; further images stay listed in `structuredContent`. */
export const MAX_IMAGE_CONTENTS = 10;
/** Largest image file returned as MCP image content (base64 grows it by a third); larger ones stay listed only. */
export const MAX_IMAGE_CONTENT_BYTES = 5 * 1024 * 1024;

/** What the MCP server needs from a codecall: its tool definition and sessions. */
export type ExecuteCodeHost = Pick<Codecall, 'toolDefinition' | 'session'>;

/** Arguments of one `execute_code` call. */
interface ExecuteCodeArguments {
  readonly code: string;
  /** Start from a fresh interpreter before running `code`. */
  readonly reset: boolean;
}

/** What the served tool adds to the description: state persists per MCP connection. */
export const SESSION_DESCRIPTION_NOTE =
  ' Variables, imports and functions persist between calls of this tool in the same conversation, like notebook ' +
  'cells; pass "reset": true to start from a fresh interpreter.';

/** JSON Schema of the `reset` argument of the served `execute_code`. */
const RESET_PROPERTY = Object.freeze({
  type: 'boolean',
  description: 'Discard the variables of earlier calls and start from a fresh interpreter before running the code.',
  default: false,
});

/** Options of {@link createExecuteCodeServer}. */
export interface ExecuteCodeServerOptions {
  /**
   * Prepares the tool description and starts the connection's session interpreter now, while the client connects,
   * rather than on its first call (default false; `serveStdio` sets it: its one connection is the whole process).
   */
  readonly startEarly?: boolean;
}

/**
 * Creates the MCP server of one client connection: it lists `execute_code` (description from
 * `codecall.toolDefinition()`, so it names the real functions and limits) and runs each call as a cell of the
 * connection's own session (started on the first call, closed with the server), so state persists between calls;
 * `reset: true` starts the session afresh first.
 * The response's text is `formatResultForModel(result)`, `isError` is set when the status is not `success`,
 * `structuredContent` is the result object, and images the script left in its artifacts come back as image content.
 * While a call runs, the client gets `notifications/progress` (when it passed `_meta.progressToken`) and
 * `notifications/message` log messages for the script's tool calls (at or above the level it set). A tool call that
 * needs approval is put to the person at the client through elicitation when the client supports it; otherwise the
 * codecall's `approveToolCall` decides (none: denied).
 * No `outputSchema` is declared: clients would then have to validate every result against it, and several show the
 * model `structuredContent` in place of the text when one is declared.
 */
export function createExecuteCodeServer(codecall: ExecuteCodeHost, options: ExecuteCodeServerOptions = {}): Server {
  // The low-level Server (not McpServer) because the tool's description and JSON input schema come from the
  // codecall asynchronously, after upstream servers are loaded.
  const server = new Server(
    { name: 'codecall', version: codecallVersion() },
    { capabilities: { tools: {}, logging: {} } },
  );
  const logLevel = new ClientLogLevel(server);
  let session: CodecallSession | undefined;
  if (options.startEarly === true) {
    // Empty code starts the interpreter without running a cell; a failure shows again at the first real call.
    session = codecall.session();
    void codecall.toolDefinition().catch(() => undefined);
    void session.execute('').catch(() => undefined);
  }
  const closeServer = server.close.bind(server);
  server.close = async () => {
    await closeServer();
    await session?.close();
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const definition = await codecall.toolDefinition();
    const inputSchema = definition.inputSchema as McpTool['inputSchema'];
    const tool: McpTool = {
      name: definition.name,
      title: 'Run a Python script that calls tools',
      description: definition.description + SESSION_DESCRIPTION_NOTE,
      inputSchema: { ...inputSchema, properties: { ...inputSchema.properties, reset: RESET_PROPERTY } },
      annotations: { readOnlyHint: false, openWorldHint: true },
    };
    return { tools: [tool] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const definition = await codecall.toolDefinition();
    if (request.params.name !== definition.name) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool "${request.params.name}"; this server has "${definition.name}"`,
      );
    }
    const parsed = parseArguments(definition.name, request.params.arguments);
    if (typeof parsed === 'string') return errorResult(parsed);
    let result: ExecuteResult;
    try {
      session ??= codecall.session();
      if (parsed.reset) await session.reset();
      result = await session.execute(parsed.code, {
        signal: extra.signal,
        onEvent: mcpRunListener({
          progressToken: request.params._meta?.progressToken,
          sendNotification: extra.sendNotification,
          logLevel,
        }),
        // A person at the client decides when the client can ask one; otherwise the codecall's own hook does.
        ...(clientSupportsElicitation(server) ? { approveToolCall: elicitationApprover(server, extra.requestId) } : {}),
      });
    } catch (error) {
      const reason = errorMessage(error);
      if (extra.signal.aborted) return errorResult(`${definition.name} was cancelled: ${reason}`);
      return errorResult(`codecall could not run the script: ${reason}`);
    }
    return toCallToolResult(result);
  });
  return server;
}

/**
 * Renders an {@link ExecuteResult} as an MCP tool result: the model-facing text, then the images among the
 * artifacts (at most {@link MAX_IMAGE_CONTENTS}, each at most {@link MAX_IMAGE_CONTENT_BYTES}), `isError` when the
 * status is not `success`, and the whole result as `structuredContent`.
 */
export async function toCallToolResult(result: ExecuteResult): Promise<CallToolResult> {
  const text: TextContent = { type: 'text', text: formatResultForModel(result) };
  const images = await imageContents(result.artifacts ?? []);
  const resources = await textResourceContents(result.artifacts ?? []);
  return {
    content: [text, ...images, ...resources],
    structuredContent: JSON.parse(JSON.stringify(result)) as Record<string, unknown>,
    isError: result.status !== 'success',
  };
}

/** Options of {@link serveStdio}; the defaults are the process's own stdin and stdout. */
export interface ServeStdioOptions {
  readonly input?: Readable | undefined;
  readonly output?: Writable | undefined;
}

/** A running stdio MCP server. */
export interface StdioExecuteCodeServer {
  /** Resolves when the client has gone (stdin ended) or {@link StdioExecuteCodeServer.close} was called. */
  readonly closed: Promise<void>;
  /** Stops serving; the codecall itself stays open (close it after). */
  close(): Promise<void>;
}

/**
 * Serves `execute_code` over stdio (newline-delimited JSON-RPC on stdin/stdout), as MCP clients expect of a
 * server they start themselves. Nothing else may write to stdout meanwhile. Resolves once serving; `closed`
 * resolves when the client closes stdin, after which the caller closes the codecall.
 */
export async function serveStdio(
  codecall: ExecuteCodeHost,
  options: ServeStdioOptions = {},
): Promise<StdioExecuteCodeServer> {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const server = createExecuteCodeServer(codecall, { startEarly: true });
  const { promise: closed, resolve: markClosed } = promiseWithResolvers();
  server.onclose = markClosed;
  // The SDK's stdio transport does not notice the end of its input on its own.
  const closeOnEnd = (): void => {
    void server.close();
  };
  input.once('end', closeOnEnd);
  input.once('close', closeOnEnd);
  await server.connect(new StdioServerTransport(input, output));
  return {
    closed,
    async close() {
      input.off('end', closeOnEnd);
      input.off('close', closeOnEnd);
      await server.close();
      await closed;
    },
  };
}

function parseArguments(toolName: string, args: Record<string, unknown> | undefined): ExecuteCodeArguments | string {
  const code = args?.code;
  if (typeof code !== 'string') {
    return `${toolName}: argument 'code' must be a string holding the Python script to run (got ${code === undefined ? 'nothing' : typeof code})`;
  }
  const reset = args?.reset ?? false;
  if (typeof reset !== 'boolean') return `${toolName}: argument 'reset' must be true or false (got ${typeof reset})`;
  return { code, reset };
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** Text artifacts (`text/*`, JSON) up to this size come back as embedded resources, the others by name in the text. */
export const MAX_TEXT_RESOURCE_BYTES = 64 * 1024;
/** Embedded text resources in one response at most. */
export const MAX_TEXT_RESOURCES = 10;

function isTextType(mimeType: string): boolean {
  return mimeType.startsWith('text/') || mimeType === 'application/json';
}

// A remote client cannot open a host path: small text files travel inside the response, named by a URI of their own.
async function textResourceContents(artifacts: readonly Artifact[]): Promise<EmbeddedResource[]> {
  const resources: EmbeddedResource[] = [];
  for (const artifact of artifacts) {
    if (resources.length >= MAX_TEXT_RESOURCES) break;
    if (!isTextType(artifact.mimeType) || artifact.bytes > MAX_TEXT_RESOURCE_BYTES) continue;
    const bytes = await readRegularFile(artifact.path, MAX_TEXT_RESOURCE_BYTES);
    if (typeof bytes === 'string') continue;
    resources.push({
      type: 'resource',
      resource: {
        uri: `codecall-artifact:${encodeURIComponent(basename(artifact.path))}`,
        mimeType: artifact.mimeType,
        text: bytes.toString('utf8'),
      },
    });
  }
  return resources;
}

async function imageContents(artifacts: readonly Artifact[]): Promise<ImageContent[]> {
  const images: ImageContent[] = [];
  for (const artifact of artifacts) {
    if (images.length >= MAX_IMAGE_CONTENTS) break;
    if (!IMAGE_MEDIA_TYPES.has(artifact.mimeType) || artifact.bytes > MAX_IMAGE_CONTENT_BYTES) continue;
    // Checked like every image sent to a model: a regular file, no link, within the cap, bytes of an image type.
    const image = await readImageFile(artifact.path, MAX_IMAGE_CONTENT_BYTES);
    if (typeof image === 'string') continue;
    images.push({ type: 'image', data: image.data.toString('base64'), mimeType: image.mediaType });
  }
  return images;
}

function promiseWithResolvers(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}
