import { CodecallAbortError, CodecallError } from '../../core/errors.js';
import { type Limits, resolveCallLimits } from '../../core/limits.js';
import { randomHex } from '../../core/random-bytes.js';
import type { ExecuteResult } from '../../core/result.js';
import type { ApproveToolCall } from '../../tools/tool-approval.js';
import { launchInterpreter, type RunEnvironment } from '../launch/interpreter-launch.js';
import { createRunId } from '../launch/run-directory.js';
import { finishResult, outputPathsOf } from '../result/finish-result.js';
import { checkCode, emptyCodeResult, isEmptyCode } from './check-code.js';
import { type RunEventListener, runEventsFor } from './run-events.js';
import { SessionProcess } from './session-process.js';
import type { SessionSlots, SlotHolder } from './session-slots.js';

/** Time without a cell after which a session's interpreter is stopped; its next cell starts fresh (`stateLost`). */
export const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** Session interpreters alive at once per codecall; past it the least recently used idle one is stopped. */
export const DEFAULT_MAX_LIVE_SESSIONS = 16;
export { CELL_INTERRUPT_GRACE_MS } from './stop-policy.js';

/** Options of `codecall.session()`. */
export interface SessionOptions {
  /**
   * Limits of this session over the codecall's. Process limits (memory, processes, file size, open files, frame
   * size) hold for the interpreter's whole life; time, CPU, tool-call and output limits apply to each cell.
   */
  readonly limits?: Partial<Limits> | undefined;
  /** Stop the interpreter after this long without a cell (default {@link DEFAULT_SESSION_IDLE_MS}). */
  readonly idleTimeoutMs?: number | undefined;
}

/** Per-cell options of `session.execute`. */
export interface CellOptions {
  /**
   * Aborting interrupts the cell (then kills the interpreter if it does not stop) and rejects with an AbortError
   * carrying the cell's result (status `aborted`, what it printed up to the abort).
   */
  readonly signal?: AbortSignal | undefined;
  /** Receives the cell's live events (`run-start` ... `run-end`); see {@link RunEvent}. */
  readonly onEvent?: RunEventListener | undefined;
  /** Approval hook for this cell's calls, in place of the codecall's `approveToolCall`. */
  readonly approveToolCall?: ApproveToolCall | undefined;
  /** Wall-clock limit of this cell, overriding `limits.timeoutMs`. */
  readonly timeoutMs?: number | undefined;
  /** Other per-cell limits (time, CPU, tool calls, output) for this cell only. */
  readonly limits?: Partial<Limits> | undefined;
}

/**
 * A persistent interpreter: each `execute` runs a cell in one namespace, so variables and imports survive between
 * calls, like a notebook. Same isolation, environment and limits as a fresh run; an exception ends the cell, not the
 * session. A cell that overruns gets a KeyboardInterrupt, then the interpreter is killed and the result says
 * `stateLost: true`. Cells run one at a time, in call order.
 */
export interface CodecallSession {
  /** Random id of the session (16 hex characters). */
  readonly id: string;
  /** Runs one cell. Resolves with the result for every failure of the code; rejects for host problems. */
  execute(code: string, options?: CellOptions): Promise<ExecuteResult>;
  /** Discards the interpreter and its state (a running cell ends `aborted`); the next cell starts fresh. */
  reset(): Promise<void>;
  /** Stops the interpreter for good; later calls reject with `CLOSED`. */
  close(): Promise<void>;
}

/** What a session needs from the codecall that made it. */
export interface SessionContext {
  /** The run environment (interpreter, runner, tools), prepared on first use. */
  prepare(): Promise<RunEnvironment>;
  /** The codecall's cap on live session interpreters. */
  readonly slots: SessionSlots;
  /** Takes cleanup work (killing leftovers, removing directories) that `codecall.close()` must wait for. */
  deferCleanup(cleanup: Promise<void>): void;
  /** The session closed: forget it. */
  onClose(session: InterpreterSession): void;
}

/** Options of {@link InterpreterSession}. */
export interface InterpreterSessionOptions {
  readonly context: SessionContext;
  /** The session's limits (codecall limits with the session's own over them), already resolved. */
  readonly limits: Limits;
  readonly idleTimeoutMs: number;
}

