import { describe, expect, it } from 'vitest';
import { createAiSdkAdapter } from '../../src/adapters/ai-sdk.js';
import { createOpenAIAdapter } from '../../src/adapters/openai.js';
import type { RunEvent } from '../../src/engine/supervise/run-events.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const codecall = useCodecalls()({ tools: [add] });

describe('adapters pass onEvent through to the conversation session', () => {
  it('AI SDK tool: every call of the tool reports its events', async () => {
    const events: RunEvent[] = [];
    const adapter = createAiSdkAdapter(codecall);
    try {
      const tool = await adapter.tool({ conversationId: 'c1', onEvent: (event) => events.push(event) });
      await tool.execute?.(
        { code: 'from tools import add\nprint(add(a=2, b=3))' },
        { toolCallId: 'call-1', messages: [] },
      );
      expect(events.map((event) => event.type)).toEqual([
        'run-start',
        'tool-call-start',
        'tool-call-end',
        'stdout',
        'run-end',
      ]);
      expect(events[0]).toMatchObject({ cell: 1 });
    } finally {
      await adapter.close();
    }
  });

  it('OpenAI handler: the run options reach the session', async () => {
    const events: RunEvent[] = [];
    const adapter = createOpenAIAdapter(codecall);
    try {
      await adapter.handleResponsesFunctionCall(
        {
          type: 'function_call',
          call_id: 'call-1',
          name: 'execute_code',
          arguments: JSON.stringify({ code: 'print("hi")' }),
        },
        { onEvent: (event) => events.push(event) },
      );
      expect(events.filter((event) => event.type === 'stdout')).toEqual([{ type: 'stdout', text: 'hi\n' }]);
    } finally {
      await adapter.close();
    }
  });
});
