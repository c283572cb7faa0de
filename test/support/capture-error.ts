import { expect } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';

/** Runs `run`, which must throw a CodecallError, and returns that error for closer checks. */
export function captureError(run: () => unknown): CodecallError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CodecallError);
    return error as CodecallError;
  }
  throw new Error('expected a CodecallError');
}
