import type { Duplex, Readable } from 'node:stream';
import type { IsolationLevel, LimitReason } from '../../core/isolation.js';
import type { Limits } from '../../core/limits.js';
import { receiveFromChannel, writeToChannel } from '../../rpc/channel-end.js';
import {
  ARTIFACT_NOTIFICATION,
  CELL_DONE_NOTIFICATION,
  DONE_NOTIFICATION,
  type ScriptExceptionReport,
} from '../../rpc/protocol.js';
import { exceptionReport, ToolCallServer, type ToolLookup } from '../../rpc/tool-call-server.js';
import type { ApproveToolCall } from '../../tools/tool-approval.js';
import {
  type LaunchedInterpreter,
  type ProcessExit,
  type RunEnvironment,
  settledWithin,
} from '../launch/interpreter-launch.js';
import { ArtifactSink, type ReceivedArtifacts } from '../result/artifact-sink.js';
import type { ProcessOutcome } from '../result/run-result.js';
import { type ExitStatus, exitStatusOf, limitReasonOf } from './limit-reason.js';
import { type CapturedOutput, OutputCapture } from './output-capture.js';
import { OutputSplitter, type OutputSplitterHandlers } from './output-splitter.js';
import type { RunEvents } from './run-events.js';
import { RunTraceRecorder } from './run-trace.js';
import type { StopPolicy } from './stop-policy.js';

/**
 * How long output still in the pipes is read after the interpreter ended (or after a cell reported its end); the
 * wait also lasts until the host has polled the pipes once after this time (see {@link afterPipesPolled}).
 */
export const OUTPUT_DRAIN_MS = 250;

const NO_CELL_RUNNING = 'no cell is running; tools can be called only while a cell runs';
const CELL_ENDED = 'the cell has ended; tools can be called only while a cell runs';
const RUN_ENDED = 'the run has ended';

/** What a supervisor watches of an interpreter: a launched one, or a stand-in over in-memory streams. */
export type SupervisedProcess = Pick<
  LaunchedInterpreter,
  | 'runId'
  | 'directory'
  | 'channel'
  | 'stdout'
  | 'stderr'
  | 'containment'
  | 'exited'
  | 'exit'
  | 'signal'
  | 'killAll'
  | 'holdEventLoop'
>;

/** Options of {@link Supervisor}. */
export interface SupervisorOptions {
  readonly process: SupervisedProcess;
  /** The tools the script may call over the channel. */
  readonly tools: ToolLookup;
  /** The isolation the process has (how its exit status reads; what the result reports). */
  readonly isolation: IsolationLevel;
  /** Set when the isolation is weaker than asked for (`auto` fell back to none): carried into every result. */
  readonly isolationWarning?: string | undefined;
  /** Limits the process was started with: the channel's frame size, the output it may print while nothing runs. */
  readonly limits: Limits;
  /** The codecall's `approveToolCall` hook, asked about calls of tools that need approval. */
  readonly approve?: ApproveToolCall | undefined;
}

/**
 * The supervisor of an interpreter launched in `environment` (a one-shot run, or a session's interpreter): the
 * environment's tools, isolation and approval hook, so every kind of run is supervised alike.
 */
export function supervisorFor(launched: LaunchedInterpreter, environment: RunEnvironment, limits: Limits): Supervisor {
  return new Supervisor({
    process: launched,
    tools: environment.tools,
    isolation: environment.runner.isolation,
    isolationWarning: environment.runner.isolationWarning,
    limits,
    approve: environment.approveToolCall,
  });
}

