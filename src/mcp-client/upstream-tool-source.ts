import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { CodecallError } from '../core/errors.js';
import { codecallVersion } from '../core/package-version.js';
import { isProcessAlive } from '../core/processes.js';
import type {
  ArgumentCheck,
  RegisteredTool,
  ToolSource,
  ToolSourceListing,
  ToolSourceNarrowing,
  ToolSourceStatus,
} from '../tools/registered-tool.js';
import type { NormalisedSchema } from '../tools/schema.js';
import { normaliseInputSchema, normaliseOutputSchema } from '../tools/schema.js';
import type { ToolContext, ToolDescriptor } from '../tools/types.js';
import type { ArgumentValidator } from '../tools/validation.js';
import { checkArgumentShape, createArgumentValidator } from '../tools/validation.js';
import type { McpServerConfig } from './server-config.js';
import { isHttpServerConfig, parseMcpServerConfig } from './server-config.js';
import { describeNarrowing, narrowTools } from './tool-narrowing.js';
import { convertUpstreamResult, errorTextOf } from './upstream-result.js';

/** Time a server gets to start and answer `initialize`, and then `tools/list`. */
export const MCP_CONNECT_TIMEOUT_MS = 30_000;
/** After a failed start, loads and calls report the same failure for this long instead of starting it again. */
export const MCP_FAILED_START_RETRY_DELAY_MS = 10_000;
/**
 * The SDK's own per-request timeout for `tools/call`. The engine's `toolCallTimeoutMs` governs through the call's
 * AbortSignal; the SDK's 60 s default would otherwise cut longer configured calls short.
 */
export const MCP_CALL_TIMEOUT_MS = 24 * 60 * 60 * 1000;
/** Pages of `tools/list` read at most (a server that keeps returning a cursor is cut off). */
export const MCP_MAX_TOOL_LIST_PAGES = 100;
/** Characters of a stdio server's stderr kept to explain a failure. */
export const MCP_STDERR_TAIL_CHARACTERS = 2_000;

/** One live connection to the server. */
interface Connection {
  readonly client: Client;
  readonly transport: Transport;
  /** Stops being true when the transport closes (for stdio: the process exited). */
  alive: boolean;
}

/**
 * An upstream MCP server as a {@link ToolSource}: its tools become `tools.<name>.<tool>` in the script, with wire
 * names `<name>/<tool>`. The connection (a child process for stdio servers) starts on the first `load()` and is
 * reused across runs; a server that died is started again on the next call; close() ends it.
 * @throws CodecallError `INVALID_CONFIG` when `config` is invalid (checked here, synchronously).
 */
export function createMcpToolSource(name: string, config: McpServerConfig): ToolSource {
  return new McpToolSource(name, parseMcpServerConfig(name, config));
}

class McpToolSource implements ToolSource {
  readonly name: string;
  readonly #config: McpServerConfig;
  readonly #stderrTail = new TextTail(MCP_STDERR_TAIL_CHARACTERS);
  #connection: Connection | undefined;
  #connecting: Promise<Connection> | undefined;
  #listing: ToolSourceListing | undefined;
  #narrowing: ToolSourceNarrowing | undefined;
  #status: ToolSourceStatus = { state: 'idle' };
  #lastFailure: { readonly error: CodecallError; readonly at: number } | undefined;
  #closed = false;

  constructor(name: string, config: McpServerConfig) {
    this.name = name;
    this.#config = config;
  }

