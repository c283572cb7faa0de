import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();

const wait = defineTool({
  name: 'wait',
  description: 'Answers after `ms` milliseconds.',
  inputSchema: z.object({ ms: z.number() }),
  execute: ({ ms }) => new Promise((resolve) => setTimeout(() => resolve(ms), ms)),
});

// All calls of a run share one timer, armed for the oldest call: each must still time out at its own deadline.
describe('tool call timeouts', () => {
  it('times out each call at its own deadline, never before, while quick calls go through', async () => {
    const codecall = codecallWith({ tools: [wait], limits: { toolCallTimeoutMs: 300 } });
    const result = await codecall.execute(
      [
        'import threading, time',
        'from tools import wait, ToolError',
        'elapsed = {}',
        'def stuck(name, delay):',
        '    time.sleep(delay)',
        '    start = time.monotonic()',
        '    try:',
        '        wait(ms=10_000)',
        '    except ToolError as error:',
        '        elapsed[name] = (time.monotonic() - start, "timed out" in str(error))',
        'threads = [threading.Thread(target=stuck, args=(name, delay)) for name, delay in (("a", 0), ("b", 0.15))]',
        'for thread in threads:',
        '    thread.start()',
        'quick = [wait(ms=10) for _ in range(5)]',
        'for thread in threads:',
        '    thread.join()',
        'print(quick, elapsed["a"][1], elapsed["b"][1], min(elapsed["a"][0], elapsed["b"][0]) >= 0.29)',
      ].join('\n'),
    );
    expect(result.stdout).toBe('[10, 10, 10, 10, 10] True True True\n');
  });

  it('starts the timeout of a queued call when it starts, not when it was sent', async () => {
    const codecall = codecallWith({
      tools: [wait],
      limits: { toolCallTimeoutMs: 400, maxConcurrentToolCalls: 1 },
    });
    const result = await codecall.execute(
      [
        'import asyncio',
        'import tools.aio as aio',
        'async def main():',
        '    return await asyncio.gather(aio.wait(ms=250), aio.wait(ms=250))',
        'print(asyncio.run(main()))',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: '[250, 250]\n' });
  });
});