/** Options of {@link Supervisor.supervise}: one run of a one-shot interpreter, or one cell of a session's. */
export interface SuperviseOptions {
  /** Limits of this run or cell (time, output, tool calls). */
  readonly limits: Limits;
  /** Nonce of the end marker the boot writes on stdout and stderr when the code is over (none: up to their close). */
  readonly nonce: string | undefined;
  /** Where the complete stdout is saved once it outgrows what the result keeps. */
  readonly fullOutputPath: string;
  /** The host-only folder the `$artifact` frames of this run or cell are written into (created when one comes). */
  readonly artifactsFolder: string;
  /** How to stop it early: the one point where a run and a cell differ. */
  readonly stopPolicy: StopPolicy;
  /**
   * The frame that hands the code over (`$cell`), written first; none for a cold run (its file has it) nor for a
   * pooled run (its caller wrote `$run` in this same tick, just before).
   */
  readonly handOver?: string | undefined;
  /**
   * The cell this is: it ends at that cell's `$cell_done` once its output is complete, and the interpreter lives on.
   * Without it this is the interpreter's one run, which ends at the boot's `$done` or the interpreter's exit.
   */
  readonly cellId?: number | undefined;
  /** Aborting stops it with reason `aborted`. */
  readonly signal?: AbortSignal | undefined;
  /** Called once it is supervised, with a function that stops it (for `close()`). */
  readonly onStart?: ((stop: (reason: LimitReason) => void) => void) | undefined;
  /** This run's or cell's own approval hook, over the codecall's. */
  readonly approveToolCall?: ApproveToolCall | undefined;
  /** Where its live events go (the caller's `onEvent`); none when nobody listens. */
  readonly events?: RunEvents | undefined;
}

/** What a supervised run or cell left for its result, and whether the interpreter ended with it. */
export interface SupervisedOutcome extends ProcessOutcome {
  /** The interpreter exited (or, for a run, its boot reported its exit): it cannot run anything more. */
  readonly processEnded: boolean;
  /** What the script sent as artifacts (`$artifact`), written to the host-only folder. */
  readonly artifacts: ReceivedArtifacts;
  readonly traceOrigin: number;
}

/** What `$cell_done` reported. */
interface CellReport {
  readonly exitCode: number;
  readonly exception: ScriptExceptionReport | undefined;
  /** Whether the boot could write the end marker on stdout / stderr (false when the cell closed the descriptor). */
  readonly stdoutMarked: boolean;
  readonly stderrMarked: boolean;
}

/** How a run or cell ended: with the interpreter (`reported` when its boot said so first), or by its cell report. */
type End = { readonly exit: ProcessExit; readonly reported: boolean } | { readonly report: CellReport };

/** One output stream of the interpreter, split at end markers for as long as the interpreter lives. */
interface OutputStream {
  readonly stream: Readable;
  /** `output` is the running code's capture while it runs. */
  readonly handlers: OutputSplitterHandlers;
  readonly splitter: OutputSplitter;
  /** The running code's end marker went by. */
  markerSeen: boolean;
  closed: boolean;
  readonly onClose: () => void;
  /** Stops handing the stream's reads to the splitter. */
  stopReceiving: () => void;
}

/** The run or cell being supervised. */
interface Supervised {
  readonly options: SuperviseOptions;
  readonly stdout: OutputCapture;
  readonly stderr: OutputCapture;
  /** Receives its `$artifact` frames. */
  readonly artifacts: ArtifactSink;
  readonly trace: RunTraceRecorder;
  /** The first reason it was stopped for. */
  stoppedFor: LimitReason | undefined;
  /** Cancels the stop policy's pending steps; set once stopping started. */
  cancelStop: (() => void) | undefined;
  /** A run's uncaught exception, from `$exception` (a cell's comes in its report). */
  exception: ScriptExceptionReport | undefined;
  report: CellReport | undefined;
  /** A run's `$done` was taken (a later one is not). */
  doneTaken: boolean;
  /** Ends a reported cell whose end markers do not come. */
  drainTimer: NodeJS.Timeout | undefined;
  end: End | undefined;
  readonly resolveEnd: (end: End) => void;
  readonly resolveOutputEnded: () => void;
}

function ignoreOutput(): void {}

/**
 * Calls back once the event loop has polled its pipes again. A drain time counts from the moment the host read the
 * end (`$done`, the exit, `$cell_done`), and the rest of the output was written before that end, but a busy host may
 * read the pipes that hold it only in a later turn of its loop, which runs its expired timers before it polls: the
 * output would be cut off although it was there. Timers run before the poll and immediates after it, so what the
 * pipes held when the drain time ran out has been read by the time this calls back.
 */
function afterPipesPolled(callback: () => void): void {
  setImmediate(callback);
}

/**
 * What the captures and the artifact sink of a run or cell kept. Most have nothing to wait for (no saved file, no
 * artifact): their ends are taken at once, without a promise each.
 */