  async load(): Promise<ToolSourceListing> {
    this.#assertOpen();
    if (this.#listing !== undefined) return this.#listing;
    await this.#connect();
    if (this.#listing === undefined) throw this.#failure('listed no tools', undefined);
    return this.#listing;
  }

  status(): ToolSourceStatus {
    return this.#status;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connecting = this.#connecting;
    if (connecting !== undefined) await connecting.catch(() => undefined);
    const connection = this.#connection;
    this.#connection = undefined;
    if (connection !== undefined) await disconnect(connection);
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new CodecallError('CLOSED', `MCP server "${this.name}": its tool source was closed`, { server: this.name });
    }
  }

  /** The live connection, or a new one (listing the tools again, as the server may have changed). */
  #connect(): Promise<Connection> {
    const current = this.#connection;
    if (current !== undefined && isAlive(current)) return Promise.resolve(current);
    const failure = this.#lastFailure;
    if (
      this.#connecting === undefined &&
      failure !== undefined &&
      Date.now() - failure.at < MCP_FAILED_START_RETRY_DELAY_MS
    ) {
      return Promise.reject(failure.error);
    }
    this.#connecting ??= this.#openConnection().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #openConnection(): Promise<Connection> {
    const stale = this.#connection;
    this.#connection = undefined;
    if (stale !== undefined) await disconnect(stale);
    this.#stderrTail.clear();
    const transport = this.#createTransport();
    const client = new Client({ name: 'codecall', version: codecallVersion() }, { capabilities: {} });
    const connection: Connection = { client, transport, alive: true };
    client.onclose = () => {
      connection.alive = false;
    };
    // Transport errors also reject the requests they concern, which is where they are reported.
    client.onerror = () => undefined;
    try {
      await client.connect(transport, { timeout: MCP_CONNECT_TIMEOUT_MS });
      const { tools, narrowing } = narrowTools(this.name, await listAllTools(client), this.#config);
      this.#narrowing = narrowing;
      this.#listing = {
        description: client.getInstructions(),
        ...(narrowing === undefined ? {} : { note: describeNarrowing(narrowing) }),
        tools: tools.map((tool) => this.#registerTool(tool)),
      };
    } catch (error) {
      connection.alive = false;
      await disconnect(connection);
      // A narrowing list naming a tool the server lacks is the configuration's fault, and says so itself.
      const failure =
        error instanceof CodecallError && error.code === 'INVALID_CONFIG'
          ? error
          : this.#failure(this.#listing === undefined ? 'failed to start' : 'failed to restart', error);
      this.#status = { state: 'failed', error: failure.message };
      this.#lastFailure = { error: failure, at: Date.now() };
      throw failure;
    }
    if (this.#closed) {
      await disconnect(connection);
      throw new CodecallError('CLOSED', `MCP server "${this.name}": its tool source was closed`, { server: this.name });
    }
    this.#connection = connection;
    this.#lastFailure = undefined;
    // From now on the tail explains crashes, not the start-up banner.
    this.#stderrTail.clear();
    this.#status = {
      state: 'ready',
      toolCount: this.#listing.tools.length,
      ...(this.#narrowing === undefined ? {} : { narrowing: this.#narrowing }),
    };
    return connection;
  }

  #createTransport(): Transport {
    const config = this.#config;
    if (isHttpServerConfig(config)) {
      return new StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers } },
      });
    }
    const transport = new StdioClientTransport({
      command: config.command,
      args: [...(config.args ?? [])],
      // The SDK adds its safe default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER) under these.
      env: { ...config.env },
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer | string) => this.#stderrTail.append(String(chunk)));
    return transport;
  }

  #registerTool(tool: McpTool): RegisteredTool {
    const wireName = `${this.name}/${tool.name}`;
    const input = normaliseOrUndefined(() => normaliseInputSchema(wireName, tool.inputSchema));
    const outputSchema = tool.outputSchema;
    const output =
      outputSchema === undefined
        ? undefined
        : normaliseOrUndefined(() => normaliseOutputSchema(wireName, outputSchema));
    const descriptor: ToolDescriptor = {
      name: wireName,
      description: tool.description ?? tool.title ?? tool.annotations?.title ?? '',
      inputSchema: input?.jsonSchema ?? { type: 'object' },
      ...(output === undefined ? {} : { outputSchema: output.jsonSchema }),
    };
    // A schema codecall cannot read is left to the server, which validates its own arguments anyway.
    const validate: ArgumentValidator =
      input === undefined
        ? (args) => acceptIfObject(wireName, args)
        : createArgumentValidator({ toolName: wireName, inputSchema: input.jsonSchema, normalised: input });
    return {
      descriptor,
      module: this.name,
      checkArguments: validate,
      invoke: (args, context) => this.#call(tool.name, args, context),
    };
  }

  async #call(toolName: string, args: unknown, context: ToolContext): Promise<unknown> {
    this.#assertOpen();
    const request = { name: toolName, arguments: (args ?? {}) as Record<string, unknown> };
    const options = { signal: context.signal, timeout: MCP_CALL_TIMEOUT_MS };
    let connection = await this.#connect();
    let result: Awaited<ReturnType<Client['callTool']>>;
    try {
      try {
        result = await connection.client.callTool(request, undefined, options);
      } catch (error) {
        if (!isExpiredHttpSession(error)) throw error;
        // The server forgot the session (it restarted) and so did not run the call: new session, same call.
        this.#drop(connection);
        connection = await this.#connect();
        result = await connection.client.callTool(request, undefined, options);
      }
    } catch (error) {
      if (context.signal.aborted || error instanceof CodecallError) throw error;
      if (!connection.alive || !(error instanceof McpError)) {
        this.#drop(connection);
        throw this.#failure(`stopped during the call to ${toolName}`, error, 'it will be restarted on the next call');
      }
      throw new CodecallError(
        'MCP_SERVER_FAILED',
        `MCP server "${this.name}" rejected the call to ${toolName}: ${describeCause(error)}`,
        { server: this.name, tool: toolName, code: error.code },
      );
    }
    if ('toolResult' in result) return result.toolResult;
    const callResult = result as CallToolResult;
    if (callResult.isError === true) throw new Error(errorTextOf(callResult));
    return convertUpstreamResult(callResult, {
      server: this.name,
      tool: toolName,
      artifactsDir: context.artifactsDir,
    });
  }

  /** Forgets a connection that died or broke, so the next call starts the server (or a new session) again. */
  #drop(connection: Connection): void {
    connection.alive = false;
    if (this.#connection === connection) this.#connection = undefined;
    void disconnect(connection);
  }

  /** An error naming the server, the failure, its cause, and the end of the server's stderr when there is any. */
  #failure(what: string, cause: unknown, consequence?: string): CodecallError {
    const reason = describeCause(cause);
    const stderr = this.#stderrTail.text().trim();
    const message =
      `MCP server "${this.name}" ${what}${reason === '' ? '' : ` (${reason})`}` +
      (consequence === undefined ? '' : `; ${consequence}`) +
      (stderr === '' ? '' : `. Its stderr ends with:\n${stderr}`);
    return new CodecallError(
      'MCP_SERVER_FAILED',
      message,
      { server: this.name, cause: reason, ...(stderr === '' ? {} : { stderr }) },
      { cause },
    );
  }
}

