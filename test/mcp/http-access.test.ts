import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { MAX_JSON_NESTING_DEPTH } from '../../src/core/json-nesting.js';
import { type HttpExecuteCodeServer, serveHttp } from '../../src/mcp-server/streamable-http-server.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { initializeBody, openSession, rawRequest, sessionRequest } from './http-requests.js';

const newCodecall = useCodecalls();
const TOKEN = 'a-configured-token-0123456789';
/** A request past the host and token checks that opens nothing: a call without a session (400). */
const NO_SESSION_CALL = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });

let server: HttpExecuteCodeServer;
let withProxy: HttpExecuteCodeServer;

beforeAll(async () => {
  const codecall = newCodecall({ builtinTools: [] });
  server = await serveHttp(codecall, { port: 0, token: TOKEN });
  withProxy = await serveHttp(codecall, { port: 0, token: TOKEN, allowedHosts: ['Proxy.Example'] });
});

afterAll(async () => {
  await server?.close();
  await withProxy?.close();
});

const statusWith = async (headers: Record<string, string>, target = server) =>
  (await rawRequest(target, { headers: { Authorization: `Bearer ${TOKEN}`, ...headers }, body: NO_SESSION_CALL }))
    .status;

describe('serve --http compares Host and Origin exactly (DNS rebinding)', () => {
  it.each([
    '127.0.0.1.rebind.evil.example',
    '127.0.0.1.nip.io:8808',
    '127.evil.example',
    'localhost.evil.example',
    'localhost.',
    'evil-localhost',
    '127.0.0.256',
    '127.1',
    '0x7f.0.0.1',
    '127.0.0.1@evil.example',
    'evil.example@127.0.0.1',
    '127.0.0.1/evil',
    '127.0.0.1:8808:9',
    'localhost:99999',
    '[::1].evil.example',
    '[::2]',
    '::1',
    '127.0.0.1, evil.example',
  ])('refuses Host %j with 403', async (host) => {
    expect(await statusWith({ Host: host })).toBe(403);
  });

  it.each([
    'localhost',
    'LOCALHOST:8808',
    '127.0.0.1',
    '127.0.0.1:8808',
    '127.4.5.6',
    '[::1]',
    '[::1]:8808',
    '[0:0:0:0:0:0:0:1]:8808',
  ])('accepts Host %j', async (host) => {
    expect(await statusWith({ Host: host })).toBe(400);
  });

  it.each([
    'http://127.0.0.1.rebind.evil.example',
    'https://localhost.evil.example:8808',
    'http://127.0.0.1.evil.example:8808',
    'null',
    'file://',
    'chrome-extension://abcdef',
    'http://user@localhost',
    'http://localhost/path',
    'not a url',
  ])('refuses Origin %j with 403', async (origin) => {
    expect(await statusWith({ Host: 'localhost', Origin: origin })).toBe(403);
  });

  it.each(['http://localhost:3000', 'http://127.0.0.1', 'https://[::1]:8808'])('accepts Origin %j', async (origin) => {
    expect(await statusWith({ Host: 'localhost', Origin: origin })).toBe(400);
  });

  it('accepts the configured names exactly, besides loopback ones', async () => {
    expect(await statusWith({ Host: 'proxy.example:443' }, withProxy)).toBe(400);
    expect(await statusWith({ Host: 'localhost', Origin: 'https://PROXY.example' }, withProxy)).toBe(400);
    expect(await statusWith({ Host: '127.0.0.1' }, withProxy)).toBe(400);
    expect(await statusWith({ Host: 'proxy.example.evil.example' }, withProxy)).toBe(403);
    expect(await statusWith({ Host: 'evil.proxy.example' }, withProxy)).toBe(403);
    expect(await statusWith({ Host: 'proxy.example' }, server)).toBe(403);
  });

  it('refuses allowed host names that are not names', async () => {
    const codecall = newCodecall({ builtinTools: [] });
    for (const name of ['proxy.example:443', 'http://proxy.example', 'a/b', '']) {
      await expect(serveHttp(codecall, { port: 0, allowedHosts: [name] })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
      });
    }
  });
});

