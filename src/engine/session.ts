import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  CELL_DONE_NOTIFICATION,
  CELL_NOTIFICATION,
  encodeNotification,
  type ScriptExceptionReport,
} from '../rpc/protocol.js';
import { exceptionReport, ToolCallServer } from '../rpc/tool-call-server.js';
import type { LimitReason } from '../sandbox/runner.js';
import { collectArtifacts } from './artifacts.js';
import { CellOutputSplitter } from './cell-output.js';
import { CodecallAbortError, CodecallError } from './errors.js';
import {
  type LaunchedInterpreter,
  launchInterpreter,
  type ProcessExit,
  type RunEnvironment,
} from './interpreter-launch.js';
import { type Limits, resolveLimits } from './limits.js';
import { OutputCapture } from './output-capture.js';
import type { ExecuteResult } from './result.js';
import { buildResult, type ProcessOutcome } from './run-result.js';
import { createRunId, drainOutput, KILL_GRACE_MS, OUTPUT_DRAIN_MS, wellFormed } from './run-script.js';
import type { SessionSlots, SlotHolder } from './session-slots.js';

/** Time without a cell after which a session's interpreter is stopped; its next cell starts fresh (`stateLost`). */
export const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** Session interpreters alive at once per codecall; past it the least recently used idle one is stopped. */
export const DEFAULT_MAX_LIVE_SESSIONS = 16;
/** Time a cell has to end after its KeyboardInterrupt (timeout, abort, limit) before the interpreter is killed. */
export const CELL_INTERRUPT_GRACE_MS = 500;
/** stdout and stderr bytes kept from what a dying interpreter wrote before its cell began (startup errors). */
const STARTUP_OUTPUT_BYTES = 10_000;

const NO_CELL_RUNNING = 'no cell is running; tools can be called only while a cell runs';
const CELL_ENDED = 'the cell has ended; tools can be called only while a cell runs';

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
  /** Aborting interrupts the cell (then kills the interpreter if it does not stop) and rejects with an AbortError. */
  readonly signal?: AbortSignal | undefined;
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

/** What `$cell_done` reported. */
interface CellReport {
  readonly exitCode: number;
  readonly exception?: ScriptExceptionReport | undefined;
  /** Whether the boot could write the end marker on stdout / stderr (false when the cell closed the descriptor). */
  readonly stdoutMarked: boolean;
  readonly stderrMarked: boolean;
}

/** How a cell ended: reported by the interpreter, or by the interpreter's exit. */
type CellEnd = { readonly report: CellReport } | { readonly exit: ProcessExit };

interface RunningCell {
  readonly id: number;
  readonly limits: Limits;
  readonly stdout: OutputCapture;
  readonly stderr: OutputCapture;
  /** What each stream carried before the cell began, kept in case the interpreter dies before it (startup errors). */
  readonly stdoutBefore: OutputCapture;
  readonly stderrBefore: OutputCapture;
  stdoutBegan: boolean;
  stderrBegan: boolean;
  stdoutEnded: boolean;
  stderrEnded: boolean;
  report: CellReport | undefined;
  reason: LimitReason | undefined;
  interrupted: boolean;
  readonly timers: NodeJS.Timeout[];
  readonly finish: (end: CellEnd) => void;
}

/** The cell an interpreter finished, with everything its result needs. */
interface FinishedCell {
  readonly cell: RunningCell;
  readonly end: CellEnd;
  readonly toolCalls: number;
  readonly toolCallLimitReached: boolean;
}

/** One session interpreter process: its channel server, its output split into cells, the cell running now. */
class SessionProcess {
  readonly launched: LaunchedInterpreter;
  readonly environment: RunEnvironment;
  readonly #server: ToolCallServer;
  readonly #stdout: CellOutputSplitter;
  readonly #stderr: CellOutputSplitter;
  readonly #outsideLimit: number;
  readonly #noncePrefix: string;
  #cell: RunningCell | undefined;
  #outsideBytes = 0;