async function listAllTools(client: Client): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MCP_MAX_TOOL_LIST_PAGES; page += 1) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: MCP_CONNECT_TIMEOUT_MS });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

// Streamable HTTP answers 404 to a request whose session the server no longer knows (the spec's signal to
// initialise again).
function isExpiredHttpSession(error: unknown): boolean {
  return error instanceof StreamableHTTPError && error.code === 404;
}

// A stdio server's exit is reported a moment after the process is gone; a call sent meanwhile would be lost.
function isAlive(connection: Connection): boolean {
  if (!connection.alive) return false;
  const { transport } = connection;
  if (!(transport instanceof StdioClientTransport)) return true;
  const pid = transport.pid;
  return pid !== null && isProcessAlive(pid);
}

async function disconnect(connection: Connection): Promise<void> {
  connection.alive = false;
  const { transport } = connection;
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    await transport.terminateSession().catch(() => undefined);
  }
  await connection.client.close().catch(() => undefined);
}

// The SDK's messages read "MCP error -32000: Connection closed"; say what happened instead.
function describeCause(cause: unknown): string {
  if (cause instanceof McpError) {
    if (cause.code === ErrorCode.ConnectionClosed) return 'the connection closed';
    if (cause.code === ErrorCode.RequestTimeout) return 'it did not answer in time';
    return cause.message.replace(/^MCP error -?\d+: /, '');
  }
  if (cause instanceof Error) return cause.message;
  return cause === undefined ? '' : String(cause);
}

function normaliseOrUndefined(normalise: () => NormalisedSchema): NormalisedSchema | undefined {
  try {
    return normalise();
  } catch {
    return undefined;
  }
}

function acceptIfObject(toolName: string, args: unknown): ArgumentCheck {
  const problem = checkArgumentShape(toolName, args);
  return problem === undefined ? { ok: true, value: args } : { ok: false, message: problem };
}

/** The last characters of a stream of text. */
class TextTail {
  readonly #maxCharacters: number;
  #text = '';

  constructor(maxCharacters: number) {
    this.#maxCharacters = maxCharacters;
  }

  append(chunk: string): void {
    this.#text = (this.#text + chunk).slice(-this.#maxCharacters);
  }

  clear(): void {
    this.#text = '';
  }

  text(): string {
    return this.#text;
  }
}
