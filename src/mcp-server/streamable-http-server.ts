import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { isIP } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { CodecallError, errorMessage } from '../core/errors.js';
import { exceedsJsonNesting, MAX_JSON_NESTING_DEPTH } from '../core/json-nesting.js';
import type { ExecuteCodeHost } from './execute-code-server.js';
import { createExecuteCodeServer } from './execute-code-server.js';
import {
  bearerTokenCheck,
  checkHttpToken,
  generateHttpToken,
  hostOfHostHeader,
  hostOfOrigin,
  isLoopbackHostName,
  isLoopbackListenAddress,
  normaliseHostName,
} from './http-access.js';
import { listenOnUnixSocket } from './unix-socket.js';

/** Address `serveHttp` listens on unless told otherwise: loopback only. */
export const DEFAULT_HTTP_HOST = '127.0.0.1';
/** Path of the MCP endpoint. */
export const MCP_HTTP_PATH = '/mcp';
/** Largest request body accepted (a script travels in one). */
export const MAX_HTTP_REQUEST_BYTES = 4 * 1024 * 1024;
/**
 * MCP sessions open at once. A new client beyond it first displaces the longest-idle session that never ran a tool
 * call; only when every session has run one (each may hold an interpreter) does it get 503.
 */
export const MAX_HTTP_SESSIONS = 64;
/** Sessions one client (its address and the name it gives in `initialize`) may have open at once. */
export const MAX_HTTP_SESSIONS_PER_CLIENT = 16;
/** A session that has run a tool call, with no request open and none for this long, is closed. */
export const HTTP_SESSION_IDLE_TIMEOUT_MS = 30 * 60 * 1000;
/** A session that has not run a tool call and has had no request for this long is closed (cheap to open again). */
export const HTTP_UNUSED_SESSION_TIMEOUT_MS = 60 * 1000;
/** How often expired sessions are looked for, at most (shorter when the timeouts are shorter). */
const SWEEP_INTERVAL_MS = 10 * 1000;
const MIN_SWEEP_INTERVAL_MS = 10;
/** Characters of the client name kept for telling clients apart. */
const MAX_CLIENT_NAME_CHARACTERS = 100;

/** How many sessions `serveHttp` keeps and for how long (the defaults are the `*_HTTP_*` constants). */
export interface HttpSessionLimits {
  /** Sessions open at once (default {@link MAX_HTTP_SESSIONS}). */
  readonly maxSessions?: number | undefined;
  /** Sessions of one client at once (default {@link MAX_HTTP_SESSIONS_PER_CLIENT}). */
  readonly maxSessionsPerClient?: number | undefined;
  /** Life of a session that has not run a tool call, from its last request (default 60 s). */
  readonly unusedTimeoutMs?: number | undefined;
  /** Life of an idle session that has run a tool call (default 30 minutes). */
  readonly idleTimeoutMs?: number | undefined;
}

/** Options of {@link serveHttp}. */
export interface ServeHttpOptions {
  /** TCP port; 0 picks a free one (see the returned `port`). Give this or `socketPath`. */
  readonly port?: number | undefined;
  /**
   * Address to listen on with `port` (default `127.0.0.1`). On a loopback address, requests whose `Host` or `Origin`
   * is not exactly a loopback name (`localhost`, `127.x.y.z`, `[::1]`) or one of `allowedHosts` are refused: DNS
   * rebinding protection.
   */
  readonly host?: string | undefined;
  /**
   * Listen on a Unix domain socket at this path instead of a TCP port. It is created with mode 0600 (only this user
   * may connect) in a folder no other user can write to; an existing path is refused unless it is a dead socket of
   * this user. It is removed when the server closes.
   */
  readonly socketPath?: string | undefined;
  /**
   * Bearer token every request must carry (`Authorization: Bearer <token>`), at least 16 characters. When absent a
   * random one is generated: read it from the returned `token`.
   */
  readonly token?: string | undefined;
  /**
   * Further host names accepted in `Host` and `Origin` (exact, case-insensitive, without port), e.g. the name of a
   * reverse proxy. With a non-loopback `host`, the names are checked only when this is given.
   */
  readonly allowedHosts?: readonly string[] | undefined;
  /** Session counts and lifetimes. */
  readonly sessions?: HttpSessionLimits | undefined;
}

