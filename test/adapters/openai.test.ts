import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, describe, expect, it } from 'vitest';
import { createOpenAIAdapter, toChatCompletionsMessages } from '../../src/adapters/openai.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { CHART_SCRIPT, chartTools, expectedChartText, expectSalesChart } from './chart-turn.js';
import { startProviderStandIn } from './provider-stand-in.js';

const newCodecall = useCodecalls();
const codecall = newCodecall({ tools: chartTools });
const adapter = createOpenAIAdapter(codecall);
afterAll(() => adapter.close());

/** A Chat Completions reply whose message calls `execute_code` with `argumentsJson` (or answers `text`). */
function chatCompletion(message: { toolCalls?: { id: string; argumentsJson: string }[]; text?: string }) {
  const toolCalls = message.toolCalls?.map((call) => ({
    id: call.id,
    type: 'function',
    function: { name: 'execute_code', arguments: call.argumentsJson },
  }));
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'gpt-test',
    choices: [
      {
        index: 0,
        finish_reason: toolCalls ? 'tool_calls' : 'stop',
        logprobs: null,
        message: { role: 'assistant', content: message.text ?? null, refusal: null, tool_calls: toolCalls },
      },
    ],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** A Responses API reply with `output` items. */
function response(output: unknown[]) {
  return {
    id: 'resp_1',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model: 'gpt-test',
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    temperature: 1,
    top_p: 1,
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  };
}

/** The agent loop of the README, for Chat Completions. */
async function chatLoop(client: OpenAI, prompt: string, conversationId: string): Promise<ChatCompletionMessageParam[]> {
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: prompt }];
  const tools = [await adapter.chatCompletionsTool()];
  for (let step = 0; step < 5; step += 1) {
    const completion = await client.chat.completions.create({ model: 'gpt-test', messages, tools });
    const message = completion.choices[0]?.message;
    if (message === undefined) break;
    messages.push(message);
    if (!message.tool_calls?.length) break;
    const results = await adapter.handleChatCompletionsToolCalls(message.tool_calls, { conversationId });
    messages.push(...results.messages);
  }
  return messages;
}

describe('codecall/openai, Chat Completions', () => {
  it('runs a full turn through the SDK: the next request carries the tool message and the chart as a data URL', async () => {
    const argumentsJson = JSON.stringify({ code: CHART_SCRIPT });
    const standIn = await startProviderStandIn([
      chatCompletion({ toolCalls: [{ id: 'call_1', argumentsJson }] }),
      chatCompletion({ text: 'Total 14; chart attached.' }),
    ]);
    try {
      const client = new OpenAI({ apiKey: 'test-key', baseURL: `${standIn.url}/v1`, maxRetries: 0 });
      const messages = await chatLoop(client, 'Chart the monthly sales.', 'chart');
      expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Total 14; chart attached.' });
      expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([
        'POST /v1/chat/completions',
        'POST /v1/chat/completions',
      ]);

      const first = standIn.body<{ tools: unknown }>(0);
      expect(first.tools).toEqual([
        {
          type: 'function',
          function: {
            name: 'execute_code',
            description: expect.stringContaining('monthly_sales'),
            parameters: {
              type: 'object',
              properties: { code: { type: 'string', description: expect.any(String) } },
              required: ['code'],
              additionalProperties: false,
            },
            strict: true,
          },
        },
      ]);

      const sent = standIn.body<{ messages: unknown[] }>(1).messages;
      const imageMessage = sent[3] as { content: { image_url?: { url: string } }[] };
      const url = imageMessage.content[1]?.image_url?.url ?? '';
      expect(url.startsWith('data:image/png;base64,')).toBe(true);
      const base64 = url.slice('data:image/png;base64,'.length);
      const pngBytes = expectSalesChart(base64);
      expect(sent).toEqual([
        { role: 'user', content: 'Chart the monthly sales.' },
        {
          role: 'assistant',
          content: null,
          refusal: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'execute_code', arguments: argumentsJson } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: expectedChartText(pngBytes) },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Images saved by the execute_code call call_1:' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${base64}` } },
          ],
        },
      ]);
    } finally {
      await standIn.close();
    }
  });

  it('answers every call of a batch before the images, and leaves other tools to the caller', async () => {
    const results = await adapter.handleChatCompletionsToolCalls(
      [
        {
          id: 'a',
          type: 'function',
          function: { name: 'execute_code', arguments: JSON.stringify({ code: CHART_SCRIPT }) },
        },
        { id: 'other', type: 'function', function: { name: 'weather', arguments: '{}' } },
        { id: 'b', type: 'function', function: { name: 'execute_code', arguments: '{"code": "print(6 * 7)"}' } },
        { id: 'c', type: 'function', function: { name: 'execute_code', arguments: '{"code": ' } },
      ],
      { conversationId: 'batch' },
    );
    expect(results.toolMessages.map((message) => [message.tool_call_id, message.content])).toEqual([
      ['a', expect.stringContaining('total sales: 14')],
      ['b', '42\n'],
      ['c', 'execute_code: the arguments are not valid JSON; send {"code": "<Python script>"}'],
    ]);
    expect(results.imageMessage?.content).toEqual([
      { type: 'text', text: 'Images saved by the execute_code call a:' },
      { type: 'image_url', image_url: { url: expect.stringMatching(/^data:image\/png;base64,/) } },
    ]);
    expect(results.messages).toEqual([...results.toolMessages, results.imageMessage]);
  });

  it('renders a result without images as one tool message', async () => {
    const result = await codecall.execute('print("plain")');
    expect(await toChatCompletionsMessages('call_9', result)).toEqual([
      { role: 'tool', tool_call_id: 'call_9', content: 'plain\n' },
    ]);
  });
});

