import type { Codecall } from '../codecall.js';

/**
 * The model-facing description of `execute_code` for a codecall: what the tool does, the functions scripts can
 * import (or how to search them when there are many), and the configured limits.
 */
export function describeExecuteCode(codecall: Codecall): Promise<string> {
  return codecall.describe();
}