/** A running Streamable HTTP MCP server. */
export interface HttpExecuteCodeServer {
  /**
   * Endpoint to put in a client's configuration, e.g. `http://127.0.0.1:8808/mcp`. On a Unix socket, the URL to
   * request through the socket (`http://localhost/mcp`).
   */
  readonly url: string;
  /** The TCP port actually bound; undefined on a Unix socket. */
  readonly port: number | undefined;
  /** The Unix socket listened on (its folder resolved); undefined on TCP. */
  readonly socketPath: string | undefined;
  /** The bearer token requests must carry: the configured one or the generated one. */
  readonly token: string;
  /** Ends every session and stops listening; the codecall itself stays open (close it after). */
  close(): Promise<void>;
}

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: Server;
  /** Who opened it: remote address and client name, for the per-client cap. */
  readonly client: string;
  /** POST and DELETE requests whose responses are still open. */
  openPosts: number;
  /** All open responses, the GET event stream included. */
  openResponses: number;
  /** When the last POST or DELETE started or ended (`performance.now()`). */
  lastActivity: number;
  /** A tool call has come in: the session may hold an interpreter, and is never displaced. */
  used: boolean;
}

/**
 * Serves `execute_code` over Streamable HTTP at `http://<host>:<port>/mcp` (or on a Unix socket) with stateful
 * sessions (one MCP server per client session, `Mcp-Session-Id` header, DELETE ends a session). Every request must
 * carry the bearer token; `Host` and `Origin` are checked on loopback; bodies are bounded in size and nesting before
 * they are parsed. Resolves once listening.
 * @throws CodecallError `INVALID_CONFIG` when the port, host, socket path or token cannot be used.
 */