describe('codecall/openai, Responses API', () => {
  it('runs a full turn through the SDK: the next request carries function_call_output with the text and the chart', async () => {
    const argumentsJson = JSON.stringify({ code: CHART_SCRIPT });
    const functionCall = {
      type: 'function_call',
      id: 'fc_1',
      call_id: 'call_1',
      name: 'execute_code',
      arguments: argumentsJson,
      status: 'completed',
    };
    const answer = {
      type: 'message',
      id: 'msg_1',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'Total 14.', annotations: [] }],
    };
    const standIn = await startProviderStandIn([response([functionCall]), response([answer])]);
    try {
      const client = new OpenAI({ apiKey: 'test-key', baseURL: `${standIn.url}/v1`, maxRetries: 0 });
      const tools = [await adapter.responsesTool()];
      let reply = await client.responses.create({ model: 'gpt-test', input: 'Chart the monthly sales.', tools });
      for (let step = 0; step < 5; step += 1) {
        const outputs = await adapter.handleResponsesOutput(reply.output, { conversationId: 'responses' });
        if (outputs.length === 0) break;
        reply = await client.responses.create({
          model: 'gpt-test',
          previous_response_id: reply.id,
          input: outputs,
          tools,
        });
      }
      const text = reply.output_text;
      expect(text).toBe('Total 14.');
      expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([
        'POST /v1/responses',
        'POST /v1/responses',
      ]);
      expect(standIn.body<{ tools: unknown }>(0).tools).toEqual([
        {
          type: 'function',
          name: 'execute_code',
          description: expect.stringContaining('add('),
          parameters: expect.objectContaining({ required: ['code'], additionalProperties: false }),
          strict: true,
        },
      ]);

      const sent = standIn.body<{ input: unknown[]; previous_response_id: string }>(1);
      expect(sent.previous_response_id).toBe('resp_1');
      const output = (sent.input[0] as { output: { image_url?: string }[] }).output;
      const base64 = (output[1]?.image_url ?? '').replace(/^data:image\/png;base64,/, '');
      const pngBytes = expectSalesChart(base64);
      expect(sent.input).toEqual([
        {
          type: 'function_call_output',
          call_id: 'call_1',
          output: [
            { type: 'input_text', text: expectedChartText(pngBytes) },
            { type: 'input_image', image_url: `data:image/png;base64,${base64}` },
          ],
        },
      ]);
    } finally {
      await standIn.close();
    }
  });

  it('answers a result without images with a string output, and refuses calls of other functions', async () => {
    const call = {
      type: 'function_call' as const,
      call_id: 'call_2',
      name: 'execute_code',
      arguments: '{"code":"print(1)"}',
    };
    expect(await adapter.handleResponsesFunctionCall(call, { conversationId: 'plain' })).toEqual({
      type: 'function_call_output',
      call_id: 'call_2',
      output: '1\n',
    });
    await expect(adapter.handleResponsesFunctionCall({ ...call, name: 'weather' })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('keeps variables within a conversation and apart between conversations', async () => {
    const call = (code: string) => ({
      type: 'function_call' as const,
      call_id: 'c',
      name: 'execute_code',
      arguments: JSON.stringify({ code }),
    });
    await adapter.handleResponsesFunctionCall(call('total = 7'), { conversationId: 'alice' });
    expect((await adapter.handleResponsesFunctionCall(call('print(total)'), { conversationId: 'alice' })).output).toBe(
      '7\n',
    );
    const other = await adapter.handleResponsesFunctionCall(call('print(total)'), { conversationId: 'bob' });
    expect(other.output).toContain("NameError: name 'total' is not defined");
  });
});