function finishCaptures(
  current: Supervised,
):
  | readonly [CapturedOutput, CapturedOutput, ReceivedArtifacts]
  | Promise<[CapturedOutput, CapturedOutput, ReceivedArtifacts]> {
  const stdout = current.stdout.finishInMemory();
  const stderr = current.stderr.finishInMemory();
  const artifacts = stdout === undefined || stderr === undefined ? undefined : current.artifacts.finishUnused();
  if (stdout !== undefined && stderr !== undefined && artifacts !== undefined) return [stdout, stderr, artifacts];
  return Promise.all([current.stdout.finish(), current.stderr.finish(), current.artifacts.finish()]);
}

function outputEnded(output: OutputStream): boolean {
  return output.markerSeen || output.closed;
}

/**
 * Supervises an interpreter for one-shot runs (cold or pooled) and session cells alike: the tool channel, the output
 * split at end markers into head-and-tail captures, the output-flood stop, the timeout, the abort wiring, the end
 * (the exit, the boot's `$done`, or a cell's `$cell_done` with its markers), the drain of what is left in the pipes,
 * and the limit reason of the outcome. How an overrunning run or cell is stopped is its {@link StopPolicy}.
 */
export class Supervisor {
  readonly #process: SupervisedProcess;
  readonly #isolation: IsolationLevel;
  readonly #isolationWarning: string | undefined;
  readonly #server: ToolCallServer;
  readonly #streams: readonly [OutputStream, OutputStream];
  readonly #outsideLimit: number;
  #outsideBytes = 0;
  #current: Supervised | undefined;
  /** Settles when the channel has been read to its end (or is gone). */
  readonly #channelEnded: Promise<void>;
  /** Whether it has settled. */
  #channelDone = false;

