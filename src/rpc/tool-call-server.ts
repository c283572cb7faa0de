import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { MAX_JSON_NESTING_DEPTH } from '../core/json-nesting.js';
import { isRecord } from '../core/values.js';
import { formatSeconds } from '../core/wording.js';
import { type BufferedRead, type BufferedReadResult, LENT_BUFFER_BYTES } from '../tools/buffered-read.js';
import type { ArgumentCheck, RegisteredTool } from '../tools/registered-tool.js';
import { type ApproveToolCall, askApproval, ToolCallDeniedError } from '../tools/tool-approval.js';
import { describeThrownValue, serializeToolResult } from '../tools/tool-result.js';
import type { ToolContext } from '../tools/types.js';
import { type ChannelFrame, receiveFromChannel, writeToChannel } from './channel-end.js';
import { LineSplitter } from './line-splitter.js';
import {
  ChannelErrorCode,
  type ChannelErrorCodeValue,
  EXCEPTION_NOTIFICATION,
  encodeErrorReply,
  encodeRawTextReply,
  encodeResultReply,
  NOTIFICATION_PREFIX,
  type ScriptExceptionReport,
} from './protocol.js';
import { splitRawText } from './raw-text.js';
import { type BufferWaiter, IdleBufferList, ReplyBufferPool } from './reply-buffers.js';

/** Calls past the limit the script may keep making (each refused) before the run is stopped as a flood. */
export const TOOL_CALL_FLOOD_ALLOWANCE = 1_000;

/** Reply bytes waiting for a script that does not read them before the run is stopped. */
export const MAX_UNREAD_REPLY_BYTES = 64 * 1024 * 1024;

/** Looks tools up by wire name. */
export interface ToolLookup {
  get(wireName: string): RegisteredTool | undefined;
}

/** Options of {@link ToolCallServer}. */
export interface ToolCallServerOptions {
  /** The host end of the run's socketpair. */
  readonly socket: Duplex;
  readonly tools: ToolLookup;
  readonly runId: string;
  /**
   * The host-only folder where tools save files for the caller, or how to find the running run's or cell's (asked when a
   * call's tool first reads `context.artifactsDir`).
   */
  readonly artifactsDir: string | (() => string);
  readonly maxToolCalls: number;
  readonly toolCallTimeoutMs: number;
  readonly maxFrameBytes: number;
  readonly maxConcurrentToolCalls: number;
  /** The script reported its uncaught exception. */
  onException?(report: ScriptExceptionReport): void;
  /** Any other notification of the script (`$ready`, `$cell_done`), with its unchecked params. */
  onNotification?(method: string, params: unknown): void;
  /** The script went on calling far past the limit, or stopped reading replies: the engine should stop the run. */
  onAbuse?(reason: 'tool_calls', message: string): void;
  /**
   * The hook to ask before a call of a tool that needs approval runs (looked up per call: a session's cells may each
   * have their own); none denies such calls.
   */
  readonly approvalHook?: (() => ApproveToolCall | undefined) | undefined;
  /** A call started (left the queue): its arguments are being checked, then it is approved and run. */
  onCallStart?(call: ToolCallStarted): void;
  /** A call that started ended: replied to, timed out, or cut off by the end of the run or cell. */
  onCallEnd?(call: ToolCallEnded): void;
}

/** A call that started, as {@link ToolCallServerOptions.onCallStart} sees it. */
export interface ToolCallStarted {
  /** The script's id of the call (unique among the calls in flight). */
  readonly id: number;
  /** Wire name of the tool. */
  readonly tool: string;
  /** The arguments as the script sent them (unchecked). */
  readonly arguments: unknown;
  /** `performance.now()` when it started. */
  readonly startedAt: number;
}

/** A call that ended, as {@link ToolCallServerOptions.onCallEnd} sees it. */
export interface ToolCallEnded {
  readonly id: number;
  readonly tool: string;
  /** `performance.now()` when it started and ended. */
  readonly startedAt: number;
  readonly endedAt: number;
  /** The error the script got (none on success). */
  readonly error?: string | undefined;
  /** Its channel error code (see `ChannelErrorCode`). */
  readonly errorCode?: number | undefined;
  /** The approval hook (or the lack of one) denied it. */
  readonly denied: boolean;
  /** UTF-8 bytes of the result sent back (0 on error). */
  readonly resultBytes: number;
}

