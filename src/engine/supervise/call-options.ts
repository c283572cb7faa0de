import { CodecallError } from '../../core/errors.js';
import { type Limits, resolveLimits } from '../../core/limits.js';

/** The per-call options that change limits: a run's `execute` and a session's cell take the same. */
export interface CallLimitOptions {
  /** Wall-clock limit of this call, overriding `limits.timeoutMs`. */
  readonly timeoutMs?: number | undefined;
  /** Other limits for this call only. */
  readonly limits?: Partial<Limits> | undefined;
}

/**
 * The limits of one call: `base` itself when the call changes none (no merge on the hot path), else `base` with the
 * call's `limits` and `timeoutMs` over it, checked.
 * @throws CodecallError `INVALID_CONFIG` naming a bad limit.
 */
export function limitsForCall(base: Limits, call: CallLimitOptions): Limits {
  if (call.timeoutMs === undefined && call.limits === undefined) return base;
  return resolveLimits(
    { ...call.limits, ...(call.timeoutMs !== undefined ? { timeoutMs: call.timeoutMs } : {}) },
    base,
  );
}

/**
 * Checks the code handed to `execute`.
 * @throws CodecallError `INVALID_CONFIG` when it is not a string.
 */
export function checkCode(code: unknown): asserts code is string {
  if (typeof code !== 'string') {
    throw new CodecallError('INVALID_CONFIG', `execute takes the code as a string, got ${typeof code}`);
  }
}
