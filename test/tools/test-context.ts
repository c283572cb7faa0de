import type { ToolContext } from '../../src/tools/types.js';

/** A tool context for calling handlers directly in tests. */
export function createTestContext(toolName: string, signal: AbortSignal = new AbortController().signal): ToolContext {
  return { signal, runId: 'test-run', toolName, artifactsDir: '' };
}