/** How a started call ended, for {@link ToolCallEnded}. */
interface CallEnd {
  readonly error?: string | undefined;
  readonly errorCode?: number | undefined;
  readonly denied?: boolean | undefined;
  readonly resultBytes?: number | undefined;
}

const SUCCESS_WITHOUT_BYTES: CallEnd = {};
/** Room kept in a reply frame for what surrounds the result: `{"id":…,"result":` … `}` and the newline. */
const REPLY_ENVELOPE_BYTES = 64;
/** Most bytes one UTF-16 code unit of a string takes in UTF-8 (a surrogate pair: 4 bytes for 2 units). */
const MAX_UTF8_BYTES_PER_CODE_UNIT = 3;
/**
 * Read buffers a server lends at once (to calls running, or to replies the socket has not taken yet); past it, a
 * buffered read waits, still in flight and under its timeout, for a buffer given back. So a script that leaves its
 * replies unread makes the host hold at most this many (4 MiB) for the reads of its run, and a burst of reads reuses
 * them instead of reading into fresh memory.
 */
export const MAX_LENT_REPLY_BUFFERS = 16;
/**
 * Read buffers the process keeps while no server lends them (4 MiB, of which only the pages reads touched are
 * resident): enough for the next burst of a run, or the next run, to find a whole lent set already faulted in.
 */
const MAX_IDLE_REPLY_BUFFERS = MAX_LENT_REPLY_BUFFERS;

// One idle list for every server of the process: a run's first burst reuses the buffers of the runs before it.
const idleReplyBuffers = new IdleBufferList(LENT_BUFFER_BYTES, MAX_IDLE_REPLY_BUFFERS);

/** What one run (or one session cell) may spend on tool calls; see {@link ToolCallServer.startBudget}. */
export interface ToolCallBudget {
  readonly maxToolCalls: number;
  readonly toolCallTimeoutMs: number;
  readonly maxConcurrentToolCalls: number;
}

/** A call from the moment it is accepted until its reply is written. */
interface ActiveCall {
  readonly id: number;
  readonly tool: RegisteredTool;
  readonly params: unknown;
  /** Created only when the handler reads `context.signal`: most calls never need one. */
  controller: AbortController | undefined;
  /** When the call times out (`performance.now()` ms); set when it starts, so queued calls have none yet. */
  deadline: number | undefined;
  /** When it started (`performance.now()` ms). */
  startedAt: number;
  done: boolean;
  /** Set while a buffered read waits for a lent buffer (see {@link ReplyBufferPool.waitFor}). */
  bufferWaiter: BufferWaiter | undefined;
  /** The server's {@link RunEpoch} value when the call came: the run or cell it belongs to. */
  readonly epoch: number;
}

/** Counts the ends of runs and cells on one channel, so a call can tell whether its own run or cell is over. */
interface RunEpoch {
  value: number;
}

const RUN_ENDED = 'the run has ended';
const CALL_TIMED_OUT = 'tool call timed out';

/** The context handed to a handler; its signal and its artifacts folder are made on first use. */
class CallContext implements ToolContext {
  readonly #call: ActiveCall;
  readonly #artifactsDir: string | (() => string);
  readonly #epoch: RunEpoch;
  #folder: string | undefined;
  readonly runId: string;
  readonly toolName: string;

  constructor(call: ActiveCall, runId: string, artifactsDir: string | (() => string), epoch: RunEpoch) {
    this.#call = call;
    this.#artifactsDir = artifactsDir;
    this.#epoch = epoch;
    this.runId = runId;
    this.toolName = call.tool.descriptor.name;
  }