export async function serveHttp(codecall: ExecuteCodeHost, options: ServeHttpOptions): Promise<HttpExecuteCodeServer> {
  const { port, socketPath } = options;
  const host = options.host ?? DEFAULT_HTTP_HOST;
  if ((port === undefined) === (socketPath === undefined)) {
    throw new CodecallError('INVALID_CONFIG', 'serveHttp: give either a port or a socketPath', {
      key: 'port',
      value: port,
    });
  }
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65_535)) {
    throw new CodecallError('INVALID_CONFIG', `serveHttp: port must be an integer from 0 to 65535, got ${port}`, {
      key: 'port',
      value: port,
    });
  }
  const token = options.token === undefined ? generateHttpToken() : checkHttpToken(options.token, 'serveHttp: token');
  const isAuthorised = bearerTokenCheck(token);
  const allowedHosts = parseAllowedHosts(options.allowedHosts, host);
  const limits = resolveSessionLimits(options.sessions);
  // A browser cannot reach a Unix socket, so DNS rebinding needs a TCP port; elsewhere than loopback, only the names
  // the user gave are known to be right.
  const checkHostNames =
    socketPath === undefined && (isLoopbackListenAddress(host) || options.allowedHosts !== undefined);
  const isAllowedHostName = (name: string | undefined): boolean =>
    name !== undefined && (isLoopbackHostName(name) || allowedHosts.has(name));
  const sessions = new Map<string, Session>();
  /** Every session from its initialize request on, before it has an id too: what the caps count. */
  const live = new Set<Session>();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    if (checkHostNames && !hasAllowedHostAndOrigin(request, isAllowedHostName)) {
      return sendJsonError(response, 403, -32000, 'forbidden: Host and Origin must name this server');
    }
    if (!isAuthorised(request.headers.authorization)) {
      response.setHeader('WWW-Authenticate', 'Bearer realm="codecall"');
      return sendJsonError(response, 401, -32001, 'unauthorized: send the header "Authorization: Bearer <token>"');
    }
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname !== MCP_HTTP_PATH)
      return sendJsonError(response, 404, -32000, `not found; the MCP endpoint is ${MCP_HTTP_PATH}`);
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
    if (session !== undefined) {
      if (callsATool(body)) session.used = true;
      return serveInSession(session, request, response, body);
    }
    if (sessionId !== undefined) return sendJsonError(response, 404, -32001, 'session not found; initialize a new one');
    if (request.method !== 'POST' || !isInitializeRequest(body)) {
      return sendJsonError(response, 400, -32000, 'bad request: no valid Mcp-Session-Id and not an initialize request');
    }
    const client = clientOf(request, body);
    const refusal = makeRoomFor(client);
    if (refusal !== undefined) return sendJsonError(response, refusal.status, -32000, refusal.message);
    const server = createExecuteCodeServer(codecall);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, newSession);
      },
    });
    const newSession: Session = {
      transport,
      server,
      client,
      openPosts: 0,
      openResponses: 0,
      lastActivity: performance.now(),
      used: false,
    };
    live.add(newSession);
    transport.onclose = () => {
      live.delete(newSession);
      const id = transport.sessionId;
      if (id !== undefined && sessions.get(id) === newSession) sessions.delete(id);
    };
    await server.connect(transport);
    await serveInSession(newSession, request, response, body);
    // An initialize the SDK refused leaves a session without an id that no request can reach again.
    if (transport.sessionId === undefined) void server.close();
  };

  /**
   * Makes room for a new session of `client`, displacing the longest-idle unused session (of that client when it is
   * at its cap, of anyone when the server is full); says why not when every candidate has run a tool call.
   */
  const makeRoomFor = (client: string): { status: number; message: string } | undefined => {
    const own = [...live].filter((session) => session.client === client);
    if (own.length >= limits.maxSessionsPerClient) {
      const displaced = longestIdleUnused(own);
      if (displaced === undefined) {
        return {
          status: 429,
          message: `too many sessions of this client (${limits.maxSessionsPerClient}) are in use; end one (DELETE) first`,
        };
      }
      closeSession(displaced);
    }
    if (live.size >= limits.maxSessions) {
      const displaced = longestIdleUnused([...live]);
      if (displaced === undefined) {
        return { status: 503, message: `all ${limits.maxSessions} sessions are in use; try again later` };
      }
      closeSession(displaced);
    }
    return undefined;
  };

  const closeSession = (session: Session): void => {
    // Counted out at once: the transport's close, which also removes it, completes later.
    live.delete(session);
    void session.server.close();
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

  const sweepInterval = Math.max(
    MIN_SWEEP_INTERVAL_MS,
    Math.min(SWEEP_INTERVAL_MS, limits.unusedTimeoutMs / 2, limits.idleTimeoutMs / 2),
  );
  const sweeper = setInterval(() => {
    const now = performance.now();
    for (const session of [...live]) {
      const idleFor = now - session.lastActivity;
      const expired = session.used
        ? session.openResponses === 0 && idleFor >= limits.idleTimeoutMs
        : session.openPosts === 0 && idleFor >= limits.unusedTimeoutMs;
      if (expired) closeSession(session);
    }
  }, sweepInterval);
  sweeper.unref();

  let boundSocket: string | undefined;
  try {
    if (socketPath !== undefined) {
      boundSocket = await listenOnUnixSocket(httpServer, socketPath);
    } else {
      await new Promise<void>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, host, () => {
          httpServer.off('error', reject);
          resolve();
        });
      });
    }
  } catch (error) {
    clearInterval(sweeper);
    if (error instanceof CodecallError) throw error;
    const reason = errorMessage(error);
    throw new CodecallError('INVALID_CONFIG', `serveHttp: cannot listen on ${host}:${port}: ${reason}`, {
      host,
      port,
      cause: reason,
    });
  }
  const address = httpServer.address();
  const boundPort = boundSocket === undefined && typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;

  return {
    url:
      boundSocket === undefined ? `http://${urlHost}:${boundPort}${MCP_HTTP_PATH}` : `http://localhost${MCP_HTTP_PATH}`,
    port: boundSocket === undefined ? boundPort : undefined,
    socketPath: boundSocket,
    token,
    async close() {
      clearInterval(sweeper);
      const open = [...live];
      live.clear();
      sessions.clear();
      await Promise.allSettled(open.map((session) => session.server.close()));
      await new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        httpServer.closeAllConnections();
      });
    },
  };
}

/** {@link HttpSessionLimits} with every default filled in. */
type ResolvedSessionLimits = { readonly [Key in keyof HttpSessionLimits]-?: number };