  constructor(
    launched: LaunchedInterpreter,
    environment: RunEnvironment,
    limits: Limits,
    onExit: (process: SessionProcess) => void,
  ) {
    this.launched = launched;
    this.environment = environment;
    this.#outsideLimit = limits.maxOutputBytes;
    // Random per interpreter, then the cell id: a script cannot guess a marker without reading the boot's memory.
    this.#noncePrefix = randomBytes(6).toString('hex');
    this.#server = new ToolCallServer({
      socket: launched.channel,
      tools: environment.tools,
      runId: launched.runId,
      artifactsDir: launched.directory.artifacts,
      maxToolCalls: limits.maxToolCalls,
      toolCallTimeoutMs: limits.toolCallTimeoutMs,
      maxFrameBytes: limits.maxFrameBytes,
      maxConcurrentToolCalls: limits.maxConcurrentToolCalls,
      onNotification: (method, params) => this.#onNotification(method, params),
      onAbuse: (why) => this.stopCell(why),
    });
    this.#server.refuseCalls(NO_CELL_RUNNING);
    this.#stdout = new CellOutputSplitter({
      began: () => this.#began('stdout'),
      output: (chunk) => this.#output('stdout', chunk),
      outside: (chunk) => this.#outside('stdout', chunk),
      ended: () => this.#ended('stdout'),
    });
    this.#stderr = new CellOutputSplitter({
      began: () => this.#began('stderr'),
      output: (chunk) => this.#output('stderr', chunk),
      outside: (chunk) => this.#outside('stderr', chunk),
      ended: () => this.#ended('stderr'),
    });
    launched.stdout.on('data', (chunk: Buffer) => this.#stdout.push(chunk));
    launched.stderr.on('data', (chunk: Buffer) => this.#stderr.push(chunk));
    void launched.exited.then((exit) => {
      this.#cell?.finish({ exit });
      onExit(this);
    });
    launched.holdEventLoop(false);
  }

  /** Whether the process still runs. */
  get alive(): boolean {
    return this.launched.exit === undefined;
  }

  /** Whether a cell runs now. */
  get running(): boolean {
    return this.#cell !== undefined;
  }

  /** Runs one cell: sends `$cell`, then waits for `$cell_done` and both end markers, or for the process to exit. */
  async run(options: {
    readonly id: number;
    readonly code: string;
    readonly limits: Limits;
    readonly outputPath: string;
  }): Promise<FinishedCell> {
    const { limits } = options;
    const nonce = `${this.#noncePrefix}${options.id.toString(16)}`;
    let finish!: (end: CellEnd) => void;
    const ended = new Promise<CellEnd>((resolve) => {
      finish = resolve;
    });
    const cell: RunningCell = {
      id: options.id,
      limits,
      stdout: new OutputCapture({
        keepBytes: limits.maxStdoutBytes,
        fullOutputPath: options.outputPath,
        maxFullOutputBytes: limits.maxOutputBytes,
      }),
      stderr: new OutputCapture({ keepBytes: limits.maxStderrBytes }),
      stdoutBefore: new OutputCapture({ keepBytes: STARTUP_OUTPUT_BYTES }),
      stderrBefore: new OutputCapture({ keepBytes: STARTUP_OUTPUT_BYTES }),
      stdoutBegan: false,
      stderrBegan: false,
      stdoutEnded: false,
      stderrEnded: false,
      report: undefined,
      reason: undefined,
      interrupted: false,
      timers: [],
      finish: (end) => {
        if (this.#cell === cell) finish(end);
      },
    };
    this.#cell = cell;
    this.#outsideBytes = 0;
    this.#stdout.expect(nonce);
    this.#stderr.expect(nonce);
    this.#server.startBudget(limits);
    this.launched.holdEventLoop(true);
    cell.timers.push(setTimeout(() => this.stopCell('timeout'), limits.timeoutMs));
    this.launched.channel.write(
      encodeNotification(CELL_NOTIFICATION, {
        id: options.id,
        code: wellFormed(options.code),
        nonce,
        cpuSeconds: limits.cpuSeconds,
      }),
    );
    const end = await ended;
    for (const timer of cell.timers) clearTimeout(timer);
    this.#server.refuseCalls(CELL_ENDED);
    if ('exit' in end) {
      await drainOutput([this.launched.stdout, this.launched.stderr]);
      this.#stdout.flush();
      this.#stderr.flush();
    }
    this.#cell = undefined;
    if (this.alive) this.launched.holdEventLoop(false);
    return {
      cell,
      end,
      toolCalls: this.#server.toolCalls,
      toolCallLimitReached: this.#server.limitReached,
    };
  }

  /** Stops the running cell for `reason`: a KeyboardInterrupt first, the kill after {@link CELL_INTERRUPT_GRACE_MS}. */
  stopCell(reason: LimitReason): void {
    const cell = this.#cell;
    if (cell === undefined) return;
    cell.reason ??= reason;
    if (cell.interrupted) return;
    cell.interrupted = true;
    this.launched.stdin?.write(`${cell.id}\n`);
    cell.timers.push(
      setTimeout(() => {
        this.launched.signal('SIGTERM');
        cell.timers.push(setTimeout(() => void this.launched.killAll(), KILL_GRACE_MS));
      }, CELL_INTERRUPT_GRACE_MS),
    );
  }

  /** Kills the interpreter now (reset, close, eviction); a running cell ends `aborted`. */
  kill(): Promise<void> {
    const cell = this.#cell;
    if (cell !== undefined) cell.reason ??= 'aborted';
    return this.launched.killAll();
  }

  #onNotification(method: string, params: unknown): void {
    const cell = this.#cell;
    if (method !== CELL_DONE_NOTIFICATION || cell === undefined || typeof params !== 'object' || params === null) {
      return;
    }
    const done = params as Record<string, unknown>;
    if (done.id !== cell.id) return;
    const exception = done.exception;
    cell.report = {
      exitCode: typeof done.exitCode === 'number' && Number.isInteger(done.exitCode) ? done.exitCode : 1,
      exception:
        typeof exception === 'object' && exception !== null
          ? exceptionReport(exception as Record<string, unknown>)
          : undefined,
      stdoutMarked: done.stdout === true,
      stderrMarked: done.stderr === true,
    };
    this.#checkComplete(cell);
    // The end markers trail `$cell_done` through other pipes; a cell that redirected a descriptor never sends one.
    if (cell.report !== undefined) cell.timers.push(setTimeout(() => this.#complete(cell), OUTPUT_DRAIN_MS));
  }

  #checkComplete(cell: RunningCell): void {
    const report = cell.report;
    if (report === undefined) return;
    if ((cell.stdoutEnded || !report.stdoutMarked) && (cell.stderrEnded || !report.stderrMarked)) this.#complete(cell);
  }

  #complete(cell: RunningCell): void {
    if (cell.report !== undefined) cell.finish({ report: cell.report });
  }

  #began(stream: 'stdout' | 'stderr'): void {
    const cell = this.#cell;
    if (cell === undefined) return;
    if (stream === 'stdout') cell.stdoutBegan = true;
    else cell.stderrBegan = true;
  }

  #output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const cell = this.#cell;
    if (cell === undefined) return;
    cell[stream].push(chunk);
    if (cell.stdout.totalBytes + cell.stderr.totalBytes > cell.limits.maxOutputBytes) this.stopCell('output');
  }

  #outside(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const cell = this.#cell;
    if (cell !== undefined && !(stream === 'stdout' ? cell.stdoutBegan : cell.stderrBegan)) {
      (stream === 'stdout' ? cell.stdoutBefore : cell.stderrBefore).push(chunk);
    }
    this.#outsideBytes += chunk.length;
    // A background thread printing between cells is read and dropped; a flood of it ends the interpreter.
    if (this.#outsideBytes > this.#outsideLimit) void this.launched.killAll();
  }

  #ended(stream: 'stdout' | 'stderr'): void {
    const cell = this.#cell;
    if (cell === undefined) return;
    if (stream === 'stdout') cell.stdoutEnded = true;
    else cell.stderrEnded = true;
    this.#checkComplete(cell);
  }
}

