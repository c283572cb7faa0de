import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

/** Sockets given their no-op error listener (see rawRequest). */
const socketsWithErrorListener = new WeakSet<object>();

/** Where a request goes: a URL, or a path on a server listening on a Unix socket. */
export interface RequestTarget {
  readonly url: string;
  readonly socketPath?: string | undefined;
}

/** A finished response (or, for an event stream, its head and a way to end it). */
export interface RawResponse {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  /** The body; empty for an event stream left open. */
  readonly text: string;
  /** Ends an event stream left open; nothing otherwise. */
  close(): void;
  /** Settles when the response has ended (for an event stream left open: when the server or `close` ends it). */
  readonly ended: Promise<void>;
}

/** Options of {@link rawRequest}. */
export interface RawRequestOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Resolve as soon as an event stream starts, leaving it open (for GET streams). */
  readonly leaveStreamOpen?: boolean;
}

/** A request sent with node:http (fetch does not let Host be set, nor talk to a Unix socket). */
export function rawRequest(target: RequestTarget, options: RawRequestOptions = {}): Promise<RawResponse> {
  const url = new URL(target.url);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        ...(target.socketPath === undefined
          ? { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port }
          : { socketPath: target.socketPath }),
        path: url.pathname + url.search,
        method: options.method ?? 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          ...options.headers,
        },
      },
      (response) => {
        const close = () => response.destroy();
        const ended = new Promise<void>((settle) => response.once('close', () => settle()));
        if (options.leaveStreamOpen === true && response.headers['content-type'] === 'text/event-stream') {
          response.on('error', () => {});
          // Read (and dropped) so that the end of the stream is seen.
          response.resume();
          resolve({ status: response.statusCode ?? 0, headers: response.headers, text: '', close, ended });
          return;
        }
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.once('error', reject);
        response.once('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            close,
            ended,
          }),
        );
      },
    );
    // A server that answers before reading the whole body may close the connection under a write: one more error.
    request.on('error', reject);
    request.on('socket', (socket) => {
      // A kept-alive socket serves request after request: one listener for all of them.
      if (socketsWithErrorListener.has(socket)) return;
      socketsWithErrorListener.add(socket);
      socket.on('error', () => {});
    });
    request.end(options.body);
  });
}

/** The body of an initialize request. */
export function initializeBody(clientName = 'probe', capabilities: Record<string, unknown> = {}): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities, clientInfo: { name: clientName, version: '1' } },
  });
}

/** Opens a session as a client would (initialize, then the initialized notification); resolves with its id. */
export async function openSession(target: RequestTarget, token: string, clientName = 'probe'): Promise<string> {
  const authorization = { Authorization: `Bearer ${token}` };
  const response = await rawRequest(target, { headers: authorization, body: initializeBody(clientName) });
  const sessionId = response.headers['mcp-session-id'];
  if (response.status !== 200 || typeof sessionId !== 'string') {
    throw new Error(`initialize answered ${response.status}: ${response.text}`);
  }
  const initialized = await rawRequest(target, {
    headers: { ...authorization, 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  if (initialized.status !== 202) throw new Error(`notifications/initialized answered ${initialized.status}`);
  return sessionId;
}

/** Sends one request of a session; resolves with the status and the JSON-RPC message of the answer, if any. */
export async function sessionRequest(
  target: RequestTarget,
  token: string,
  sessionId: string,
  message: { method: string; params?: unknown },
): Promise<{ status: number; message: unknown }> {
  const response = await rawRequest(target, {
    headers: { Authorization: `Bearer ${token}`, 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, ...message }),
  });
  const data = /^data: (.*)$/m.exec(response.text)?.[1];
  const text = data ?? response.text;
  return { status: response.status, message: text === '' ? undefined : JSON.parse(text) };
}

/** A fetch that sends every request through a Unix socket (for the SDK client's `fetch` option). */
export function unixSocketFetch(socketPath: string): typeof fetch {
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = Object.fromEntries(new Headers(init?.headers));
    return new Promise<Response>((resolve, reject) => {
      const request = httpRequest(
        { socketPath, path: url.pathname + url.search, method: init?.method ?? 'GET', headers },
        (response) => {
          const responseHeaders = new Headers();
          for (const [name, value] of Object.entries(response.headers)) {
            if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
          }
          const status = response.statusCode ?? 0;
          const body = status === 204 ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>);
          resolve(new Response(body, { status, headers: responseHeaders }));
        },
      );
      init?.signal?.addEventListener('abort', () => request.destroy(new Error('aborted')));
      request.once('error', reject);
      request.end(typeof init?.body === 'string' ? init.body : undefined);
    });
  };
}
