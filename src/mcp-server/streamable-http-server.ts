import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { isIP } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { CodecallError, errorMessage } from '../core/errors.js';
import type { ExecuteCodeHost } from './execute-code-server.js';
import { createExecuteCodeServer } from './execute-code-server.js';

/** Address `serveHttp` listens on unless told otherwise: loopback only. */
export const DEFAULT_HTTP_HOST = '127.0.0.1';
/** Path of the MCP endpoint. */
export const MCP_HTTP_PATH = '/mcp';
/** Largest request body accepted (a script travels in one). */
export const MAX_HTTP_REQUEST_BYTES = 4 * 1024 * 1024;
/** MCP sessions open at once; a new client beyond it gets 503 until one ends. */
export const MAX_HTTP_SESSIONS = 64;
/** A session with no request in flight and none for this long is closed (the client re-initialises). */
export const HTTP_SESSION_IDLE_TIMEOUT_MS = 30 * 60 * 1000;
/** How often idle sessions are looked for. */
const IDLE_SWEEP_INTERVAL_MS = 60 * 1000;

const LOOPBACK_HOSTNAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Options of {@link serveHttp}. */
export interface ServeHttpOptions {
  /** TCP port; 0 picks a free one (see the returned `port`). */
  readonly port: number;
  /**
   * Address to listen on (default `127.0.0.1`). On a loopback address, requests whose `Host` or `Origin` is not a
   * loopback name are refused (DNS rebinding protection). There is no authentication: expose another address only
   * behind a proxy that authenticates.
   */
  readonly host?: string | undefined;
}

/** A running Streamable HTTP MCP server. */
export interface HttpExecuteCodeServer {
  /** Endpoint to put in a client's configuration, e.g. `http://127.0.0.1:8808/mcp`. */
  readonly url: string;
  /** The port actually bound. */
  readonly port: number;
  /** Ends every session and stops listening; the codecall itself stays open (close it after). */
  close(): Promise<void>;
}

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: Server;
  /** Requests of this session whose responses are still open (an SSE stream counts while it lasts). */
  openResponses: number;
  lastActivity: number;
}

/**
 * Serves `execute_code` over Streamable HTTP at `http://<host>:<port>/mcp` with stateful sessions (one MCP server
 * per client session, `Mcp-Session-Id` header, DELETE ends a session). Resolves once listening.
 * @throws CodecallError `INVALID_CONFIG` when the port or host cannot be used (e.g. the port is taken).
 */
