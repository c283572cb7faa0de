import { CodecallError } from './errors.js';
import { unknownKeyError } from './option-checks.js';
import { isRecord } from './values.js';

/** Wall-clock limit of one run. */
export const DEFAULT_TIMEOUT_MS = 300_000;
/** Tool calls one run may make; calls past it fail with "tool call limit reached (N)". */
export const DEFAULT_MAX_TOOL_CALLS = 1_000;
/** How long one tool call may take before the script gets a ToolError. */
export const DEFAULT_TOOL_CALL_TIMEOUT_MS = 60_000;
/** stdout bytes the model sees (40 % head, 60 % tail). */
export const DEFAULT_MAX_STDOUT_BYTES = 50_000;
/** stderr bytes kept in the result. */
export const DEFAULT_MAX_STDERR_BYTES = 10_000;
/** Bytes of an exception's message, and of its traceback, kept in the result (head and tail, like stdout). */
export const DEFAULT_MAX_ERROR_BYTES = 10_000;
/** Total bytes a run may print (stdout and stderr together) before it is killed with reason `output`. */
export const DEFAULT_MAX_OUTPUT_BYTES = 10 * 1024 * 1024;
/** Address space of each process of the run (RLIMIT_AS), and the memory cgroup limit of the whole run. */
export const DEFAULT_MEMORY_BYTES = 1024 * 1024 * 1024;
/** Processes and threads the run may have at once: room for a 100-worker thread pool; the pids cgroup stops bombs. */
export const DEFAULT_MAX_PROCESSES = 256;
/** Largest file the run may write (RLIMIT_FSIZE). */
export const DEFAULT_MAX_FILE_BYTES = 100 * 1024 * 1024;
/**
 * Bytes a sandboxed run may keep in files at once: its working directory, TMPDIR and /tmp share one tmpfs of this
 * size (RAM, charged to the run's memory cgroup, so half of the default memory limit). Writes past it fail (ENOSPC).
 */
export const DEFAULT_MAX_DISK_BYTES = 512 * 1024 * 1024;
/** Largest frame on the tool channel, either way. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** Open files per process (RLIMIT_NOFILE). */
export const DEFAULT_MAX_OPEN_FILES = 1_024;
/** Tool calls that may be in flight at once; more wait their turn. */
export const DEFAULT_MAX_CONCURRENT_TOOL_CALLS = 128;

/** Resource limits of one run. Every field is optional in configuration; see {@link resolveLimits}. */
export interface Limits {
  /** Wall-clock limit of the run in milliseconds. */
  timeoutMs: number;
  /** Tool calls one run may make. */
  maxToolCalls: number;
  /** Time one tool call may take, in milliseconds. */
  toolCallTimeoutMs: number;
  /** stdout bytes kept for the model (head 40 %, tail 60 %). */
  maxStdoutBytes: number;
  /** stderr bytes kept. */
  maxStderrBytes: number;
  /** Bytes of the exception's message, and of its traceback, kept (head 40 %, tail 60 %). */
  maxErrorBytes: number;
  /** Total bytes the run may print before it is killed (reason `output`). */
  maxOutputBytes: number;
  /** Memory of each process (RLIMIT_AS) and of the whole run where cgroups are available. */
  memoryBytes: number;
  /** Processes and threads the run may have at once. */
  maxProcesses: number;
  /** Largest file the run may write. */
  maxFileBytes: number;
  /** Bytes the run's files may take together under bubblewrap (working directory, TMPDIR and /tmp). */
  maxDiskBytes: number;
  /** Largest frame on the tool channel. */
  maxFrameBytes: number;
  /** Open files per process. */
  maxOpenFiles: number;
  /** CPU seconds the run may use; defaults to the wall-clock limit rounded up. */
  cpuSeconds: number;
  /** Tool calls in flight at once. */
  maxConcurrentToolCalls: number;
}