function resolveSessionLimits(limits: HttpSessionLimits | undefined): ResolvedSessionLimits {
  const resolved = {
    maxSessions: limits?.maxSessions ?? MAX_HTTP_SESSIONS,
    maxSessionsPerClient: limits?.maxSessionsPerClient ?? MAX_HTTP_SESSIONS_PER_CLIENT,
    unusedTimeoutMs: limits?.unusedTimeoutMs ?? HTTP_UNUSED_SESSION_TIMEOUT_MS,
    idleTimeoutMs: limits?.idleTimeoutMs ?? HTTP_SESSION_IDLE_TIMEOUT_MS,
  };
  for (const [key, value] of Object.entries(resolved)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new CodecallError('INVALID_CONFIG', `serveHttp: sessions.${key} must be a positive integer, got ${value}`, {
        key: `sessions.${key}`,
        value,
      });
    }
  }
  return resolved;
}

/** The names given, normalised, and the address listened on unless it is a wildcard (`0.0.0.0`, `::`). */
function parseAllowedHosts(names: readonly string[] | undefined, listenAddress: string): ReadonlySet<string> {
  const allowed = new Set<string>();
  const listenName = normaliseHostName(listenAddress);
  if (listenName !== undefined && listenName !== '0.0.0.0' && listenName !== '[::]') allowed.add(listenName);
  for (const name of names ?? []) {
    const normalised = typeof name === 'string' ? normaliseHostName(name) : undefined;
    if (normalised === undefined || hostOfHostHeader(normalised) !== normalised) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `serveHttp: allowedHosts takes host names without port, got ${JSON.stringify(name)}`,
        { key: 'allowedHosts', value: name },
      );
    }
    allowed.add(normalised);
  }
  return allowed;
}

/** The session of the longest-idle client among those that never ran a tool call and have no request open. */
function longestIdleUnused(candidates: readonly Session[]): Session | undefined {
  let found: Session | undefined;
  for (const session of candidates) {
    if (session.used || session.openPosts > 0) continue;
    if (found === undefined || session.lastActivity < found.lastActivity) found = session;
  }
  return found;
}

/** Whether a POST body (one message or a batch) holds a `tools/call`. */
function callsATool(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (message) =>
      typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'tools/call',
  );
}

/** Who is asking: the remote address (all local clients share one) and the name the client gives itself. */
function clientOf(request: IncomingMessage, initialize: { params: { clientInfo: { name: string } } }): string {
  const address = request.socket.remoteAddress ?? 'unix socket';
  return `${address} ${String(initialize.params.clientInfo.name).slice(0, MAX_CLIENT_NAME_CHARACTERS)}`;
}

async function serveInSession(
  session: Session,
  request: IncomingMessage,
  response: ServerResponse,
  body: unknown,
): Promise<void> {
  // The GET event stream stays open for as long as the client is connected: it shows the client is there, but is
  // not activity that keeps a session nobody uses.
  const counted = request.method !== 'GET';
  session.openResponses += 1;
  if (counted) {
    session.openPosts += 1;
    session.lastActivity = performance.now();
  }
  response.once('close', () => {
    session.openResponses -= 1;
    if (counted) {
      session.openPosts -= 1;
      session.lastActivity = performance.now();
    }
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
  const bytes = Buffer.concat(chunks, total);
  // Checked before parsing: a few megabytes of nested brackets would hold the event loop for seconds.
  if (exceedsJsonNesting(bytes)) {
    return {
      ok: false,
      status: 400,
      code: -32700,
      message: `parse error: the body nests arrays and objects deeper than ${MAX_JSON_NESTING_DEPTH} levels`,
    };
  }
  try {
    return { ok: true, value: JSON.parse(bytes.toString('utf8')) };
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

// Browsers send the attacker's name in Host after a DNS rebinding, and their own page in Origin. Both are parsed
// and compared exactly: a name that merely starts like a loopback address is anyone's.
function hasAllowedHostAndOrigin(
  request: IncomingMessage,
  isAllowedHostName: (name: string | undefined) => boolean,
): boolean {
  const hostHeader = request.headers.host;
  if (hostHeader === undefined || !isAllowedHostName(hostOfHostHeader(hostHeader))) return false;
  const origin = headerValue(request.headers.origin);
  return origin === undefined || isAllowedHostName(hostOfOrigin(origin));
}