/** A session of one codecall; see {@link CodecallSession}. */
export class InterpreterSession implements CodecallSession, SlotHolder {
  readonly id = randomBytes(8).toString('hex');
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
    if (typeof code !== 'string') {
      throw new CodecallError('INVALID_CONFIG', `execute takes the code as a string, got ${typeof code}`);
    }
    if (this.#closed) throw closedError();
    const limits =
      options.timeoutMs === undefined && options.limits === undefined
        ? this.#limits
        : resolveLimits(
            { ...options.limits, ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) },
            this.#limits,
          );
    return this.#enqueue(() => this.#runCell(code, limits, options.signal));
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

  async #runCell(code: string, limits: Limits, signal: AbortSignal | undefined): Promise<ExecuteResult> {
    if (this.#closed) throw closedError();
    if (signal?.aborted) throw new CodecallAbortError(signal.reason);
    const startedAt = performance.now();
    this.#busy = true;
    clearTimeout(this.#idleTimer);
    let process: SessionProcess | undefined;
    try {
      process = await this.#ensureProcess();
      const { environment } = process;
      this.#cells += 1;
      const id = this.#cells;
      const onAbort = () => process?.stopCell('aborted');
      signal?.addEventListener('abort', onAbort, { once: true });
      let finished: FinishedCell;
      try {
        finished = await process.run({
          id,
          code,
          limits,
          outputPath: join(environment.outputRoot, `${process.launched.runId}-${id}-stdout.txt`),
        });
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
      const died = 'exit' in finished.end;
      const outcome = await cellOutcome(finished, process.launched, environment);
      const artifacts = await collectArtifacts(
        process.launched.directory.artifacts,
        join(environment.outputRoot, `${process.launched.runId}-${id}`),
      );
      if (died) this.#forgetProcess(process);
      if (signal?.aborted && finished.cell.reason === 'aborted') {
        if (died) this.#stateLostUnreported = true;
        throw new CodecallAbortError(signal.reason);
      }
      const stateLost = died || this.#stateLostUnreported;
      this.#stateLostUnreported = false;
      return buildResult({
        outcome,
        limits,
        hintContext: environment.hintContext,
        artifacts,
        durationMs: performance.now() - startedAt,
        stateLost,
      });
    } finally {
      this.#busy = false;
      this.#context.slots.idle();
      if (this.#process !== undefined && !this.#closed) {
        this.#idleTimer = setTimeout(() => void this.#onIdle(), this.#idleTimeoutMs);
        this.#idleTimer.unref();
      }
    }
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

async function cellOutcome(
  finished: FinishedCell,
  launched: LaunchedInterpreter,
  environment: RunEnvironment,
): Promise<ProcessOutcome> {
  const { cell, end } = finished;
  let reason = cell.reason;
  let exitCode: number | null;
  let signal: NodeJS.Signals | null = null;
  let exception: ScriptExceptionReport | undefined;
  let stdout = cell.stdout;
  let stderr = cell.stderr;
  if ('report' in end) {
    exitCode = end.report.exitCode;
    exception = end.report.exception;
  } else {
    exitCode = 'error' in end.exit ? null : end.exit.code;
    signal = 'error' in end.exit ? null : end.exit.signal;
    // Died before the cell began: what it wrote is all there is to explain why (an import error at startup).
    if (!cell.stdoutBegan) stdout = cell.stdoutBefore;
    if (!cell.stderrBegan) stderr = cell.stderrBefore;
    await launched.killAll();
    if (reason === undefined && exitCode !== 0) reason = await launched.containment?.limitReason?.();
    if (reason === undefined && signal === 'SIGXCPU') reason = 'cpu';
  }
  if (reason === undefined && exitCode !== 0 && exception?.type === 'MemoryError') reason = 'memory';
  if (reason === undefined && exitCode !== 0 && finished.toolCallLimitReached) reason = 'tool_calls';
  return {
    exitCode,
    signal,
    reason,
    stdout: await stdout.finish(),
    stderr: await stderr.finish(),
    exception,
    toolCalls: finished.toolCalls,
    toolCallLimitReached: finished.toolCallLimitReached,
    isolation: environment.runner.isolation,
  };
}

function closedError(): CodecallError {
  return new CodecallError('CLOSED', 'this session is closed; start a new one with codecall.session()');
}