/** Default limits, as documented in the README and stated to the model. */
export const DEFAULT_LIMITS: Readonly<Omit<Limits, 'cpuSeconds'>> = Object.freeze({
  timeoutMs: DEFAULT_TIMEOUT_MS,
  maxToolCalls: DEFAULT_MAX_TOOL_CALLS,
  toolCallTimeoutMs: DEFAULT_TOOL_CALL_TIMEOUT_MS,
  maxStdoutBytes: DEFAULT_MAX_STDOUT_BYTES,
  maxStderrBytes: DEFAULT_MAX_STDERR_BYTES,
  maxErrorBytes: DEFAULT_MAX_ERROR_BYTES,
  maxOutputBytes: DEFAULT_MAX_OUTPUT_BYTES,
  memoryBytes: DEFAULT_MEMORY_BYTES,
  maxProcesses: DEFAULT_MAX_PROCESSES,
  maxFileBytes: DEFAULT_MAX_FILE_BYTES,
  maxDiskBytes: DEFAULT_MAX_DISK_BYTES,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  maxOpenFiles: DEFAULT_MAX_OPEN_FILES,
  maxConcurrentToolCalls: DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
});

const LIMIT_MINIMUMS: Readonly<Record<keyof Limits, number>> = {
  timeoutMs: 1,
  maxToolCalls: 0,
  toolCallTimeoutMs: 1,
  maxStdoutBytes: 100,
  maxStderrBytes: 100,
  maxErrorBytes: 100,
  maxOutputBytes: 1_000,
  memoryBytes: 32 * 1024 * 1024,
  maxProcesses: 1,
  maxFileBytes: 1,
  maxDiskBytes: 1024 * 1024,
  maxFrameBytes: 1_024,
  maxOpenFiles: 16,
  cpuSeconds: 1,
  maxConcurrentToolCalls: 1,
};

/**
 * Merges user limits over the defaults (and over `base`, when given), checking every value.
 * @throws CodecallError `INVALID_CONFIG` naming the bad key and value.
 */
export function resolveLimits(overrides: Partial<Limits> | undefined, base?: Limits): Limits {
  const merged: Record<string, number> = { ...DEFAULT_LIMITS, ...(base ?? {}) };
  if (overrides !== undefined) {
    if (!isRecord(overrides)) {
      throw new CodecallError('INVALID_CONFIG', `limits must be an object, got ${JSON.stringify(overrides)}`, {
        value: overrides,
      });
    }
    for (const [key, value] of Object.entries(overrides)) {
      if (value === undefined) continue;
      if (!Object.hasOwn(LIMIT_MINIMUMS, key)) throw unknownKeyError(key, 'limits', Object.keys(LIMIT_MINIMUMS));
      const minimum = LIMIT_MINIMUMS[key as keyof Limits];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
        throw new CodecallError(
          'INVALID_CONFIG',
          `limits.${key} must be an integer >= ${minimum}, got ${JSON.stringify(value)}`,
          { key, value },
        );
      }
      merged[key] = value;
    }
  }
  if (overrides?.cpuSeconds === undefined && (base?.cpuSeconds === undefined || overrides?.timeoutMs !== undefined)) {
    merged.cpuSeconds = Math.max(1, Math.ceil((merged.timeoutMs ?? DEFAULT_TIMEOUT_MS) / 1000));
  }
  return merged as unknown as Limits;
}

/** What one call (`execute`, a session cell) may set over the limits it runs under. */
export interface CallLimitOptions {
  /** Wall-clock limit of this call, over `limits.timeoutMs`. */
  readonly timeoutMs?: number | undefined;
  readonly limits?: Partial<Limits> | undefined;
}

/**
 * The limits of one call: `base` with the call's `limits` and `timeoutMs` over it, or `base` itself when the call
 * sets neither.
 * @throws CodecallError `INVALID_CONFIG` naming the bad key and value.
 */
export function resolveCallLimits(base: Limits, call: CallLimitOptions): Limits {
  if (call.timeoutMs === undefined && call.limits === undefined) return base;
  return resolveLimits(
    { ...call.limits, ...(call.timeoutMs !== undefined ? { timeoutMs: call.timeoutMs } : {}) },
    base,
  );
}