  get signal(): AbortSignal {
    if (this.#call.done) return AbortSignal.abort(new Error(RUN_ENDED));
    this.#call.controller ??= new AbortController();
    return this.#call.controller.signal;
  }

  // Looked up when a tool first asks, not per call: most tools never save files. Once the call's run or cell is over,
  // the folder the lookup would give is another cell's (or none): a tool asking that late gets an error instead.
  get artifactsDir(): string {
    if (this.#folder === undefined) {
      if (this.#call.epoch !== this.#epoch.value) {
        throw new Error(`${this.toolName}: ${RUN_ENDED}; its artifacts folder is no longer open`);
      }
      const artifactsDir = this.#artifactsDir;
      this.#folder = typeof artifactsDir === 'function' ? artifactsDir() : artifactsDir;
    }
    return this.#folder;
  }
}

/**
 * The host side of one run's tool channel: reads calls, checks and dispatches them concurrently, and writes one
 * reply per call. Nothing the script sends can crash or block the host; every bad frame gets an error reply.
 */
export class ToolCallServer {
  readonly #options: ToolCallServerOptions;
  readonly #splitter: LineSplitter;
  readonly #inFlight = new Map<number, ActiveCall>();
  readonly #queue: ActiveCall[] = [];
  /** One timer for all calls, armed for the oldest started call (calls start in order, with the same timeout). */
  #timeoutTimer: NodeJS.Timeout | undefined;
  readonly #onTimeoutTimer = (): void => {
    this.#timeoutTimer = undefined;
    const now = performance.now();
    for (const call of this.#inFlight.values()) {
      if (call.deadline === undefined) break;
      if (call.deadline > now) {
        this.#armTimeout(call.deadline - now);
        return;
      }
      call.controller?.abort(new Error(CALL_TIMED_OUT));
      this.#fail(
        call,
        ChannelErrorCode.toolCallTimeout,
        `${call.tool.descriptor.name}: the tool call timed out after ${formatSeconds(this.#budget.toolCallTimeoutMs)}`,
      );
    }
  };
  /** Bumped when a run or cell ends (calls refused or the channel ended): see {@link CallContext.artifactsDir}. */
  readonly #epoch: RunEpoch = { value: 0 };
  #budget: ToolCallBudget;
  #accepted = 0;
  #refused = 0;
  #denied = 0;
  #ended = false;
  #limitReached = false;
  /** Set while calls are refused without ending the channel (a session between cells): the refusal message. */
  #refusal: string | undefined;
  /**
   * The buffers lent to built-in tools' buffered reads; only on a real socket, which has taken a reply's bytes into
   * the kernel when its write calls back (another stream may still refer to them).
   */
  readonly #replyBuffers: ReplyBufferPool | undefined;

  constructor(options: ToolCallServerOptions) {
    this.#options = options;
    this.#budget = options;
    this.#replyBuffers =
      options.socket instanceof Socket ? new ReplyBufferPool(idleReplyBuffers, MAX_LENT_REPLY_BUFFERS) : undefined;
    this.#splitter = new LineSplitter(
      { maxFrameBytes: options.maxFrameBytes, maxNestingDepth: MAX_JSON_NESTING_DEPTH },
      {
        line: (line) => this.#onLine(line),
        oversized: (limit) =>
          this.#reply(
            encodeErrorReply(
              null,
              ChannelErrorCode.frameTooLarge,
              `frame too large: over the channel limit of ${limit} bytes`,
            ),
          ),
        tooDeep: (maxDepth) =>
          this.#reply(
            encodeErrorReply(
              null,
              ChannelErrorCode.parseError,
              `parse error: the frame nests arrays and objects deeper than ${maxDepth} levels`,
            ),
          ),
      },
    );
    receiveFromChannel(options.socket, (bytes, length) => {
      if (!this.#ended) this.#splitter.push(bytes, length);
    });
    // The script may close its end or die at any time; errors on the socket are the end of the channel, not a crash.
    options.socket.on('error', () => {});
  }

  /** Tool calls the script made that were dispatched (valid or not), up to the limit. */
  get toolCalls(): number {
    return this.#accepted;
  }

  /** Calls of this budget that approval denied (each also counted in {@link toolCalls}). */
  get deniedToolCalls(): number {
    return this.#denied;
  }

  /** Whether the script hit `maxToolCalls`. */
  get limitReached(): boolean {
    return this.#limitReached;
  }

  /**
   * Starts a fresh budget (a session's next cell): the call count and the limit flag start again from zero, and calls
   * are accepted again after {@link refuseCalls}.
   */
  startBudget(budget: ToolCallBudget): void {
    this.#budget = budget;
    this.#accepted = 0;
    this.#refused = 0;
    this.#denied = 0;
    this.#limitReached = false;
    this.#refusal = undefined;
  }

  /**
   * Stops accepting calls while keeping the channel open (a session cell ended): calls in flight are aborted and
   * answered with a `runEnded` error carrying `message`, and so is every later call until {@link startBudget}.
   */
  refuseCalls(message: string): void {
    if (this.#ended) return;
    this.#refusal = message;
    this.#epoch.value += 1;
    const calls = [...this.#inFlight.values()];
    this.#inFlight.clear();
    this.#queue.length = 0;
    // No call is left to time out (and the next budget may have a shorter timeout than the one armed).
    clearTimeout(this.#timeoutTimer);
    this.#timeoutTimer = undefined;
    for (const call of calls) {
      if (call.done) continue;
      call.done = true;
      this.#stopWaitingForBuffer(call);
      call.controller?.abort(new Error(message));
      const error = `${call.tool.descriptor.name}: ${message}`;
      this.#reply(encodeErrorReply(call.id, ChannelErrorCode.runEnded, error));
      this.#reportEnd(call, { error, errorCode: ChannelErrorCode.runEnded });
    }
  }

  /** Ends the channel: in-flight calls are aborted, later frames ignored, late results dropped. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#epoch.value += 1;
    clearTimeout(this.#timeoutTimer);
    for (const call of this.#inFlight.values()) {
      if (call.done) continue;
      call.done = true;
      call.controller?.abort(new Error(RUN_ENDED));
      this.#reportEnd(call, {
        error: `${call.tool.descriptor.name}: ${RUN_ENDED}`,
        errorCode: ChannelErrorCode.runEnded,
      });
    }
    this.#inFlight.clear();
    this.#queue.length = 0;
    this.#replyBuffers?.close();
    this.#options.socket.destroy();
  }

  #onLine(line: string): void {
    // A callback earlier in the same chunk may have ended the server (e.g. on `$done`): later frames are not acted on.
    if (this.#ended) return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.#reply(encodeErrorReply(null, ChannelErrorCode.parseError, 'parse error: the frame is not valid JSON'));
      return;
    }
    if (!isRecord(message)) {
      this.#reply(encodeErrorReply(null, ChannelErrorCode.invalidRequest, 'invalid request: expected a JSON object'));
      return;
    }
    const { id, method, params } = message;
    if (id === undefined && typeof method === 'string' && method.startsWith(NOTIFICATION_PREFIX)) {
      this.#onNotification(method, params);
      return;
    }
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) {
      this.#reply(
        encodeErrorReply(null, ChannelErrorCode.invalidRequest, 'invalid request: "id" must be a positive integer'),
      );
      return;
    }
    if (typeof method !== 'string') {
      this.#reply(encodeErrorReply(id, ChannelErrorCode.invalidRequest, 'invalid request: "method" must be a string'));
      return;
    }
    if (params !== undefined && !isRecord(params)) {
      this.#reply(
        encodeErrorReply(
          id,
          ChannelErrorCode.invalidArguments,
          `${method}: arguments must be an object of named values`,
        ),
      );
      return;
    }
    if (this.#refusal !== undefined) {
      this.#reply(encodeErrorReply(id, ChannelErrorCode.runEnded, `${method}: ${this.#refusal}`));
      return;
    }
    if (this.#inFlight.has(id)) {
      this.#reply(encodeErrorReply(id, ChannelErrorCode.invalidRequest, `invalid request: id ${id} is already in use`));
      return;
    }
    const budget = this.#budget;
    if (this.#accepted >= budget.maxToolCalls) {
      this.#limitReached = true;
      this.#reply(
        encodeErrorReply(id, ChannelErrorCode.toolCallLimit, `tool call limit reached (${budget.maxToolCalls})`),
      );
      this.#refused += 1;
      if (this.#refused === TOOL_CALL_FLOOD_ALLOWANCE) {
        this.#options.onAbuse?.(
          'tool_calls',
          `the script made ${TOOL_CALL_FLOOD_ALLOWANCE} more tool calls after reaching the limit of ${budget.maxToolCalls}`,
        );
      }
      return;
    }
    this.#accepted += 1;
    const tool = this.#options.tools.get(method);
    if (tool === undefined) {
      this.#reply(encodeErrorReply(id, ChannelErrorCode.unknownTool, `unknown tool "${method}"`));
      return;
    }
    const call: ActiveCall = {
      id,
      tool,
      params: params ?? {},
      controller: undefined,
      deadline: undefined,
      startedAt: 0,
      done: false,
      bufferWaiter: undefined,
      epoch: this.#epoch.value,
    };
    const running = this.#inFlight.size - this.#queue.length;
    this.#inFlight.set(id, call);
    if (running >= budget.maxConcurrentToolCalls) this.#queue.push(call);
    else this.#start(call);
  }

  #onNotification(method: string, params: unknown): void {
    if (method === EXCEPTION_NOTIFICATION) {
      if (typeof params === 'object' && params !== null) {
        this.#options.onException?.(exceptionReport(params as Record<string, unknown>));
      }
      return;
    }
    this.#options.onNotification?.(method, params);
  }

  #start(call: ActiveCall): void {
    const timeout = this.#budget.toolCallTimeoutMs;
    call.startedAt = performance.now();
    call.deadline = call.startedAt + timeout;
    if (this.#timeoutTimer === undefined) this.#armTimeout(timeout);
    this.#options.onCallStart?.({
      id: call.id,
      tool: call.tool.descriptor.name,
      arguments: call.params,
      startedAt: call.startedAt,
    });
    let checked: ArgumentCheck | Promise<ArgumentCheck>;
    try {
      checked = call.tool.checkArguments(call.params);
    } catch (error) {
      this.#refuseArguments(call, `${call.tool.descriptor.name}: ${describeThrownValue(error)}`);
      return;
    }
    // Synchronous checks (JSON Schema) skip a promise hop: this is the hot path of every call.
    if (checked instanceof Promise) {
      checked.then(
        (outcome) => this.#invoke(call, outcome),
        (error: unknown) => this.#refuseArguments(call, `${call.tool.descriptor.name}: ${describeThrownValue(error)}`),
      );
    } else {
      this.#invoke(call, checked);
    }
  }

  #armTimeout(milliseconds: number): void {
    clearTimeout(this.#timeoutTimer);
    this.#timeoutTimer = setTimeout(this.#onTimeoutTimer, Math.max(1, Math.ceil(milliseconds)));
    // A pending timeout alone must not keep the host alive: the run's own timers and pipes do.
    this.#timeoutTimer.unref();
  }

  #refuseArguments(call: ActiveCall, message: string): void {
    this.#fail(call, ChannelErrorCode.invalidArguments, message);
  }

  #invoke(call: ActiveCall, checked: ArgumentCheck): void {
    if (call.done) return;
    if (!checked.ok) {
      this.#refuseArguments(call, checked.message);
      return;
    }
    const context = new CallContext(call, this.#options.runId, this.#options.artifactsDir, this.#epoch);
    if (call.tool.needsApproval !== undefined) {
      void this.#approveThenRun(call, checked.value, context);
      return;
    }
    this.#run(call, checked.value, context);
  }

  /**
   * Asks whether the call may run, then runs it or replies with the denial. The wait counts toward the call's
   * timeout (its deadline is already set); a failure of `needsApproval` or of the hook denies.
   */
  async #approveThenRun(call: ActiveCall, args: unknown, context: CallContext): Promise<void> {
    const name = call.tool.descriptor.name;
    let needed: boolean;
    try {
      needed = (await call.tool.needsApproval?.(args)) !== false;
    } catch (error) {
      this.#deny(call, `${name}: the call was denied: its needsApproval check failed: ${describeThrownValue(error)}`);
      return;
    }
    if (call.done) return;
    if (needed) {
      const outcome = await askApproval(this.#options.approvalHook?.(), {
        tool: name,
        arguments: args as Record<string, unknown>,
        runId: this.#options.runId,
        signal: context.signal,
      });
      if (call.done) return;
      if (!outcome.allowed) {
        this.#deny(call, `${name}: the call was denied: ${outcome.reason}`);
        return;
      }
    }
    this.#run(call, args, context);
  }

  #deny(call: ActiveCall, message: string): void {
    if (call.done) return;
    this.#denied += 1;
    this.#finish(call, encodeErrorReply(call.id, ChannelErrorCode.toolFailed, message), {
      error: message,
      errorCode: ChannelErrorCode.toolFailed,
      denied: true,
    });
  }

  #run(call: ActiveCall, args: unknown, context: CallContext): void {
    const bufferedRead = call.tool.bufferedRead;
    const pool = this.#replyBuffers;
    if (bufferedRead !== undefined && pool !== undefined) {
      const buffer = pool.take();
      if (buffer !== undefined) {
        this.#runBuffered(call, args, context, bufferedRead, pool, buffer);
        return;
      }
      const waiter: BufferWaiter = (lent) => {
        call.bufferWaiter = undefined;
        // Every end of a call cancels its wait first; should one not, its buffer goes on to the next waiter.
        if (call.done) pool.give(lent);
        else this.#runBuffered(call, args, context, bufferedRead, pool, lent);
      };
      call.bufferWaiter = waiter;
      pool.waitFor(waiter);
      return;
    }
    let pending: Promise<unknown>;
    try {
      pending = call.tool.invoke(args, context);
    } catch (error) {
      this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error));
      return;
    }
    pending.then(
      (value) => this.#finishWithResult(call, value),
      (error: unknown) =>
        error instanceof ToolCallDeniedError
          ? this.#deny(call, error.message)
          : this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error)),
    );
  }

  // A built-in tool reading into a buffer of the server: the buffer comes back when the tool is done with it and,
  // when the reply carries bytes of it, once the socket has taken the whole reply.
  #runBuffered(
    call: ActiveCall,
    args: unknown,
    context: CallContext,
    bufferedRead: BufferedRead,
    pool: ReplyBufferPool,
    buffer: Buffer,
  ): void {
    let pending: Promise<BufferedReadResult>;
    try {
      pending = bufferedRead(args as Record<string, unknown>, context, buffer);
    } catch (error) {
      pool.give(buffer);
      this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error));
      return;
    }
    pending.then(
      (read) => this.#finishWithBufferedRead(call, read, buffer, pool),
      (error: unknown) => {
        pool.give(buffer);
        if (error instanceof ToolCallDeniedError) this.#deny(call, error.message);
        else this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error));
      },
    );
  }

  #finishWithBufferedRead(call: ActiveCall, read: BufferedReadResult, buffer: Buffer, pool: ReplyBufferPool): void {
    const bytes = read.bytes;
    if (bytes === undefined || call.done) {
      pool.give(buffer);
      this.#finishWithResult(call, read.value);
      return;
    }
    let json: string;
    try {
      json = serializeToolResult(call.tool.descriptor.name, read.value);
    } catch (error) {
      pool.give(buffer);
      this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error));
      return;
    }
    const frame = encodeRawTextReply(call.id, json, [[read.key, bytes.length]]);
    const size = Buffer.byteLength(frame) + bytes.length;
    if (size > this.#options.maxFrameBytes) {
      pool.give(buffer);
      this.#refuseLargeResult(call, size);
      return;
    }
    this.#finish(call, [frame, bytes], { resultBytes: size }, () => pool.give(buffer));
  }

  #finishWithResult(call: ActiveCall, value: unknown): void {
    if (call.done) return;
    const name = call.tool.descriptor.name;
    const raw = splitRawText(value);
    let json: string;
    try {
      json = serializeToolResult(name, raw === undefined ? value : raw.value);
    } catch (error) {
      this.#fail(call, ChannelErrorCode.toolFailed, describeThrownValue(error));
      return;
    }
    const limit = this.#options.maxFrameBytes;
    if (raw === undefined) {
      // The limit counts bytes: a string's length counts UTF-16 code units, each of which may take 3 bytes in UTF-8.
      const room = limit - REPLY_ENVELOPE_BYTES;
      const bytes = json.length * MAX_UTF8_BYTES_PER_CODE_UNIT > room ? Buffer.byteLength(json) : undefined;
      if (bytes !== undefined && bytes > room) {
        this.#refuseLargeResult(call, bytes);
        return;
      }
      const end =
        this.#options.onCallEnd === undefined
          ? SUCCESS_WITHOUT_BYTES
          : { resultBytes: bytes ?? Buffer.byteLength(json) };
      this.#finish(call, encodeResultReply(call.id, json), end);
      return;
    }
    const frame = encodeRawTextReply(call.id, json, raw.segments);
    const size = Buffer.byteLength(frame) + raw.byteLength;
    if (size > limit) {
      this.#refuseLargeResult(call, size);
      return;
    }
    this.#finish(call, [frame, ...raw.bytes], { resultBytes: size });
  }

  #refuseLargeResult(call: ActiveCall, bytes: number): void {
    this.#fail(
      call,
      ChannelErrorCode.frameTooLarge,
      `${call.tool.descriptor.name}: the result is ${bytes} bytes, over the channel limit of ${this.#options.maxFrameBytes} bytes; ask for less (e.g. a smaller range)`,
    );
  }

  #fail(call: ActiveCall, code: ChannelErrorCodeValue, message: string): void {
    if (call.done) return;
    this.#finish(call, encodeErrorReply(call.id, code, message), { error: message, errorCode: code });
  }

  /** Replies to a call; `written` is called once nothing refers to the frame's buffers any more (see #reply). */
  #finish(
    call: ActiveCall,
    frame: string | readonly (string | Buffer)[],
    end: CallEnd,
    written?: (() => void) | undefined,
  ): void {
    if (call.done || this.#ended) {
      call.done = true;
      written?.();
      return;
    }
    call.done = true;
    this.#stopWaitingForBuffer(call);
    this.#inFlight.delete(call.id);
    this.#reply(frame, written);
    this.#reportEnd(call, end);
    const next = this.#queue.shift();
    if (next !== undefined) this.#start(next);
  }

  // A call that ends (timed out, or its run or cell ended) while its read waits for a buffer never gets one.
  #stopWaitingForBuffer(call: ActiveCall): void {
    const waiter = call.bufferWaiter;
    if (waiter === undefined) return;
    call.bufferWaiter = undefined;
    this.#replyBuffers?.cancel(waiter);
  }

  #reportEnd(call: ActiveCall, end: CallEnd): void {
    const onCallEnd = this.#options.onCallEnd;
    // A call still queued never started: it has no start to end.
    if (onCallEnd === undefined || call.deadline === undefined) return;
    onCallEnd({
      id: call.id,
      tool: call.tool.descriptor.name,
      startedAt: call.startedAt,
      endedAt: performance.now(),
      error: end.error,
      errorCode: end.errorCode,
      denied: end.denied === true,
      resultBytes: end.resultBytes ?? 0,
    });
  }

  /**
   * Writes a frame, or a frame and the raw bytes that follow it (see `writeToChannel`). `written` is called once the
   * socket no longer refers to them: after a complete direct write, when their stream write calls back (done, failed
   * or dropped with the socket), or at once when nothing is written.
   */
  #reply(frame: ChannelFrame, written?: (() => void) | undefined): void {
    const socket = this.#options.socket;
    if (this.#ended || socket.destroyed || !socket.writable) {
      written?.();
      return;
    }
    writeToChannel(socket, frame, written);
    if (socket.writableLength > MAX_UNREAD_REPLY_BYTES) {
      this.#options.onAbuse?.(
        'tool_calls',
        `the script left over ${MAX_UNREAD_REPLY_BYTES} bytes of tool replies unread`,
      );
    }
  }
}

/** Reads the params of a `$exception` notification (or the `exception` of a `$cell_done`) into a report. */
export function exceptionReport(params: Readonly<Record<string, unknown>>): ScriptExceptionReport {
  return {
    type: String(params.type ?? 'Exception'),
    message: String(params.message ?? ''),
    traceback: typeof params.traceback === 'string' ? params.traceback : undefined,
  };
}
