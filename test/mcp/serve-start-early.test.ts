import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import type { CodecallSession } from '../../src/engine/supervise/session.js';
import { createExecuteCodeServer, type ExecuteCodeHost } from '../../src/mcp-server/execute-code-server.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const newCodecall = useCodecalls();

/** A real codecall whose sessions record the code of every execute (to observe what runs when). */
function observedHost(): { host: ExecuteCodeHost; executed: string[] } {
  const codecall = newCodecall();
  const executed: string[] = [];
  const host: ExecuteCodeHost = {
    toolDefinition: () => codecall.toolDefinition(),
    session: (options) => {
      const session = codecall.session(options);
      const observed: CodecallSession = {
        id: session.id,
        execute: (code, cellOptions) => {
          executed.push(code);
          return session.execute(code, cellOptions);
        },
        reset: () => session.reset(),
        close: () => session.close(),
      };
      return observed;
    },
  };
  return { host, executed };
}

async function connect(host: ExecuteCodeHost, startEarly: boolean) {
  const server = createExecuteCodeServer(host, { startEarly });
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  await server.connect(serverTransport);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientTransport);
  return { client, server };
}

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe('serving execute_code with startEarly', () => {
  it('starts the session interpreter before the first call, which then runs as its first cell', async () => {
    const { host, executed } = observedHost();
    const { client, server } = await connect(host, true);
    expect(executed).toEqual(['']);
    const first = await client.callTool({ name: 'execute_code', arguments: { code: 'x = 41\nprint(x + 1)' } });
    expect(textOf(first)).toBe('42\n');
    const second = await client.callTool({ name: 'execute_code', arguments: { code: 'print(x)' } });
    expect(textOf(second)).toBe('41\n');
    await client.close();
    await server.close();
  });

  it('starts nothing before the first call without it', async () => {
    const { host, executed } = observedHost();
    const { client, server } = await connect(host, false);
    expect(executed).toEqual([]);
    await client.close();
    await server.close();
  });
});
