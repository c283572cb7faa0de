import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages';
import { afterAll, describe, expect, it } from 'vitest';
import { createAnthropicAdapter, toToolResultBlock } from '../../src/adapters/anthropic.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { CHART_SCRIPT, chartTools, expectedChartText, expectSalesChart } from './chart-turn.js';
import { startProviderStandIn } from './provider-stand-in.js';

const newCodecall = useCodecalls();
const codecall = newCodecall({ tools: chartTools });
const adapter = createAnthropicAdapter(codecall);
afterAll(() => adapter.close());

/** A Messages API reply with `content` blocks. */
function message(content: unknown[], stopReason: string) {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-test',
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
}

describe('codecall/anthropic', () => {
  it('runs a full turn through the SDK: the next request carries a tool_result with text and image blocks', async () => {
    const toolUse = { type: 'tool_use', id: 'toolu_1', name: 'execute_code', input: { code: CHART_SCRIPT } };
    const standIn = await startProviderStandIn([
      message([{ type: 'text', text: 'Let me chart it.' }, toolUse], 'tool_use'),
      message([{ type: 'text', text: 'Total 14.' }], 'end_turn'),
    ]);
    try {
      const client = new Anthropic({ apiKey: 'test-key', baseURL: standIn.url, maxRetries: 0 });
      const messages: MessageParam[] = [{ role: 'user', content: 'Chart the monthly sales.' }];
      const tools = [await adapter.tool()];
      for (let step = 0; step < 5; step += 1) {
        const reply = await client.messages.create({ model: 'claude-test', max_tokens: 1024, messages, tools });
        messages.push({ role: 'assistant', content: reply.content });
        if (reply.stop_reason !== 'tool_use') break;
        messages.push({
          role: 'user',
          content: await adapter.handleToolUses(reply.content, { conversationId: 'chart' }),
        });
      }
      expect(messages.at(-1)).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'Total 14.' }] });
      expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([
        'POST /v1/messages',
        'POST /v1/messages',
      ]);
      expect(standIn.body<{ tools: unknown }>(0).tools).toEqual([
        {
          name: 'execute_code',
          description: expect.stringContaining('monthly_sales'),
          input_schema: {
            type: 'object',
            properties: { code: { type: 'string', description: expect.any(String) } },
            required: ['code'],
            additionalProperties: false,
          },
        },
      ]);

      const sent = standIn.body<{ messages: unknown[] }>(1).messages;
      const toolResult = (sent[2] as { content: { content: { source?: { data: string } }[] }[] }).content[0];
      const base64 = toolResult?.content[1]?.source?.data ?? '';
      const pngBytes = expectSalesChart(base64);
      expect(sent).toEqual([
        { role: 'user', content: 'Chart the monthly sales.' },
        { role: 'assistant', content: [{ type: 'text', text: 'Let me chart it.' }, toolUse] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              content: [
                { type: 'text', text: expectedChartText(pngBytes) },
                { type: 'image', source: { type: 'base64', media_type: 'image/png', data: base64 } },
              ],
            },
          ],
        },
      ]);
    } finally {
      await standIn.close();
    }
  });

  it('marks a failed run and bad input as is_error, and refuses uses of other tools', async () => {
    const failed = await toToolResultBlock('toolu_2', await codecall.execute('1 / 0'));
    expect(failed).toEqual({
      type: 'tool_result',
      tool_use_id: 'toolu_2',
      content: [{ type: 'text', text: expect.stringContaining('ZeroDivisionError') }],
      is_error: true,
    });
    expect(await adapter.handleToolUse({ id: 'toolu_3', name: 'execute_code', input: 'print(1)' })).toEqual({
      type: 'tool_result',
      tool_use_id: 'toolu_3',
      content: [{ type: 'text', text: 'execute_code takes an object {"code": "<Python script>"}, got string' }],
      is_error: true,
    });
    await expect(adapter.handleToolUse({ id: 'toolu_4', name: 'weather', input: {} })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('keeps variables within a conversation and apart between conversations', async () => {
    const use = (code: string) => ({ id: 'toolu_5', name: 'execute_code', input: { code } });
    await adapter.handleToolUse(use('notes = ["a"]'), { conversationId: 'alice' });
    const same = await adapter.handleToolUse(use('notes.append("b"); print(notes)'), { conversationId: 'alice' });
    expect(same.content).toEqual([{ type: 'text', text: "['a', 'b']\n" }]);
    const other = await adapter.handleToolUse(use('print(notes)'), { conversationId: 'bob' });
    expect(other.is_error).toBe(true);
    expect(JSON.stringify(other.content)).toContain("NameError: name 'notes' is not defined");
  });
});
