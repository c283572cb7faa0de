import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { type HttpSessionLimits, MAX_HTTP_SESSIONS, serveHttp } from '../../src/mcp-server/streamable-http-server.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { initializeBody, openSession, type RequestTarget, rawRequest, sessionRequest } from './http-requests.js';

const newCodecall = useCodecalls();
const TOKEN = 'session-test-token-0123456789';
const LIST_TOOLS = { method: 'tools/list' };
const RUN_PRINT = { method: 'tools/call', params: { name: 'execute_code', arguments: { code: 'print(6 * 7)' } } };

async function startServer(sessions?: HttpSessionLimits) {
  return serveHttp(newCodecall({ builtinTools: [] }), { port: 0, token: TOKEN, sessions });
}

/** A session that has run a tool call (so it holds an interpreter). */
async function usedSession(target: RequestTarget, clientName = 'probe'): Promise<string> {
  const sessionId = await openSession(target, TOKEN, clientName);
  const answer = await sessionRequest(target, TOKEN, sessionId, RUN_PRINT);
  expect(answer.message).toMatchObject({ result: { content: [{ type: 'text', text: '42\n' }] } });
  return sessionId;
}

const statusOf = async (target: RequestTarget, sessionId: string) =>
  (await sessionRequest(target, TOKEN, sessionId, LIST_TOOLS)).status;

const initializeStatus = async (target: RequestTarget, clientName = 'probe') =>
  (await rawRequest(target, { headers: { Authorization: `Bearer ${TOKEN}` }, body: initializeBody(clientName) }))
    .status;

describe('serve --http: sessions nobody uses cannot lock other clients out', () => {
  it(`lets a new client in past ${MAX_HTTP_SESSIONS} initialised sessions that never ran a tool call`, async () => {
    const server = await startServer();
    const streams: Array<{ close(): void }> = [];
    try {
      const unused: string[] = [];
      for (let index = 0; index < MAX_HTTP_SESSIONS; index += 1) {
        const sessionId = await openSession(server, TOKEN, 'hog');
        unused.push(sessionId);
        // Half of them keep their event stream open, as a connected client does.
        if (index % 2 === 0) {
          const stream = await rawRequest(server, {
            method: 'GET',
            headers: {
              Authorization: `Bearer ${TOKEN}`,
              Accept: 'text/event-stream',
              'Mcp-Session-Id': sessionId,
              'Mcp-Protocol-Version': '2025-06-18',
            },
            leaveStreamOpen: true,
          });
          expect(stream.status).toBe(200);
          streams.push(stream);
        }
      }
      const client = new Client({ name: 'latecomer', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(server.url), {
          requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
        }),
      );
      const result = (await client.callTool({
        name: 'execute_code',
        arguments: { code: 'print(1)' },
      })) as CallToolResult;
      expect(result.content[0]).toEqual({ type: 'text', text: '1\n' });
      await client.close();
      // The longest idle unused session made room (one for the client, none for anything else).
      expect(await statusOf(server, unused[0] as string)).toBe(404);
      expect(await statusOf(server, unused.at(-1) as string)).toBe(200);
      // And so on for every newcomer.
      for (let index = 0; index < 10; index += 1) expect(await initializeStatus(server)).toBe(200);
    } finally {
      for (const stream of streams) stream.close();
      await server.close();
    }
  });

  it('answers 503 only when every session has run a tool call, and lets a client in once one ends', async () => {
    const server = await startServer({ maxSessions: 3 });
    try {
      const used = [await usedSession(server, 'a'), await usedSession(server, 'b'), await usedSession(server, 'c')];
      const refused = await rawRequest(server, {
        headers: { Authorization: `Bearer ${TOKEN}` },
        body: initializeBody('d'),
      });
      expect(refused.status).toBe(503);
      expect(refused.text).toContain('all 3 sessions are in use');
      for (const sessionId of used) expect(await statusOf(server, sessionId)).toBe(200);
      const ended = await rawRequest(server, {
        method: 'DELETE',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Mcp-Session-Id': used[0] as string },
      });
      expect(ended.status).toBe(200);
      expect(await initializeStatus(server, 'd')).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('caps the sessions of one client, displacing its own unused ones first', async () => {
    const server = await startServer({ maxSessionsPerClient: 2 });
    try {
      const otherUnused = await openSession(server, TOKEN, 'other');
      const firstUnused = await openSession(server, TOKEN, 'greedy');
      await usedSession(server, 'greedy');
      // At its cap: its own unused session makes room, not the other client's.
      const secondUsed = await usedSession(server, 'greedy');
      expect(await statusOf(server, firstUnused)).toBe(404);
      expect(await statusOf(server, otherUnused)).toBe(200);
      const refused = await rawRequest(server, {
        headers: { Authorization: `Bearer ${TOKEN}` },
        body: initializeBody('greedy'),
      });
      expect(refused.status).toBe(429);
      expect(refused.text).toContain('too many sessions of this client (2)');
      expect(await statusOf(server, secondUsed)).toBe(200);
      expect(await initializeStatus(server, 'other')).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('ends sessions without a tool call soon, event stream or not, and keeps the ones in use', async () => {
    const server = await startServer({ unusedTimeoutMs: 300 });
    let stream: Awaited<ReturnType<typeof rawRequest>> | undefined;
    try {
      const used = await usedSession(server);
      const quiet = await openSession(server, TOKEN);
      const listening = await openSession(server, TOKEN);
      stream = await rawRequest(server, {
        method: 'GET',
        headers: {
          Authorization: `Bearer ${TOKEN}`,
          Accept: 'text/event-stream',
          'Mcp-Session-Id': listening,
          'Mcp-Protocol-Version': '2025-06-18',
        },
        leaveStreamOpen: true,
      });
      expect(stream.status).toBe(200);
      // Watched without requests of its own, which would be activity: the server ends its stream when it ends it.
      await stream.ended;
      expect(await statusOf(server, listening)).toBe(404);
      // Opened before, so idle at least as long: ended by the same sweep or an earlier one.
      expect(await statusOf(server, quiet)).toBe(404);
      expect(await statusOf(server, used)).toBe(200);
    } finally {
      stream?.close();
      await server.close();
    }
  });

  it('refuses session limits that are not positive integers', async () => {
    const codecall = newCodecall({ builtinTools: [] });
    for (const sessions of [{ maxSessions: 0 }, { maxSessionsPerClient: -1 }, { unusedTimeoutMs: 1.5 }]) {
      await expect(serveHttp(codecall, { port: 0, sessions })).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    }
  });
});
