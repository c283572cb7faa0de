import { CodecallError } from '../../core/errors.js';
import type { IsolationLevel } from '../../core/isolation.js';
import type { ExecuteResult } from '../../core/result.js';

/** Exception type of the result of empty code (no interpreter ran, so it is codecall's own name). */
export const EMPTY_CODE_ERROR_TYPE = 'EmptyCode';

/**
 * Checks the code handed to `execute` (a run's or a session's cell).
 * @throws CodecallError `INVALID_CONFIG` when it is not a string.
 */
export function checkCode(code: unknown): asserts code is string {
  if (typeof code !== 'string') {
    throw new CodecallError('INVALID_CONFIG', `execute takes the code as a string, got ${typeof code}`);
  }
}

/** Whether the code is empty or only whitespace: nothing to run, and the model should hear so. */
export function isEmptyCode(code: string): boolean {
  return code.trim() === '';
}

/**
 * The result for empty or whitespace-only code: an `error` the model can act on, not a `success` that printed
 * nothing. A value like any script failure (the code comes from the model, not the host's configuration); no
 * interpreter is started.
 */
export function emptyCodeResult(isolation: IsolationLevel): ExecuteResult {
  return {
    status: 'error',
    stdout: '',
    stderr: '',
    exitCode: null,
    error: {
      type: EMPTY_CODE_ERROR_TYPE,
      message: 'The code is empty: nothing ran.',
    },
    hint: 'Pass a complete Python script in `code` that prints the results you need.',
    toolCalls: 0,
    durationMs: 0,
    isolation,
  };
}
