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

/**
 * A tool whose calls wait for one another: each call answers "done" once `expected` calls are in flight at the same
 * time (or once its signal fires: call timeout, end of run), and the tool counts the most calls it saw in flight at
 * once. Concurrency is proven by that count, not by how long the calls took.
 */
export function createBarrierTool(expected: number) {
  let inFlight = 0;
  let maxInFlight = 0;
  let openBarrier!: () => void;
  const allInFlight = new Promise<void>((resolve) => {
    openBarrier = resolve;
  });
  const tool = defineTool({
    name: 'meet',
    description: `Answers "done" once ${expected} calls wait at the same time.`,
    inputSchema: { type: 'object', properties: {} },
    execute: async (_args, context) => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (inFlight >= expected) openBarrier();
      const aborted = new Promise<void>((resolve) => {
        if (context.signal.aborted) resolve();
        context.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      try {
        await Promise.race([allInFlight, aborted]);
      } finally {
        inFlight -= 1;
      }
      return 'done';
    },
  });
  return {
    tool,
    /** The most calls that were in flight at the same time. */
    get maxInFlight(): number {
      return maxInFlight;
    },
  };
}
