import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, describe, expect, it } from 'vitest';
import { createAiSdkAdapter, toAiSdkToolOutput } from '../../src/adapters/ai-sdk.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { CHART_SCRIPT, chartTools, expectedChartText, expectSalesChart } from './chart-turn.js';

const newCodecall = useCodecalls();
const codecall = newCodecall({ tools: chartTools });
const adapter = createAiSdkAdapter(codecall);
afterAll(() => adapter.close());

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A mock model that asks for `execute_code` with `code`, then answers "done". */
function modelCalling(code: unknown) {
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      const asked = options.prompt.some((message) => message.role === 'tool');
      if (asked) {
        return {
          content: [{ type: 'text', text: 'done' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'execute_code', input: JSON.stringify(code) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    },
  });
}

describe('codecall/ai-sdk', () => {
  it('runs a full turn through generateText: the next model call carries the text and the chart', async () => {
    const model = modelCalling({ code: CHART_SCRIPT });
    const result = await generateText({
      model,
      prompt: 'Chart the monthly sales.',
      tools: await adapter.tools({ conversationId: 'chart' }),
      stopWhen: stepCountIs(3),
    });
    expect(result.text).toBe('done');
    expect(model.doGenerateCalls).toHaveLength(2);

    const firstCall = model.doGenerateCalls[0];
    expect(firstCall?.tools).toEqual([
      expect.objectContaining({
        type: 'function',
        name: 'execute_code',
        inputSchema: expect.objectContaining({ required: ['code'] }),
      }),
    ]);
    const toolMessage = model.doGenerateCalls[1]?.prompt.at(-1);
    const output = toolMessage?.role === 'tool' ? toolMessage.content[0] : undefined;
    expect(output?.type).toBe('tool-result');
    const value = output?.type === 'tool-result' && output.output.type === 'content' ? output.output.value : [];
    expect(value).toHaveLength(2);
    const image = value[1];
    const base64 = image?.type === 'image-data' ? image.data : '';
    const pngBytes = expectSalesChart(base64);
    expect(toolMessage).toEqual({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'call-1',
          toolName: 'execute_code',
          output: {
            type: 'content',
            value: [
              { type: 'text', text: expectedChartText(pngBytes) },
              { type: 'image-data', data: base64, mediaType: 'image/png' },
            ],
          },
        },
      ],
    });
    expect(result.steps[0]?.toolResults[0]?.output).toMatchObject({ status: 'success', toolCalls: 5 });
  });

  it('keeps variables within a conversation and apart between conversations', async () => {
    const first = await generateText({
      model: modelCalling({ code: 'secret = 42\nprint("set")' }),
      prompt: 'set it',
      tools: await adapter.tools({ conversationId: 'alice' }),
      stopWhen: stepCountIs(3),
    });
    expect(first.steps[0]?.toolResults[0]?.output).toMatchObject({ status: 'success', stdout: 'set\n' });
    const again = await generateText({
      model: modelCalling({ code: 'print(secret)' }),
      prompt: 'read it',
      tools: await adapter.tools({ conversationId: 'alice' }),
      stopWhen: stepCountIs(3),
    });
    expect(again.steps[0]?.toolResults[0]?.output).toMatchObject({ status: 'success', stdout: '42\n' });
    const other = await generateText({
      model: modelCalling({ code: 'print(secret)' }),
      prompt: 'read it',
      tools: await adapter.tools({ conversationId: 'bob' }),
      stopWhen: stepCountIs(3),
    });
    expect(other.steps[0]?.toolResults[0]?.output).toMatchObject({
      status: 'error',
      error: expect.objectContaining({ type: 'NameError' }),
    });
  });

  it('answers input without a string `code` as a tool error the model sees, without running anything', async () => {
    const model = modelCalling({ script: 'print(1)' });
    await generateText({
      model,
      prompt: 'go',
      tools: await adapter.tools({ conversationId: 'bad-input' }),
      stopWhen: stepCountIs(3),
    });
    expect(adapter.sessions.has('bad-input')).toBe(false);
    const toolMessage = model.doGenerateCalls[1]?.prompt.at(-1);
    const output = toolMessage?.role === 'tool' ? toolMessage.content[0] : undefined;
    const modelOutput = output?.type === 'tool-result' ? output.output : undefined;
    expect(modelOutput).toMatchObject({ type: 'error-text' });
    expect(JSON.stringify(modelOutput)).toContain("argument 'code' must be a string");
  });

  it('renders a failed run as text with its status and no images', async () => {
    const result = await codecall.execute('raise ValueError("bad month")');
    const output = await toAiSdkToolOutput(result);
    expect(output).toEqual({
      type: 'content',
      value: [{ type: 'text', text: expect.stringContaining('ValueError: bad month') }],
    });
    expect(JSON.stringify(output)).toContain('[status: error]');
  });
});