export async function serveHttp(codecall: ExecuteCodeHost, options: ServeHttpOptions): Promise<HttpExecuteCodeServer> {
  const host = options.host ?? DEFAULT_HTTP_HOST;
  const { port } = options;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new CodecallError('INVALID_CONFIG', `serveHttp: port must be an integer from 0 to 65535, got ${port}`, {
      key: 'port',
      value: port,
    });
  }
  const checkOrigin = isLoopbackHost(host);
  const sessions = new Map<string, Session>();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname !== MCP_HTTP_PATH)
      return sendJsonError(response, 404, -32000, `not found; the MCP endpoint is ${MCP_HTTP_PATH}`);
    if (checkOrigin && !hasLoopbackHostAndOrigin(request)) {
      return sendJsonError(response, 403, -32000, 'forbidden: Host and Origin must be a loopback address');
    }
    if (request.method !== 'POST' && request.method !== 'GET' && request.method !== 'DELETE') {
      response.setHeader('Allow', 'GET, POST, DELETE');
      return sendJsonError(response, 405, -32000, 'method not allowed');
    }
    const sessionId = headerValue(request.headers['mcp-session-id']);
    const session = sessionId === undefined ? undefined : sessions.get(sessionId);
    let body: unknown;
    if (request.method === 'POST') {
      const read = await readJsonBody(request);
      if (!read.ok) return sendJsonError(response, read.status, read.code, read.message);
      body = read.value;
    }
    if (session !== undefined) return serveInSession(session, request, response, body);
    if (sessionId !== undefined) return sendJsonError(response, 404, -32001, 'session not found; initialize a new one');
    if (request.method !== 'POST' || !isInitializeRequest(body)) {
      return sendJsonError(response, 400, -32000, 'bad request: no valid Mcp-Session-Id and not an initialize request');
    }
    if (sessions.size >= MAX_HTTP_SESSIONS) {
      return sendJsonError(response, 503, -32000, `too many open sessions (${MAX_HTTP_SESSIONS}); end one first`);
    }
    const server = createExecuteCodeServer(codecall);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, newSession);
      },
    });
    const newSession: Session = { transport, server, openResponses: 0, lastActivity: Date.now() };
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && sessions.get(id) === newSession) sessions.delete(id);
    };
    await server.connect(transport);
    await serveInSession(newSession, request, response, body);
  };

  const httpServer = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) {
        sendJsonError(response, 500, -32603, `internal error: ${errorMessage(error)}`);
      } else {
        response.end();
      }
    });
  });

  const sweeper = setInterval(() => {
    const cutoff = Date.now() - HTTP_SESSION_IDLE_TIMEOUT_MS;
    for (const session of sessions.values()) {
      if (session.openResponses === 0 && session.lastActivity < cutoff) void session.server.close();
    }
  }, IDLE_SWEEP_INTERVAL_MS);
  sweeper.unref();

  try {
    await new Promise<void>((resolve, reject) => {
      httpServer.once('error', reject);
      httpServer.listen(port, host, () => {
        httpServer.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    clearInterval(sweeper);
    const reason = errorMessage(error);
    throw new CodecallError('INVALID_CONFIG', `serveHttp: cannot listen on ${host}:${port}: ${reason}`, {
      host,
      port,
      cause: reason,
    });
  }
  const address = httpServer.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${boundPort}${MCP_HTTP_PATH}`,
    port: boundPort,
    async close() {
      clearInterval(sweeper);
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(open.map((session) => session.server.close()));
      await new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        httpServer.closeAllConnections();
      });
    },
  };
}

async function serveInSession(
  session: Session,
  request: IncomingMessage,
  response: ServerResponse,
  body: unknown,
): Promise<void> {
  session.openResponses += 1;
  session.lastActivity = Date.now();
  response.once('close', () => {
    session.openResponses -= 1;
    session.lastActivity = Date.now();
  });
  await session.transport.handleRequest(request, response, body);
}

type BodyRead =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly status: number; readonly code: number; readonly message: string };

async function readJsonBody(request: IncomingMessage): Promise<BodyRead> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_HTTP_REQUEST_BYTES) return tooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of request) {
    const buffer = chunk as Buffer;
    total += buffer.length;
    if (total > MAX_HTTP_REQUEST_BYTES) {
      request.resume();
      return tooLarge();
    }
    chunks.push(buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, code: -32700, message: 'parse error: the body is not valid JSON' };
  }
}

function tooLarge(): BodyRead {
  return { ok: false, status: 413, code: -32000, message: `request body larger than ${MAX_HTTP_REQUEST_BYTES} bytes` };
}

function sendJsonError(response: ServerResponse, status: number, code: number, message: string): void {
  response.writeHead(status, { 'Content-Type': 'application/json' });
  response.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function isLoopbackHost(host: string): boolean {
  return LOOPBACK_HOSTNAMES.has(host) || host.startsWith('127.');
}

// Browsers send the attacker's name in Host after a DNS rebinding, and their own page in Origin.
function hasLoopbackHostAndOrigin(request: IncomingMessage): boolean {
  const hostHeader = request.headers.host;
  if (hostHeader === undefined || !isLoopbackHost(hostnameOf(`http://${hostHeader}`) ?? '')) return false;
  const origin = headerValue(request.headers.origin);
  if (origin === undefined || origin === 'null') return origin === undefined;
  const originHost = hostnameOf(origin);
  return originHost !== undefined && isLoopbackHost(originHost);
}

function hostnameOf(text: string): string | undefined {
  try {
    return new URL(text).hostname;
  } catch {
    return undefined;
  }
}