  constructor(options: SupervisorOptions) {
    const { process, limits } = options;
    this.#process = process;
    this.#isolation = options.isolation;
    this.#isolationWarning = options.isolationWarning;
    this.#outsideLimit = limits.maxOutputBytes;
    this.#server = new ToolCallServer({
      socket: process.channel,
      tools: options.tools,
      runId: process.runId,
      // A folder only the host writes (never the script's artifacts directory): calls come only while one runs.
      artifactsDir: () => this.#current?.artifacts.folderForTools() ?? '',
      maxToolCalls: limits.maxToolCalls,
      toolCallTimeoutMs: limits.toolCallTimeoutMs,
      maxFrameBytes: limits.maxFrameBytes,
      maxConcurrentToolCalls: limits.maxConcurrentToolCalls,
      onException: (report) => {
        const current = this.#current;
        if (current !== undefined && current.options.cellId === undefined) current.exception = report;
      },
      onNotification: (method, params) => this.#onNotification(method, params),
      onAbuse: (reason) => this.stop(reason),
      approvalHook: () => this.#current?.options.approveToolCall ?? options.approve,
      onCallStart: (call) => this.#current?.options.events?.toolCallStart(call),
      onCallEnd: (call) => {
        const current = this.#current;
        if (current === undefined) return;
        current.trace.add(call);
        current.options.events?.toolCallEnd(call);
      },
    });
    // Tools are called only while a run or cell is supervised.
    this.#server.refuseCalls(NO_CELL_RUNNING);
    this.#streams = [this.#readOutput(process.stdout), this.#readOutput(process.stderr)];
    const channel = process.channel;
    this.#channelEnded =
      channel.readableEnded || channel.destroyed
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            channel.once('end', resolve);
            channel.once('close', resolve);
          });
    void this.#channelEnded.then(() => {
      this.#channelDone = true;
    });
    void process.exited.then((exit) => {
      const current = this.#current;
      if (current !== undefined) this.#settle(current, { exit, reported: false });
    });
  }

  /** Whether a run or cell is supervised now. */
  get running(): boolean {
    return this.#current !== undefined;
  }

  /**
   * Supervises one run or cell from its hand-over to its end, and reads its outcome. When it ends with the
   * interpreter, what is left in the process group is killed at once and the channel is closed; a cell that ends by
   * its report leaves the interpreter waiting for the next one.
   */
  async supervise(options: SuperviseOptions): Promise<SupervisedOutcome> {
    if (this.#current !== undefined) throw new Error('a supervisor supervises one run or cell at a time');
    const process = this.#process;
    const { limits } = options;
    process.holdEventLoop(true);
    let resolveEnd!: (end: End) => void;
    const ended = new Promise<End>((resolve) => {
      resolveEnd = resolve;
    });
    let resolveOutputEnded!: () => void;
    const allOutputEnded = new Promise<void>((resolve) => {
      resolveOutputEnded = resolve;
    });
    const current: Supervised = {
      options,
      stdout: new OutputCapture({
        keepBytes: limits.maxStdoutBytes,
        fullOutputPath: options.fullOutputPath,
        maxFullOutputBytes: limits.maxOutputBytes,
      }),
      stderr: new OutputCapture({ keepBytes: limits.maxStderrBytes }),
      artifacts: new ArtifactSink({ folder: options.artifactsFolder }),
      trace: new RunTraceRecorder(performance.now()),
      stoppedFor: undefined,
      cancelStop: undefined,
      exception: undefined,
      report: undefined,
      doneTaken: false,
      drainTimer: undefined,
      end: undefined,
      resolveEnd,
      resolveOutputEnded,
    };
    this.#current = current;
    this.#outsideBytes = 0;
    const { events } = options;
    const capture = (target: OutputCapture, type: 'stdout' | 'stderr') => (chunk: Buffer) => {
      target.push(chunk);
      events?.output(type, chunk);
      if (current.stdout.totalBytes + current.stderr.totalBytes > limits.maxOutputBytes) {
        this.#stop(current, 'output');
      }
    };
    const [stdout, stderr] = this.#streams;
    stdout.handlers.output = capture(current.stdout, 'stdout');
    stderr.handlers.output = capture(current.stderr, 'stderr');
    for (const output of this.#streams) {
      output.markerSeen = false;
      output.splitter.expect(options.nonce);
    }
    this.#server.startBudget(limits);
    const timeoutTimer = setTimeout(() => this.#stop(current, 'timeout'), limits.timeoutMs);
    // A pooled interpreter's channel was paused after `$ready`; the server listens now, so nothing is lost. Any other
    // channel flows already (the server's listener), and resuming it does nothing.
    process.channel.resume();
    if (process.exit !== undefined) this.#settle(current, { exit: process.exit, reported: false });
    this.#checkOutputEnded();
    // The code once everything it can reach is set up (nothing it sends can be read before this tick ends): a wake-up
    // may put the interpreter on this host's processor, where it waits for the host to block again, so the host does
    // little between this write and its next wait. An interrupt for an abort comes after it.
    if (options.handOver !== undefined) writeToChannel(process.channel, options.handOver);
    events?.emit({ type: 'run-start', runId: process.runId, cell: options.cellId });
    const onAbort = () => this.#stop(current, 'aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    // An abort while the interpreter was being started fired before this listener: it stops the run now.
    if (options.signal?.aborted) onAbort();
    options.onStart?.((reason) => this.#stop(current, reason));

    const end = await ended;
    clearTimeout(timeoutTimer);
    clearTimeout(current.drainTimer);
    options.signal?.removeEventListener('abort', onAbort);
    current.cancelStop?.();
    let status: ExitStatus;
    let exception: ScriptExceptionReport | undefined;
    let containment: LimitReason | undefined;
    if ('exit' in end) {
      // Completion is the interpreter's exit (or its `$done`): whatever it left behind in its group goes now (a
      // sandbox goes with its pid namespace); the runner's own sweep (e.g. of a cgroup) follows in the release.
      process.signal('SIGKILL');
      // What is still in the pipes, up to the end markers (or until they close): a process that escaped the group
      // may hold them open, so the wait is bounded. An exit seen before the boot's `$done` was read leaves that frame,
      // and the output it carries, in the channel: it is read to its end too (calls still in it are refused).
      if (end.reported) {
        this.#server.end();
        await settledWithin(allOutputEnded, OUTPUT_DRAIN_MS);
      } else {
        this.#server.refuseCalls(RUN_ENDED);
        await settledWithin(Promise.all([allOutputEnded, this.#channelEnded]), OUTPUT_DRAIN_MS);
        // A host too busy to read the channel within the drain time still reads what it holds, in the next poll: the
        // boot's `$done` there may carry the last bytes the script printed.
        if (!this.#channelDone) await new Promise<void>((resolve) => afterPipesPolled(resolve));
        this.#server.end();
      }
      if (!this.#streams.every(outputEnded)) await new Promise<void>((resolve) => afterPipesPolled(resolve));
      for (const output of this.#streams) {
        output.splitter.flush();
        output.handlers.output = ignoreOutput;
        output.stopReceiving();
        output.stream.off('close', output.onClose);
      }
      events?.flushOutput();
      this.#current = undefined;
      const exited: ExitStatus =
        'error' in end.exit ? { exitCode: null, signal: null } : { exitCode: end.exit.code, signal: end.exit.signal };
      status = end.reported ? exited : exitStatusOf(exited, this.#isolation);
      exception = current.exception;
      if (current.stoppedFor === undefined && status.exitCode !== 0) {
        containment = await process.containment?.limitReason?.();
      }
    } else {
      this.#server.refuseCalls(CELL_ENDED);
      for (const output of this.#streams) output.handlers.output = ignoreOutput;
      events?.flushOutput();
      this.#current = undefined;
      process.holdEventLoop(false);
      status = { exitCode: end.report.exitCode, signal: null };
      exception = end.report.exception;
    }
    const toolCallLimitReached = this.#server.limitReached;
    const reason = limitReasonOf({
      stoppedFor: current.stoppedFor,
      containment,
      exitCode: status.exitCode,
      signal: status.signal,
      exception,
      toolCallLimitReached,
    });
    const [stdoutCapture, stderrCapture, artifacts] = await finishCaptures(current);
    return {
      exitCode: status.exitCode,
      signal: status.signal,
      reason,
      stdout: stdoutCapture,
      stderr: stderrCapture,
      exception,
      toolCalls: this.#server.toolCalls,
      deniedToolCalls: this.#server.deniedToolCalls,
      trace: current.trace.finish(),
      traceOrigin: current.trace.origin,
      toolCallLimitReached,
      isolation: this.#isolation,
      isolationWarning: this.#isolationWarning,
      processEnded: 'exit' in end,
      artifacts,
    };
  }

  /** Stops the running run or cell for `reason` by its stop policy (nothing when none runs). */
  stop(reason: LimitReason): void {
    const current = this.#current;
    if (current !== undefined) this.#stop(current, reason);
  }

  /** Kills the interpreter now (reset, close, eviction of a session); a running cell ends with `reason`. */
  kill(reason: LimitReason): Promise<void> {
    const current = this.#current;
    if (current !== undefined) current.stoppedFor ??= reason;
    return this.#process.killAll();
  }

  #stop(current: Supervised, reason: LimitReason): void {
    if (this.#current !== current) return;
    current.stoppedFor ??= reason;
    if (current.cancelStop !== undefined || current.end !== undefined) return;
    current.cancelStop = current.options.stopPolicy.stop(reason);
  }

  #settle(current: Supervised, end: End): void {
    if (current.end !== undefined) return;
    current.end = end;
    current.resolveEnd(end);
  }

  #readOutput(stream: Readable): OutputStream {
    const handlers: OutputSplitterHandlers = {
      output: ignoreOutput,
      outside: (chunk) => this.#outside(chunk),
      ended: () => {
        output.markerSeen = true;
        this.#checkOutputEnded();
      },
    };
    const splitter = new OutputSplitter(handlers);
    const output: OutputStream = {
      stream,
      handlers,
      splitter,
      markerSeen: false,
      closed: false,
      stopReceiving: () => {},
      onClose: () => {
        splitter.flush();
        output.closed = true;
        this.#checkOutputEnded();
      },
    };
    // A direct stream hands over its reused read buffer: the splitter and the captures behind it copy what they keep.
    // Only read here: any readable stream will do (one that is not a direct channel gets a 'data' listener).
    output.stopReceiving = receiveFromChannel(stream as Duplex, (bytes, length) =>
      splitter.push(length === bytes.length ? bytes : bytes.subarray(0, length)),
    );
    stream.once('close', output.onClose);
    if (stream.closed) output.onClose();
    return output;
  }

  /** Bytes written while nothing runs (a background thread between cells) are dropped; a flood ends the interpreter. */
  #outside(chunk: Buffer): void {
    this.#outsideBytes += chunk.length;
    if (this.#outsideBytes > this.#outsideLimit) void this.#process.killAll();
  }

  /**
   * What the code printed last, carried in its end frame (`$done`, `$cell_done`): the boot sends it there only once
   * the host has read all that was written to the pipe before, so it follows that output as it would in the pipe.
   */
  #takeCarriedOutput(done: Record<string, unknown>): void {
    if (typeof done.output === 'string' && done.output.length > 0) {
      this.#streams[0].handlers.output(Buffer.from(done.output, 'utf8'));
    }
  }

  /** Ends a reported cell once its marked streams ended; tells a draining run when both streams have. */
  #checkOutputEnded(): void {
    const current = this.#current;
    if (current === undefined) return;
    const [stdout, stderr] = this.#streams;
    const report = current.report;
    if (
      report !== undefined &&
      (outputEnded(stdout) || !report.stdoutMarked) &&
      (outputEnded(stderr) || !report.stderrMarked)
    ) {
      this.#settle(current, { report });
    }
    if (outputEnded(stdout) && outputEnded(stderr)) current.resolveOutputEnded();
  }

  #onNotification(method: string, params: unknown): void {
    const current = this.#current;
    if (current === undefined) return;
    const { cellId } = current.options;
    if (method === ARTIFACT_NOTIFICATION) {
      // Also while the channel is read to its end after an exit seen first: the boot sends a run's last files at its
      // exit, before `$done`, and a host that saw the exit first still reads them there (see supervise).
      if (current.end === undefined || isDrainingAfterExit(current)) current.artifacts.receive(params);
      return;
    }
    if (method === DONE_NOTIFICATION && cellId === undefined) {
      const done = (typeof params === 'object' && params !== null ? params : {}) as Record<string, unknown>;
      const exitCode = done.exitCode;
      // Also after the exit was seen first (see supervise): the output it carries is the run's.
      if (typeof exitCode === 'number' && Number.isInteger(exitCode) && !current.doneTaken) {
        current.doneTaken = true;
        this.#takeCarriedOutput(done);
        // A stream the boot wrote no marker on had been read out: its output is complete now (without a nonce the
        // streams end at their close, as before).
        if (current.options.nonce !== undefined) {
          const [stdout, stderr] = this.#streams;
          if (done.stdout === false) stdout.markerSeen = true;
          if (done.stderr === false) stderr.markerSeen = true;
        }
        this.#settle(current, { exit: { code: exitCode, signal: null }, reported: true });
        this.#checkOutputEnded();
      }
      return;
    }
    if (method !== CELL_DONE_NOTIFICATION || cellId === undefined || typeof params !== 'object' || params === null) {
      return;
    }
    const done = params as Record<string, unknown>;
    if (done.id !== cellId || current.report !== undefined) return;
    const exception = done.exception;
    current.report = {
      exitCode: typeof done.exitCode === 'number' && Number.isInteger(done.exitCode) ? done.exitCode : 1,
      exception:
        typeof exception === 'object' && exception !== null
          ? exceptionReport(exception as Record<string, unknown>)
          : undefined,
      stdoutMarked: done.stdout === true,
      stderrMarked: done.stderr === true,
    };
    this.#takeCarriedOutput(done);
    // The end markers trail `$cell_done` through other pipes; a cell that redirected a descriptor never sends one.
    this.#checkOutputEnded();
    if (current.end === undefined && current.drainTimer === undefined) {
      current.drainTimer = setTimeout(() => {
        afterPipesPolled(() => {
          if (current.report !== undefined) this.#settle(current, { report: current.report });
        });
      }, OUTPUT_DRAIN_MS);
    }
  }
}

/** Whether `current` ended by an exit seen before the boot's `$done` was read, which the channel may still hold. */
function isDrainingAfterExit(current: Supervised): boolean {
  const end = current.end;
  return end !== undefined && 'exit' in end && !end.reported && !current.doneTaken;
}
