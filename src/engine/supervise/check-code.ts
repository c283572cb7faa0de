import { CodecallError } from '../../core/errors.js';

/**
 * Checks the code handed to `execute` (a run's or a session's cell).
 * @throws CodecallError `INVALID_CONFIG` when it is not a string.
 */
export function checkCode(code: unknown): asserts code is string {
  if (typeof code !== 'string') {
    throw new CodecallError('INVALID_CONFIG', `execute takes the code as a string, got ${typeof code}`);
  }
}
