import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import {
  type CallToolResult,
  ElicitRequestSchema,
  type LoggingMessageNotification,
  LoggingMessageNotificationSchema,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createExecuteCodeServer } from '../../src/mcp-server/execute-code-server.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { NO_APPROVAL_HOOK_REASON } from '../../src/tools/tool-approval.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const deleted: string[] = [];
const deleteFile = defineTool({
  name: 'delete_file',
  description: 'Delete a file.',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  needsApproval: true,
  execute: ({ path }) => {
    deleted.push(String(path));
    return 'deleted';
  },
});
const codecall = useCodecalls()({ tools: [add, deleteFile] });

/** A client connected in memory to a fresh `execute_code` server of the codecall. */
async function connect(capabilities: ConstructorParameters<typeof Client>[1] = {}) {
  const server = createExecuteCodeServer(codecall);
  const client = new Client({ name: 'codecall-test', version: '1.0.0' }, capabilities);
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  await server.connect(serverTransport);
  await client.connect(clientTransport);
  return {
    client,
    async close() {
      await client.close();
      await server.close();
    },
  };
}

function textOf(result: unknown): string {
  return ((result as CallToolResult).content[0] as { text: string }).text;
}

const DELETE_TWO = [
  'from tools import delete_file, ToolError',
  'for name in ["a.txt", "b.txt"]:',
  '    try:',
  '        print(delete_file(name))',
  '    except ToolError as error:',
  '        print(error)',
].join('\n');

describe('serve: live notifications', () => {
  it('sends progress for a call with a progress token, and log messages for its tool calls', async () => {
    const connection = await connect();
    try {
      const logs: LoggingMessageNotification['params'][] = [];
      connection.client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
        logs.push(notification.params);
      });
      const progress: Progress[] = [];
      const result = await connection.client.callTool(
        { name: 'execute_code', arguments: { code: 'from tools import add\nprint(add(a=1, b=2), add(a="x", b=1))' } },
        undefined,
        { onprogress: (update) => progress.push(update) },
      );
      expect(textOf(result)).toContain('argument');
      expect(progress.map((update) => update.progress)).toEqual([1, 2, 3]);
      expect(progress[0]?.message).toBe('the script is running');
      expect(progress[1]?.message).toMatch(/^add returned after \d+ ms$/);
      expect(progress[2]?.message).toMatch(/^add failed after \d+ ms$/);
      expect(logs.map((log) => [log.level, (log.data as { event: string }).event])).toEqual([
        ['debug', 'tool-call-start'],
        ['info', 'tool-call-end'],
        ['debug', 'tool-call-start'],
        ['warning', 'tool-call-end'],
      ]);
      expect(logs[3]).toMatchObject({ logger: 'codecall', data: { tool: 'add' } });
      expect(JSON.stringify(logs[3]?.data)).toContain('argument');
    } finally {
      await connection.close();
    }
  });

  it('honours the log level the client sets', async () => {
    const connection = await connect();
    try {
      const logs: LoggingMessageNotification['params'][] = [];
      connection.client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
        logs.push(notification.params);
      });
      await connection.client.setLoggingLevel('info');
      await connection.client.callTool({
        name: 'execute_code',
        arguments: { code: 'from tools import add\nadd(a=1, b=2)' },
      });
      expect(logs.map((log) => log.level)).toEqual(['info']);
    } finally {
      await connection.close();
    }
  });
});

describe('serve: approval through elicitation', () => {
  it('asks the person at a client that supports elicitation, call by call', async () => {
    const connection = await connect({ capabilities: { elicitation: {} } });
    try {
      const questions: string[] = [];
      connection.client.setRequestHandler(ElicitRequestSchema, async (request) => {
        questions.push(request.params.message);
        return questions.length === 1 ? { action: 'accept', content: { allow: true } } : { action: 'decline' };
      });
      deleted.length = 0;
      const result = await connection.client.callTool({ name: 'execute_code', arguments: { code: DELETE_TWO } });
      expect(textOf(result)).toContain('deleted\ndelete_file: the call was denied: the user declined it\n');
      expect(questions).toEqual([
        'The script wants to call the tool "delete_file" with {"path":"a.txt"}. Allow this call?',
        'The script wants to call the tool "delete_file" with {"path":"b.txt"}. Allow this call?',
      ]);
      expect(deleted).toEqual(['a.txt']);
    } finally {
      await connection.close();
    }
  });

  it('denies when the client cannot be asked (and the codecall has no hook)', async () => {
    const connection = await connect();
    try {
      deleted.length = 0;
      const result = await connection.client.callTool({ name: 'execute_code', arguments: { code: DELETE_TWO } });
      expect(textOf(result)).toContain(`delete_file: the call was denied: ${NO_APPROVAL_HOOK_REASON}`);
      expect(deleted).toEqual([]);
    } finally {
      await connection.close();
    }
  });
});
