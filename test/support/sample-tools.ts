import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define-tool.js';

/** Resolves after `milliseconds` (the standard library's promise timer). */
export { sleep };

/** A zod-typed tool: `add(a, b)`. */
export const add = defineTool({
  name: 'add',
  description: 'Add two numbers.',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b,
});

/** A JSON Schema tool that takes 100 ms: `slow()` → "done". */
export const slow = defineTool({
  name: 'slow',
  description: 'Wait 100 ms, then answer "done".',
  inputSchema: { type: 'object', properties: {} },
  execute: async () => {
    await sleep(100);
    return 'done';
  },
});
