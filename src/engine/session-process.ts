import { randomBytes } from 'node:crypto';
import type { LimitReason } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import {
  CELL_DONE_NOTIFICATION,
  CELL_NOTIFICATION,
  encodeNotification,
  type ScriptExceptionReport,
} from '../rpc/protocol.js';
import { exceptionReport, type ToolCallServer } from '../rpc/tool-call-server.js';
import {
  createChannelServer,
  type LaunchedInterpreter,
  type ProcessExit,
  type RunEnvironment,
} from './interpreter-launch.js';
import { OutputCapture } from './output-capture.js';
import { OutputSplitter } from './output-splitter.js';
import type { ProcessOutcome } from './run-result.js';
import { drainOutput, KILL_GRACE_MS, OUTPUT_DRAIN_MS, wellFormed } from './run-script.js';

/** Time a cell has to end after its KeyboardInterrupt (timeout, abort, limit) before the interpreter is killed. */
export const CELL_INTERRUPT_GRACE_MS = 500;

const NO_CELL_RUNNING = 'no cell is running; tools can be called only while a cell runs';
const CELL_ENDED = 'the cell has ended; tools can be called only while a cell runs';

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
  stdoutEnded: boolean;
  stderrEnded: boolean;
  report: CellReport | undefined;
  reason: LimitReason | undefined;
  interrupted: boolean;
  readonly timers: NodeJS.Timeout[];
  readonly finish: (end: CellEnd) => void;
}

/** The cell an interpreter finished, with everything its result needs. */
export interface FinishedCell {
  readonly cell: RunningCell;
  readonly end: CellEnd;
  readonly toolCalls: number;
  readonly toolCallLimitReached: boolean;
}

/** One session interpreter process: its channel server, its output split into cells, the cell running now. */
export class SessionProcess {
  readonly launched: LaunchedInterpreter;
  readonly environment: RunEnvironment;
  readonly #server: ToolCallServer;
  readonly #stdout: OutputSplitter;
  readonly #stderr: OutputSplitter;
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
    this.#server = createChannelServer(launched, environment, limits, {
      onNotification: (method, params) => this.#onNotification(method, params),
      onAbuse: (why) => this.stopCell(why),
    });
    this.#server.refuseCalls(NO_CELL_RUNNING);
    this.#stdout = new OutputSplitter({
      output: (chunk) => this.#output('stdout', chunk),
      outside: (chunk) => this.#outside(chunk),
      ended: () => this.#ended('stdout'),
    });
    this.#stderr = new OutputSplitter({
      output: (chunk) => this.#output('stderr', chunk),
      outside: (chunk) => this.#outside(chunk),
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

  /**
   * Runs one cell: sends `$cell` (from then on the output streams are the cell's), then waits for `$cell_done` and
   * both end markers, or for the process to exit.
   */
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
    // The end markers trail `$cell_done` through other pipes; a cell that redirected a descriptor never sends one.
    if (!this.#checkComplete(cell)) cell.timers.push(setTimeout(() => this.#complete(cell), OUTPUT_DRAIN_MS));
  }

  /** Finishes the cell if its report and both end markers are in; says whether it did. */
  #checkComplete(cell: RunningCell): boolean {
    const report = cell.report;
    if (report === undefined) return false;
    if (!(cell.stdoutEnded || !report.stdoutMarked) || !(cell.stderrEnded || !report.stderrMarked)) return false;
    this.#complete(cell);
    return true;
  }

  #complete(cell: RunningCell): void {
    if (cell.report !== undefined) cell.finish({ report: cell.report });
  }

  #output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const cell = this.#cell;
    if (cell === undefined) return;
    cell[stream].push(chunk);
    if (cell.stdout.totalBytes + cell.stderr.totalBytes > cell.limits.maxOutputBytes) this.stopCell('output');
  }

  #outside(chunk: Buffer): void {
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

/** The outcome of a finished cell, as `buildResult` takes it (the limit that stopped it read like a run's). */
export async function cellOutcome(
  finished: FinishedCell,
  launched: LaunchedInterpreter,
  environment: RunEnvironment,
): Promise<ProcessOutcome> {
  const { cell, end } = finished;
  let reason = cell.reason;
  let exitCode: number | null;
  let signal: NodeJS.Signals | null = null;
  let exception: ScriptExceptionReport | undefined;
  if ('report' in end) {
    exitCode = end.report.exitCode;
    exception = end.report.exception;
  } else {
    exitCode = 'error' in end.exit ? null : end.exit.code;
    signal = 'error' in end.exit ? null : end.exit.signal;
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
    stdout: await cell.stdout.finish(),
    stderr: await cell.stderr.finish(),
    exception,
    toolCalls: finished.toolCalls,
    toolCallLimitReached: finished.toolCallLimitReached,
    isolation: environment.runner.isolation,
    isolationWarning: environment.runner.isolationWarning,
  };
}
