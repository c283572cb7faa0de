import { context, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add, createBarrierTool } from '../support/sample-tools.js';

const codecallWith = useCodecalls();
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});

afterAll(async () => {
  trace.disable();
  context.disable();
  await provider.shutdown();
});

const secretTool = defineTool({
  name: 'lookup',
  description: 'Look a key up.',
  inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  execute: ({ key }) => {
    if (key === 'missing') throw new Error(`no entry for ${String(key)}`);
    return 'value';
  },
});

describe('the trace of a run', () => {
  it('lists every call with offsets, status and bytes; 100 parallel calls overlap', async () => {
    const barrier = createBarrierTool(100);
    const codecall = codecallWith({ tools: [barrier.tool], limits: { maxConcurrentToolCalls: 100 } });
    const result = await codecall.execute(
      [
        'import asyncio',
        'from tools import aio',
        'async def main():',
        '    await asyncio.gather(*(aio.meet() for _ in range(100)))',
        'asyncio.run(main())',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const calls = result.trace?.calls ?? [];
    expect(calls).toHaveLength(100);
    expect(new Set(calls.map((call) => call.id)).size).toBe(100);
    for (const call of calls) {
      expect(call).toMatchObject({ tool: 'meet', status: 'ok', bytes: Buffer.byteLength('"done"') });
      expect(call.endMs).toBeGreaterThanOrEqual(call.startMs);
      expect(call.startMs).toBeGreaterThanOrEqual(0);
    }
    // All wait for one another: every call started before the first one ended.
    const firstEnd = Math.min(...calls.map((call) => call.endMs));
    expect(calls.every((call) => call.startMs <= firstEnd)).toBe(true);
  });

  it('marks failed calls, and a run without calls has no trace', async () => {
    const codecall = codecallWith({ tools: [secretTool] });
    const result = await codecall.execute(
      'from tools import lookup, ToolError\ntry:\n    lookup("missing")\nexcept ToolError:\n    pass',
    );
    expect(result.trace?.calls).toEqual([
      expect.objectContaining({ tool: 'lookup', status: 'error', bytes: 0, error: 'no entry for missing' }),
    ]);
    expect((await codecall.execute('print(1)')).trace).toBeUndefined();
  });
});

describe('OpenTelemetry spans', () => {
  it('records a run span with a child span per tool call, without argument values or error texts', async () => {
    exporter.reset();
    const codecall = codecallWith({ tools: [add, secretTool] });
    const result = await codecall.execute(
      [
        'from tools import add, lookup, ToolError',
        'add(a=1, b=2)',
        'lookup(key="hunter2")',
        'try:',
        '    lookup(key="missing")',
        'except ToolError:',
        '    pass',
      ].join('\n'),
    );
    const spans = exporter.getFinishedSpans();
    const run = spans.find((span) => span.name === 'codecall.run') as ReadableSpan;
    const calls = spans.filter((span) => span.name === 'codecall.tool_call');
    expect(run.attributes).toMatchObject({ 'codecall.status': 'success', 'codecall.tool_calls': 3 });
    expect(calls.map((span) => [span.attributes['codecall.tool'], span.attributes['codecall.status']])).toEqual([
      ['add', 'ok'],
      ['lookup', 'ok'],
      ['lookup', 'error'],
    ]);
    for (const span of calls) {
      expect(span.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
      expect(span.spanContext().traceId).toBe(run.spanContext().traceId);
    }
    expect(calls[1]?.attributes['codecall.result_bytes']).toBe(Buffer.byteLength('"value"'));
    expect(calls[2]?.status).toMatchObject({ code: 2, message: 'error' });
    const everything = JSON.stringify(spans.map((span) => [span.attributes, span.status, span.events]));
    expect(everything).not.toContain('hunter2');
    expect(everything).not.toContain('missing');
    expect(result.trace?.calls).toHaveLength(3);
  });
});