/** A session of one codecall; see {@link CodecallSession}. */
export class InterpreterSession implements CodecallSession, SlotHolder {
  readonly id = randomHex(8);
  readonly #context: SessionContext;
  readonly #limits: Limits;
  readonly #idleTimeoutMs: number;
  #process: SessionProcess | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #busy = false;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** The interpreter was replaced since the last result was delivered: the next result says `stateLost`. */
  #stateLostUnreported = false;
  #cells = 0;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(options: InterpreterSessionOptions) {
    this.#context = options.context;
    this.#limits = options.limits;
    this.#idleTimeoutMs = options.idleTimeoutMs;
  }

  /** Whether a cell runs or the interpreter starts (a busy session is never evicted). */
  get busy(): boolean {
    return this.#busy;
  }

  /** Whether the session is closed. */
  get closed(): boolean {
    return this.#closed;
  }

  async execute(code: string, options: CellOptions = {}): Promise<ExecuteResult> {
    checkCode(code);
    if (this.#closed) throw closedError();
    const limits = resolveCallLimits(this.#limits, options);
    return this.#enqueue(() => this.#runCell(code, limits, options));
  }

  async reset(): Promise<void> {
    if (this.#closed) throw closedError();
    if (this.#process?.running) void this.#process.kill();
    await this.#enqueue(async () => {
      await this.#discardProcess({ lost: false });
      // Asked for: the caller knows the state is gone.
      this.#stateLostUnreported = false;
    });
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      if (this.#process?.running) void this.#process.kill();
      // A cell waiting for a slot gives up now that the session is closed.
      this.#context.slots.idle();
      await this.#tail;
      await this.#discardProcess({ lost: false });
      this.#context.onClose(this);
    })();
    return this.#closing;
  }

  /** Stops the interpreter to free its slot; the next cell starts fresh and reports `stateLost`. */
  async evict(): Promise<void> {
    await this.#discardProcess({ lost: true });
  }

  #enqueue<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(work);
    this.#tail = run.catch(() => {});
    return run;
  }

  async #runCell(code: string, limits: Limits, options: CellOptions): Promise<ExecuteResult> {
    const { signal, onEvent, approveToolCall } = options;
    if (this.#closed) throw closedError();
    if (signal?.aborted) throw new CodecallAbortError(signal.reason);
    const startedAt = performance.now();
    // The idle timer may fire during the cell: a busy session ignores it, and the cell's end re-arms it.
    this.#busy = true;
    try {
      const process = await this.#ensureProcess();
      const { environment, launched } = process;
      if (isEmptyCode(code)) return emptyCodeResult(environment.runner.isolation);
      this.#cells += 1;
      const id = this.#cells;
      const outputPaths = outputPathsOf(environment.outputRoot, `${launched.runId}-${id}`);
      const events = runEventsFor(onEvent, environment);
      const outcome = await process.run({
        id,
        code,
        limits,
        outputPath: outputPaths.stdout,
        artifactsFolder: outputPaths.artifacts,
        signal,
        events,
        approveToolCall,
      });
      const died = outcome.processEnded;
      if (died) this.#stateLostUnreported = true;
      const stateLost = this.#stateLostUnreported;
      let result: ExecuteResult;
      try {
        result = await finishResult({
          outcome,
          limits,
          hintContext: environment.hintContext,
          outputPaths,
          startedAt,
          signal,
          stateLost,
          redactSecrets: environment.redactSecrets,
          events,
          runId: launched.runId,
          cell: id,
        });
      } finally {
        // After the result is built: forgetting the process releases its run directory.
        if (died) this.#forgetProcess(process);
      }
      this.#stateLostUnreported = false;
      return result;
    } finally {
      this.#busy = false;
      this.#context.slots.idle();
      if (this.#process !== undefined && !this.#closed) this.#armIdleTimer();
    }
  }

  /** Starts the idle time again: one timer per interpreter, re-armed after each cell instead of made anew. */
  #armIdleTimer(): void {
    if (this.#idleTimer !== undefined) {
      this.#idleTimer.refresh();
      return;
    }
    this.#idleTimer = setTimeout(() => void this.#onIdle(), this.#idleTimeoutMs);
    this.#idleTimer.unref();
  }

  async #onIdle(): Promise<void> {
    if (this.#busy || this.#process === undefined) return;
    await this.#discardProcess({ lost: true });
  }

  async #ensureProcess(): Promise<SessionProcess> {
    const current = this.#process;
    if (current?.alive) {
      this.#context.slots.touch(this);
      return current;
    }
    await this.#context.slots.acquire(this);
    try {
      if (this.#closed) throw closedError();
      const environment = await this.#context.prepare();
      const launched = await launchInterpreter(environment, {
        runId: createRunId(),
        limits: this.#limits,
        mode: 'session',
      });
      const process = new SessionProcess(launched, environment, this.#limits, (exited) => this.#onExit(exited));
      this.#process = process;
      if (this.#closed) {
        await this.#discardProcess({ lost: false });
        throw closedError();
      }
      return process;
    } catch (error) {
      if (this.#process === undefined) this.#context.slots.release(this);
      throw error;
    }
  }

  /** The interpreter exited: while idle, that loses the state (the cell flow handles an exit during a cell). */
  #onExit(process: SessionProcess): void {
    if (this.#process !== process || process.running) return;
    this.#forgetProcess(process);
    this.#stateLostUnreported = true;
  }

  #forgetProcess(process: SessionProcess): void {
    if (this.#process !== process) return;
    this.#process = undefined;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    this.#context.slots.release(this);
    this.#context.deferCleanup(process.launched.release());
  }

  async #discardProcess(options: { readonly lost: boolean }): Promise<void> {
    const process = this.#process;
    if (process === undefined) return;
    this.#forgetProcess(process);
    if (options.lost) this.#stateLostUnreported = true;
    await process.launched.release();
  }
}

function closedError(): CodecallError {
  return new CodecallError('CLOSED', 'this session is closed; start a new one with codecall.session()');
}