describe('serve --http requires the bearer token on every request', () => {
  it.each([
    ['no Authorization header', {}],
    ['an empty token', { Authorization: 'Bearer ' }],
    ['another token', { Authorization: 'Bearer another-token-0123456789' }],
    ['the token cut short', { Authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ['the token with more after it', { Authorization: `Bearer ${TOKEN}x` }],
    ['the token in another case', { Authorization: `Bearer ${TOKEN.toUpperCase()}` }],
    ['the token and another word', { Authorization: `Bearer ${TOKEN} ${TOKEN}` }],
    ['another scheme', { Authorization: `Basic ${TOKEN}` }],
    ['the token without a scheme', { Authorization: TOKEN }],
    ['the token in another header', { 'X-Api-Key': TOKEN }],
  ])('refuses %s with 401', async (_name, headers: Record<string, string>) => {
    const response = await rawRequest(server, { headers, body: initializeBody() });
    expect(response.status).toBe(401);
    expect(response.headers['www-authenticate']).toBe('Bearer realm="codecall"');
    expect(response.headers['mcp-session-id']).toBeUndefined();
  });

  it('refuses the token in the query string', async () => {
    const response = await rawRequest({ url: `${server.url}?token=${TOKEN}` }, { body: initializeBody() });
    expect(response.status).toBe(401);
  });

  it('accepts the scheme in any case, and refuses requests of a live session without the token', async () => {
    const accepted = await rawRequest(server, {
      headers: { Authorization: `bEARER  ${TOKEN} ` },
      body: NO_SESSION_CALL,
    });
    expect(accepted.status).toBe(400);
    const sessionId = await openSession(server, TOKEN);
    const call = { method: 'tools/list' };
    expect((await sessionRequest(server, TOKEN, sessionId, call)).status).toBe(200);
    expect((await sessionRequest(server, 'wrong-token-0123456789', sessionId, call)).status).toBe(401);
    for (const method of ['GET', 'DELETE']) {
      const response = await rawRequest(server, { method, headers: { 'Mcp-Session-Id': sessionId } });
      expect(response.status).toBe(401);
    }
    // Still there: the requests without the token did not end it.
    expect((await sessionRequest(server, TOKEN, sessionId, call)).status).toBe(200);
  });

  it('generates a long random token when none is given, and refuses short or malformed ones', async () => {
    const codecall = newCodecall({ builtinTools: [] });
    const first = await serveHttp(codecall, { port: 0 });
    const second = await serveHttp(codecall, { port: 0 });
    try {
      expect(first.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(second.token).not.toBe(first.token);
      const client = new Client({ name: 'codecall-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(first.url), {
          requestInit: { headers: { Authorization: `Bearer ${first.token}` } },
        }),
      );
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['execute_code']);
      await client.close();
      const refused = new Client({ name: 'codecall-test', version: '1.0.0' });
      await expect(
        refused.connect(
          new StreamableHTTPClientTransport(new URL(first.url), {
            requestInit: { headers: { Authorization: `Bearer ${second.token}` } },
          }),
        ),
      ).rejects.toThrow(/unauthorized/);
    } finally {
      await first.close();
      await second.close();
    }
    for (const token of [
      'short',
      '',
      'has spaces in the middle of it',
      'has\nnew\nlines\n0123456789',
      'ünïcödé-0123456789',
    ]) {
      const refusal = serveHttp(codecall, { port: 0, token });
      await expect(refusal).rejects.toBeInstanceOf(CodecallError);
      await expect(refusal).rejects.not.toThrow(token.length > 0 ? token : /^$/);
    }
  });
});

describe('serve --http bounds the nesting of request bodies before parsing them', () => {
  const depthMessage = `parse error: the body nests arrays and objects deeper than ${MAX_JSON_NESTING_DEPTH} levels`;
  const authorization = { Authorization: `Bearer ${TOKEN}` };

  it.each([
    ['4 MiB of [', '['.repeat(4 * 1024 * 1024 - 1)],
    [
      'nested arrays one level too deep',
      `${'['.repeat(MAX_JSON_NESTING_DEPTH + 1)}${']'.repeat(MAX_JSON_NESTING_DEPTH + 1)}`,
    ],
    [
      'an initialize whose capabilities nest too deep',
      initializeBody('deep', {
        experimental: JSON.parse(`${'{"a":'.repeat(MAX_JSON_NESTING_DEPTH)}1${'}'.repeat(MAX_JSON_NESTING_DEPTH)}`),
      }),
    ],
    ['nesting after a string full of brackets', `["${'[{'.repeat(100_000)}",${'['.repeat(MAX_JSON_NESTING_DEPTH)}]`],
  ])('refuses %s with 400 and -32700', async (_name, body) => {
    const response = await rawRequest(server, { headers: authorization, body });
    expect(response.status).toBe(400);
    expect(JSON.parse(response.text)).toMatchObject({ error: { code: -32700, message: depthMessage } });
  });

  it('accepts nesting within the limit', async () => {
    const nested = JSON.parse(`${'['.repeat(200)}1${']'.repeat(200)}`);
    const response = await rawRequest(server, {
      headers: authorization,
      body: initializeBody('nested', { experimental: { nested } }),
    });
    expect(response.status).toBe(200);
  });

  it('does not read the body of a request without the token', async () => {
    const response = await rawRequest(server, { body: '['.repeat(4 * 1024 * 1024 - 1) });
    expect(response.status).toBe(401);
  });
});
