import { join } from 'node:path';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { CodecallAbortError, CodecallError, type CodecallErrorCode, errorMessage } from '../core/errors.js';
import type { IsolationLevel } from '../core/isolation.js';
import { type Limits, resolveCallLimits } from '../core/limits.js';
import { randomHex } from '../core/random-bytes.js';
import type { ExecuteResult, RemoteFailureReason } from '../core/result.js';
import {
  type Codecall,
  type CodecallOptions,
  createLocalCodecall,
  type ExecuteOptions,
  type Prepared,
  preparedOf,
} from '../engine/codecall.js';
import { outputPathsOf } from '../engine/result/finish-result.js';
import {
  leftSavedOutputs,
  OutputsPruner,
  type OutputsRetention,
  resolveOutputsRetention,
} from '../engine/result/outputs-retention.js';
import { checkCode } from '../engine/supervise/check-code.js';
import { type RunEventListener, runEventsFor } from '../engine/supervise/run-events.js';
import type { CellOptions, CodecallSession, SessionOptions } from '../engine/supervise/session.js';
import { type ApproveToolCall, askApproval, ToolCallDeniedError } from '../tools/tool-approval.js';
import { describeThrownValue, serializeToolResult } from '../tools/tool-result.js';
import { unpackRunFiles } from './artifact-transfer.js';
import { loadFleetPackages } from './fleet-packages.js';
import {
  ABORT_GRACE_MS,
  checkFleetAddress,
  FINISHED_JOB_RETENTION_SECONDS,
  type FleetAddress,
  type FleetJobData,
  FleetKeys,
  HEARTBEAT_INTERVAL_MS,
  HEARTBEAT_TTL_MS,
  type JobKind,
  MANIFEST_TTL_SECONDS,
  MAX_RUN_ATTEMPTS,
  RECONCILE_EVERY_BEATS,
  REDIS_OUTAGE_LIMIT_MS,
  type WorkerReply,
} from './fleet-protocol.js';
import { Mailbox, sendMail } from './mailbox.js';
import { encodeManifest, manifestOf } from './tool-manifest.js';

/** Reconnect attempts of a command before it fails (runs are not submitted into an outage that hides itself). */
const COMMAND_RETRIES = 2;
const WORKER_ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const RUN_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;

/** `execute` options of a remote codecall. */
export interface RemoteExecuteOptions extends ExecuteOptions {
  /**
   * Id of the run, used as the job id (letters, digits, `_.:-`): submitting the same id again while the first is kept
   * (an hour after it ended) rejects with `DUPLICATE_RUN` instead of running the script twice.
   */
  readonly runId?: string;
}

/** A codecall whose runs go to a worker fleet. */
export interface RemoteCodecall extends Codecall {
  /** Id of this agent process in the fleet (workers send its tool calls to it). */
  readonly agentId: string;
  execute(code: string, options?: RemoteExecuteOptions): Promise<ExecuteResult>;
}

/** What one submission carries besides the job data. */
interface Submission {
  readonly kind: JobKind;
  readonly code?: string | undefined;
  readonly limits?: Partial<Limits> | undefined;
  readonly session?: FleetJobData['session'];
  readonly runId?: string | undefined;
  /** The queue (a worker's own, for a pinned session). */
  readonly queue: string;
  /** The worker the job is pinned to, watched from the start. */
  readonly pinnedWorker?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly onEvent?: RunEventListener | undefined;
  readonly approveToolCall?: ApproveToolCall | undefined;
  readonly toolCallTimeoutMs: number;
}

/** A run submitted to the fleet and not settled yet. */
interface RemoteRun {
  readonly runId: string;
  readonly submission: Submission;
  jobId: string;
  attempt: number;
  worker: string | undefined;
  isolation: IsolationLevel | undefined;
  /** Tool calls received for the current attempt (a lost run is retried only without any). */
  toolCalls: number;
  /** Heartbeats in a row its worker's liveness key was missing. */
  missedBeats: number;
  /** A check of the queue found the job completed while its result message had not come yet. */
  completedSeen: boolean;
  readonly startedAt: number;
  readonly toolController: AbortController;
  abortRequested: boolean;
  settled: boolean;
  resolve: (reply: WorkerReply | RemoteFailure) => void;
  readonly reject: (error: unknown) => void;
}

/** How a run ended without its worker's reply. */
interface RemoteFailure {
  readonly failure: RemoteFailureReason;
  readonly message: string;
  readonly toolCalls: number;
  readonly isolation: IsolationLevel;
  readonly worker: string | undefined;
  readonly durationMs: number;
}

/**
 * Creates a codecall whose runs go to the fleet at `options.remote`. Tools, their handlers, credentials and the
 * approval hook stay here: a local codecall (which never runs a script itself) prepares the tools and answers the
 * workers' tool calls. Connects on the first run.
 * @throws CodecallError `INVALID_CONFIG` for a bad option.
 */
export function createRemoteCodecall(options: CodecallOptions): RemoteCodecall {
  const { remote, ...localOptions } = options;
  const address = checkFleetAddress(remote);
  const local = createLocalCodecall(localOptions);
  const agent = new FleetAgent(address, local, {
    redactSecrets: options.redactSecrets ?? true,
    outputsRetention: resolveOutputsRetention(options.outputs),
  });
  const remoteCodecall: RemoteCodecall = {
    agentId: agent.id,
    limits: local.limits,
    moduleName: local.moduleName,
    async execute(code, executeOptions = {}) {
      checkCode(code);
      agent.assertOpen();
      const runLimits = resolveCallLimits(local.limits, executeOptions);
      if (executeOptions.signal?.aborted) throw new CodecallAbortError(executeOptions.signal.reason);
      if (executeOptions.runId !== undefined && !RUN_ID_PATTERN.test(executeOptions.runId)) {
        throw new CodecallError('INVALID_CONFIG', `runId must match ${RUN_ID_PATTERN} (got "${executeOptions.runId}")`);
      }
      const reply = await agent.submit({
        kind: 'run',
        code,
        limits: callOverrides(executeOptions),
        runId: executeOptions.runId,
        queue: agent.keys.queue,
        signal: executeOptions.signal,
        onEvent: executeOptions.onEvent,
        approveToolCall: executeOptions.approveToolCall,
        toolCallTimeoutMs: runLimits.toolCallTimeoutMs,
      });
      return resultOf(reply);
    },
    describe: () => local.describe(),
    toolDefinition: () => local.toolDefinition(),
    generateModule: () => local.generateModule(),
    toolSources: () => local.toolSources(),
    isolation: () => local.isolation(),
    session(sessionOptions = {}) {
      agent.assertOpen();
      return new RemoteSession(agent, sessionOptions);
    },
    async close() {
      await agent.close();
      await local.close();
    },
  };
  return remoteCodecall;
}

/** The `limits` a run sends over the manifest's: its `limits` and `timeoutMs` (none when it sets neither). */
function callOverrides(options: { limits?: Partial<Limits> | undefined; timeoutMs?: number | undefined }) {
  if (options.limits === undefined && options.timeoutMs === undefined) return undefined;
  return { ...options.limits, ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) };
}

/** The result of a settled run: what the worker sent, or the result of a lost run. Throws what `execute` throws. */
function resultOf(reply: WorkerReply | undefined): ExecuteResult {
  if (reply?.result === undefined) {
    throw new CodecallError('SPAWN_FAILED', 'the worker sent no result');
  }
  return reply.result;
}

/**
 * One agent process in the fleet: its connections, its mailbox, its liveness key, and the runs it submitted. Tool
 * calls of its runs come to its mailbox and are answered with the local codecall's tools.
 */
class FleetAgent {
  readonly id = randomHex(8);
  readonly keys: FleetKeys;
  readonly #address: FleetAddress;
  readonly #local: Codecall;
  readonly #redactSecrets: boolean;
  readonly #runs = new Map<string, RemoteRun>();
  readonly #sessions = new Set<RemoteSession>();
  #connection: Promise<AgentConnection> | undefined;
  #prepared: Promise<Prepared> | undefined;
  #manifest: { hash: string; uploadedAt: number } | undefined;
  // Keeps the artifacts that remote runs leave in this agent's outputs folder within the `outputs` retention.
  #pruner: OutputsPruner | undefined;
  readonly #outputsRetention: OutputsRetention;
  #runCount = 0;
  #closed = false;

  constructor(
    address: FleetAddress,
    local: Codecall,
    settings: { redactSecrets: boolean; outputsRetention: OutputsRetention },
  ) {
    this.#address = address;
    this.#local = local;
    this.#redactSecrets = settings.redactSecrets;
    this.#outputsRetention = settings.outputsRetention;
    this.keys = new FleetKeys(address.queue);
  }

  /** The limits of the local codecall (the runs' defaults). */
  get limits(): Limits {
    return this.#local.limits;
  }

  assertOpen(): void {
    if (this.#closed) throw new CodecallError('CLOSED', 'this codecall is closed; create a new one');
  }

  addSession(session: RemoteSession): void {
    this.#sessions.add(session);
  }

  removeSession(session: RemoteSession): void {
    this.#sessions.delete(session);
  }

  /** Submits a job and resolves with its worker's reply, or the result of a lost run. */
  async submit(submission: Submission): Promise<WorkerReply> {
    const connection = await this.#connect();
    const manifest = await this.#publishManifest(connection);
    this.#runCount += 1;
    const runId = submission.runId ?? `${this.id}-${this.#runCount}`;
    const settledReply = new Promise<WorkerReply | RemoteFailure>((resolve, reject) => {
      const run: RemoteRun = {
        runId,
        submission,
        jobId: runId,
        attempt: 1,
        worker: submission.pinnedWorker,
        isolation: undefined,
        toolCalls: 0,
        missedBeats: 0,
        completedSeen: false,
        startedAt: performance.now(),
        toolController: new AbortController(),
        abortRequested: false,
        settled: false,
        resolve,
        reject,
      };
      void this.#enqueue(connection, run, manifest).catch((error: unknown) => {
        this.#runs.delete(run.jobId);
        run.settled = true;
        reject(
          error instanceof CodecallError
            ? error
            : new CodecallError('REMOTE_UNAVAILABLE', `cannot submit the run to Redis: ${errorMessage(error)}`, {
                redis: redactedUrl(this.#address.redis),
              }),
        );
      });
      const onAbort = () => void this.#abort(connection, run);
      submission.signal?.addEventListener('abort', onAbort, { once: true });
      // Aborted while connecting or uploading the manifest: the listener above would never fire.
      if (submission.signal?.aborted) onAbort();
      run.toolController.signal.addEventListener(
        'abort',
        () => submission.signal?.removeEventListener('abort', onAbort),
        {
          once: true,
        },
      );
    });
    const reply = await settledReply;
    return this.#finish(submission, runId, reply);
  }

  /**
   * Turns a settled run into what `execute` returns or throws: its artifacts written into this agent's folder of the
   * run, then its `artifact` and `run-end` events.
   */
  async #finish(submission: Submission, runId: string, reply: WorkerReply | RemoteFailure): Promise<WorkerReply> {
    let worker: WorkerReply;
    if ('failure' in reply) {
      worker = { worker: reply.worker ?? '', result: lostResult(reply, submission) };
    } else {
      worker = reply;
      // Stopped before the worker had a result (a job removed while waiting, a worker that did not answer the abort,
      // the codecall closing): the run ends `aborted`, as a local run stopped by close() does.
      if (
        reply.aborted === true &&
        reply.result === undefined &&
        (submission.kind === 'run' || submission.kind === 'cell')
      ) {
        worker = { ...reply, result: abortedResult(reply.worker) };
      }
      if (reply.error !== undefined) {
        throw new CodecallError(
          reply.error.code as CodecallErrorCode,
          `worker ${reply.worker}: ${reply.error.message}`,
          {
            worker: reply.worker,
          },
        );
      }
    }
    if (worker.result !== undefined) {
      this.#prepared ??= preparedOf(this.#local);
      const prepared = await this.#prepared;
      const { environment } = prepared;
      const result = await unpackRunFiles(
        worker.result,
        'failure' in reply ? {} : reply,
        outputPathsOf(environment.outputRoot, remoteRunFolder(runId)),
      );
      // Asked for once the run's files are written here, so that close() bounds them.
      this.#pruner ??= new OutputsPruner(environment.outputRoot, this.#outputsRetention, {
        stampDirectory: prepared.hostCacheDirectory,
      });
      this.#pruner.schedule(leftSavedOutputs(result));
      const { artifacts: _sent, fullOutput: _sentOutput, ...rest } = worker;
      worker = { ...rest, result };
      runEventsFor(submission.onEvent, { redactSecrets: this.#redactSecrets })?.end(result);
    }
    if (worker.aborted === true && submission.signal?.aborted) {
      throw new CodecallAbortError(submission.signal.reason, worker.result);
    }
    return worker;
  }

  async #enqueue(connection: AgentConnection, run: RemoteRun, manifest: string): Promise<void> {
    const { submission } = run;
    const data: FleetJobData = {
      kind: submission.kind,
      agent: this.id,
      manifest,
      nonce: randomHex(8),
      code: submission.code,
      limits: submission.limits,
      session: submission.session,
      events: submission.onEvent !== undefined,
    };
    const claimed = await connection.command.set(
      this.keys.claim(run.jobId),
      data.nonce,
      'EX',
      FINISHED_JOB_RETENTION_SECONDS,
      'NX',
    );
    if (claimed !== 'OK') {
      throw new CodecallError(
        'DUPLICATE_RUN',
        `a run with id "${run.jobId}" was already submitted to queue "${this.keys.queue}"; give a new runId`,
        { runId: run.jobId },
      );
    }
    this.#runs.set(run.jobId, run);
    await connection.queue(submission.queue).add(submission.kind, data, {
      jobId: run.jobId,
      removeOnComplete: { age: FINISHED_JOB_RETENTION_SECONDS },
      removeOnFail: { age: FINISHED_JOB_RETENTION_SECONDS },
    });
  }

  async #abort(connection: AgentConnection, run: RemoteRun): Promise<void> {
    if (run.settled) return;
    run.abortRequested = true;
    const jobId = run.jobId;
    await connection.command.set(this.keys.cancelled(jobId), '1', 'EX', FINISHED_JOB_RETENTION_SECONDS).catch(() => {});
    const removed = await connection
      .queue(run.submission.queue)
      .remove(jobId)
      .catch(() => 0);
    if (removed === 1 && run.jobId === jobId) {
      this.#settle(run, { worker: run.worker ?? '', aborted: true });
      return;
    }
    if (run.worker !== undefined) {
      await sendMail(
        connection.command,
        this.keys.workerMailbox(run.worker),
        JSON.stringify({ type: 'abort', job: jobId }),
      ).catch(() => {});
    }
    // A worker that does not answer (gone, cut off) does not hold the abort up for longer than this.
    setTimeout(() => this.#settle(run, { worker: run.worker ?? '', aborted: true }), ABORT_GRACE_MS).unref();
  }

  #fail(run: RemoteRun, failure: RemoteFailureReason, message: string): void {
    this.#settle(run, {
      failure,
      message,
      toolCalls: run.toolCalls,
      isolation: run.isolation ?? 'none',
      worker: run.worker,
      durationMs: Math.round(performance.now() - run.startedAt),
    });
  }

  #settle(run: RemoteRun, reply: WorkerReply | RemoteFailure): void {
    if (run.settled) return;
    run.settled = true;
    this.#runs.delete(run.jobId);
    run.toolController.abort(new Error('the run has ended'));
    run.resolve(reply);
  }

  /** The worker of a run is gone: a run with no tool call yet goes to the queue again; any other ends `worker_lost`. */
  #lost(connection: AgentConnection, run: RemoteRun, message: string): void {
    if (run.settled) return;
    const retry =
      run.submission.kind === 'run' && run.toolCalls === 0 && run.attempt < MAX_RUN_ATTEMPTS && !run.abortRequested;
    if (!retry) {
      this.#fail(run, 'worker_lost', `${message}; ${lostWording(run)}`);
      return;
    }
    void connection.command
      .set(this.keys.cancelled(run.jobId), '1', 'EX', FINISHED_JOB_RETENTION_SECONDS)
      .catch(() => {});
    this.#runs.delete(run.jobId);
    run.attempt += 1;
    run.jobId = `${run.runId}.attempt${run.attempt}`;
    run.worker = undefined;
    run.missedBeats = 0;
    run.completedSeen = false;
    const manifest = this.#manifest?.hash ?? '';
    void this.#enqueue(connection, run, manifest).catch((error: unknown) =>
      this.#fail(run, 'queue_unavailable', `the run could not be submitted again: ${errorMessage(error)}`),
    );
  }

  #connect(): Promise<AgentConnection> {
    this.#connection ??= this.#open().catch((error: unknown) => {
      this.#connection = undefined;
      throw error;
    });
    return this.#connection;
  }

  async #open(): Promise<AgentConnection> {
    const { bullmq, ioredis } = await loadFleetPackages();
    const command = new ioredis.Redis(this.#address.redis, { maxRetriesPerRequest: COMMAND_RETRIES });
    command.on('error', () => {});
    try {
      await command.set(this.keys.agentAlive(this.id), '1', 'PX', HEARTBEAT_TTL_MS);
    } catch (error) {
      command.disconnect();
      throw new CodecallError(
        'REMOTE_UNAVAILABLE',
        `cannot reach Redis for the fleet queue "${this.keys.queue}": ${errorMessage(error)}`,
        { redis: redactedUrl(this.#address.redis) },
        { cause: error },
      );
    }
    const blocking = new ioredis.Redis(this.#address.redis, { maxRetriesPerRequest: null });
    blocking.on('error', () => {});
    const queues = new Map<string, Queue>();
    const connection: AgentConnection = {
      command,
      mailbox: new Mailbox(blocking, this.keys.agentMailbox(this.id), (mail) => this.#onMail(connection, mail)),
      queue: (name) => {
        let queue = queues.get(name);
        if (queue === undefined) {
          queue = new bullmq.Queue(name, { connection: command });
          queue.on('error', () => {});
          queues.set(name, queue);
        }
        return queue;
      },
      queues,
      heartbeat: undefined,
    };
    let beats = 0;
    let lastContact = performance.now();
    let beating = false;
    connection.heartbeat = setInterval(() => {
      if (beating) {
        // A long check of many runs in flight must not let this agent's liveness key expire: workers would take the
        // agent for gone and skip or stop its runs.
        void connection.command.set(this.keys.agentAlive(this.id), '1', 'PX', HEARTBEAT_TTL_MS).catch(() => {});
        return;
      }
      beating = true;
      beats += 1;
      void this.#beat(connection, beats % RECONCILE_EVERY_BEATS === 0)
        .then(() => {
          lastContact = performance.now();
        })
        .catch(() => {
          if (performance.now() - lastContact < REDIS_OUTAGE_LIMIT_MS) return;
          for (const run of [...this.#runs.values()]) {
            this.#fail(
              run,
              'queue_unavailable',
              `Redis was unreachable for ${REDIS_OUTAGE_LIMIT_MS / 1000} s while the run was in flight`,
            );
          }
        })
        .finally(() => {
          beating = false;
        });
    }, HEARTBEAT_INTERVAL_MS);
    connection.heartbeat.unref();
    return connection;
  }

  /** Renews this agent's liveness, watches the workers of its runs, and (`reconcile`) checks the jobs' states. */
  async #beat(connection: AgentConnection, reconcile: boolean): Promise<void> {
    await connection.command.set(this.keys.agentAlive(this.id), '1', 'PX', HEARTBEAT_TTL_MS);
    const workers = new Set<string>();
    for (const run of this.#runs.values()) if (run.worker !== undefined) workers.add(run.worker);
    for (const worker of workers) {
      const alive = (await connection.command.exists(this.keys.workerAlive(worker))) > 0;
      for (const run of [...this.#runs.values()]) {
        if (run.worker !== worker) continue;
        run.missedBeats = alive ? 0 : run.missedBeats + 1;
        if (run.missedBeats >= 2) {
          this.#lost(connection, run, `worker ${worker} stopped renewing its liveness mid-run`);
        }
      }
    }
    if (!reconcile) return;
    for (const run of [...this.#runs.values()]) {
      const jobId = run.jobId;
      const queue = connection.queue(run.submission.queue);
      const state = await queue.getJobState(jobId);
      if (run.settled || run.jobId !== jobId) continue;
      if (state === 'completed') {
        // The worker sends its result message before it completes the job, and only the message carries the
        // artifacts: the kept reply is taken on the next check, once the message has had time to come.
        if (!run.completedSeen) {
          run.completedSeen = true;
          continue;
        }
        const job = await queue.getJob(jobId);
        const reply = job?.returnvalue as WorkerReply | undefined;
        if (reply !== undefined && reply !== null) this.#settle(run, reply);
      } else if (state === 'failed') {
        this.#lost(connection, run, `the queue failed the job (its worker stopped holding it)`);
      } else if (state === 'unknown' && run.worker === undefined) {
        this.#fail(
          run,
          'queue_unavailable',
          'the job is no longer in the queue (Redis lost it before a worker took it)',
        );
      }
    }
  }

  #onMail(connection: AgentConnection, mail: Record<string, unknown>): void {
    const jobId = typeof mail.job === 'string' ? mail.job : '';
    const run = this.#runs.get(jobId);
    const worker = typeof mail.worker === 'string' && WORKER_ID_PATTERN.test(mail.worker) ? mail.worker : undefined;
    switch (mail.type) {
      case 'started':
        if (run === undefined || worker === undefined) return;
        if (run.worker !== undefined && run.worker !== worker) return;
        run.worker = worker;
        run.isolation = mail.isolation === 'bubblewrap' ? 'bubblewrap' : 'none';
        if (run.abortRequested) {
          void sendMail(
            connection.command,
            this.keys.workerMailbox(worker),
            JSON.stringify({ type: 'abort', job: jobId }),
          );
        }
        return;
      case 'tool-call':
        if (worker === undefined || typeof mail.call !== 'number' || typeof mail.tool !== 'string') return;
        void this.#answer(connection, run, worker, mail.call, mail.tool, mail.arguments);
        return;
      case 'event':
        if (run === undefined || run.worker !== worker || typeof mail.event !== 'object') return;
        runEventsFor(run.submission.onEvent, { redactSecrets: this.#redactSecrets })?.emit(
          mail.event as Parameters<RunEventListener>[0],
        );
        return;
      case 'result': {
        if (run === undefined || typeof mail.reply !== 'object' || mail.reply === null) return;
        const reply = mail.reply as WorkerReply;
        // Only the worker that runs it may end a run (a worker the run was moved away from is not heard).
        if (run.worker !== undefined && reply.worker !== run.worker) return;
        this.#settle(run, reply);
        return;
      }
    }
  }

  /** Answers one tool call of a worker with the local tools, as a local run's channel would. */
  async #answer(
    connection: AgentConnection,
    run: RemoteRun | undefined,
    worker: string,
    call: number,
    tool: string,
    args: unknown,
  ): Promise<void> {
    let reply: string;
    // A call of a run that ended, moved to another worker or was never ours is refused, never run. The worker's
    // `started` mail comes before its calls (one list, in order), so the run already names its worker.
    if (run === undefined || run.settled || run.worker !== worker) {
      reply = JSON.stringify({ type: 'tool-reply', call, ok: false, message: `${tool}: the run has ended` });
    } else {
      run.toolCalls += 1;
      try {
        const json = await this.#callTool(run, tool, args);
        reply = `{"type":"tool-reply","call":${call},"ok":true,"value":${json}}`;
      } catch (error) {
        const denied = error instanceof ToolCallDeniedError ? { denied: true } : {};
        reply = JSON.stringify({ type: 'tool-reply', call, ok: false, message: describeThrownValue(error), ...denied });
      }
    }
    await sendMail(connection.command, this.keys.workerMailbox(worker), reply).catch(() => {});
  }

  async #callTool(run: RemoteRun, name: string, args: unknown): Promise<string> {
    this.#prepared ??= preparedOf(this.#local);
    const { environment } = await this.#prepared;
    const tool = environment.tools.get(name);
    if (tool === undefined) throw new Error(`unknown tool "${name}"`);
    const checked = await tool.checkArguments(args);
    if (!checked.ok) throw new Error(checked.message);
    const signal = AbortSignal.any([run.toolController.signal, AbortSignal.timeout(run.submission.toolCallTimeoutMs)]);
    if (tool.needsApproval !== undefined) {
      let needed: boolean;
      try {
        needed = (await tool.needsApproval(checked.value)) !== false;
      } catch (error) {
        throw new ToolCallDeniedError(
          `${name}: the call was denied: its needsApproval check failed: ${describeThrownValue(error)}`,
        );
      }
      if (needed) {
        const outcome = await askApproval(run.submission.approveToolCall ?? environment.approveToolCall, {
          tool: name,
          arguments: checked.value as Record<string, unknown>,
          runId: run.runId,
          signal,
        });
        if (!outcome.allowed) throw new ToolCallDeniedError(`${name}: the call was denied: ${outcome.reason}`);
      }
    }
    const value = await tool.invoke(checked.value, {
      signal,
      runId: run.runId,
      toolName: name,
      artifactsDir: join(environment.outputRoot, remoteRunFolder(run.runId)),
    });
    return serializeToolResult(name, value);
  }

  /** Uploads the tool manifest when it changed or half its time in Redis has passed; returns its hash. */
  async #publishManifest(connection: AgentConnection): Promise<string> {
    this.#prepared ??= preparedOf(this.#local);
    const prepared = await this.#prepared.catch((error: unknown) => {
      this.#prepared = undefined;
      throw error;
    });
    const { json, hash } = encodeManifest(
      manifestOf(prepared, {
        moduleName: this.#local.moduleName,
        limits: this.#local.limits,
        redactSecrets: this.#redactSecrets,
      }),
    );
    const now = Date.now();
    if (this.#manifest?.hash !== hash || now - this.#manifest.uploadedAt > (MANIFEST_TTL_SECONDS * 1000) / 2) {
      await connection.command.set(this.keys.manifest(hash), json, 'EX', MANIFEST_TTL_SECONDS);
      this.#manifest = { hash, uploadedAt: now };
    }
    return hash;
  }

  /**
   * Aborts the runs in flight (each ends `aborted` once its worker confirms, or after a grace period), closes the
   * sessions on their workers, and leaves the fleet.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const connection = await this.#connection?.catch(() => undefined);
    if (connection === undefined) return;
    const runs = [...this.#runs.values()];
    const ended = runs.map(
      (run) =>
        new Promise<void>((resolve) => {
          const original = run.resolve;
          run.resolve = (reply) => {
            original(reply);
            resolve();
          };
        }),
    );
    for (const run of runs) void this.#abort(connection, run);
    await Promise.allSettled([...[...this.#sessions].map((session) => session.close()), ...ended]);
    clearInterval(connection.heartbeat);
    await this.#pruner?.close();
    await connection.command.del(this.keys.agentAlive(this.id)).catch(() => {});
    await Promise.allSettled([...connection.queues.values()].map((queue) => queue.close()));
    await connection.mailbox.close();
    connection.command.disconnect();
  }
}

/** The connections of an agent, made on its first run. */
interface AgentConnection {
  readonly command: Redis;
  readonly mailbox: Mailbox;
  queue(name: string): Queue;
  readonly queues: Map<string, Queue>;
  heartbeat: NodeJS.Timeout | undefined;
}

function lostWording(run: { toolCalls: number; attempt: number; submission: Submission }): string {
  if (run.submission.kind !== 'run') return "the session's state is lost";
  if (run.toolCalls > 0) {
    return `the run had made ${run.toolCalls} tool call${run.toolCalls === 1 ? '' : 's'}, so it was not run again (tool calls may not be repeatable)`;
  }
  return `it was tried ${run.attempt} time${run.attempt === 1 ? '' : 's'}`;
}

/** The result of a run stopped before its worker had one. */
function abortedResult(worker: string): ExecuteResult {
  return {
    status: 'aborted',
    stdout: '',
    stderr: '',
    exitCode: null,
    error: { type: 'Aborted', message: 'the run was stopped before its worker sent a result' },
    toolCalls: 0,
    durationMs: 0,
    isolation: 'none',
    reason: 'aborted',
    ...(worker === '' ? {} : { worker }),
  };
}

/** The result of a run that ended without its worker's result. */
function lostResult(failure: RemoteFailure, submission: Submission): ExecuteResult {
  return {
    status: 'error',
    stdout: '',
    stderr: '',
    exitCode: null,
    error: { type: failure.failure === 'worker_lost' ? 'WorkerLost' : 'QueueUnavailable', message: failure.message },
    toolCalls: failure.toolCalls,
    durationMs: failure.durationMs,
    isolation: failure.isolation,
    reason: failure.failure,
    worker: failure.worker,
    ...(submission.kind === 'cell' ? { stateLost: true } : {}),
  };
}

/**
 * A session on the fleet: its first cell goes to the shared queue, and the worker that runs it keeps the interpreter;
 * every later cell goes to that worker's own queue (pinned for the session's life). A lost worker ends the cell
 * `worker_lost` with `stateLost`, and the next cell starts fresh on any worker.
 */
class RemoteSession implements CodecallSession {
  readonly id = randomHex(8);
  readonly #agent: FleetAgent;
  readonly #options: SessionOptions;
  #worker: string | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(agent: FleetAgent, options: SessionOptions) {
    this.#agent = agent;
    this.#options = options;
    agent.addSession(this);
  }

  execute(code: string, options: CellOptions = {}): Promise<ExecuteResult> {
    if (this.#closed) return Promise.reject(closedSession());
    checkCode(code);
    return this.#queue(async () => {
      const reply = await this.#submit('cell', code, options);
      const result = resultOf(reply);
      this.#worker = result.reason === 'worker_lost' ? undefined : reply.worker || this.#worker;
      return result;
    });
  }

  reset(): Promise<void> {
    if (this.#closed) return Promise.reject(closedSession());
    return this.#queue(async () => {
      if (this.#worker === undefined) return;
      const reply = await this.#submit('session-reset', undefined, {});
      if (reply.result?.reason === 'worker_lost') this.#worker = undefined;
    });
  }

  close(): Promise<void> {
    if (this.#closed) return this.#chain.then(() => undefined);
    this.#closed = true;
    this.#agent.removeSession(this);
    return this.#queue(async () => {
      if (this.#worker !== undefined) await this.#submit('session-close', undefined, {}).catch(() => undefined);
      this.#worker = undefined;
    });
  }

  #queue<T>(step: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(step);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  #submit(kind: JobKind, code: string | undefined, options: CellOptions): Promise<WorkerReply> {
    const worker = this.#worker;
    const keys = this.#agent.keys;
    return this.#agent.submit({
      kind,
      code,
      limits: callOverrides(options),
      session: { id: this.id, limits: this.#options.limits, idleTimeoutMs: this.#options.idleTimeoutMs },
      queue: worker === undefined ? keys.queue : keys.workerQueue(worker),
      pinnedWorker: worker,
      signal: options.signal,
      onEvent: options.onEvent,
      approveToolCall: options.approveToolCall,
      toolCallTimeoutMs: resolveCallLimits(
        resolveCallLimits(this.#agent.limits, { limits: this.#options.limits }),
        options,
      ).toolCallTimeoutMs,
    });
  }
}

/**
 * The name below the agent's output root of a remote run's files: the folder of its artifacts (those its worker sent
 * home and the files its tool calls saved here) and, beside it, `<name>-stdout.txt`, its full output.
 */
function remoteRunFolder(runId: string): string {
  return `remote-${runId}`;
}

/** The URL without its credentials, for error details. */
function redactedUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//');
}

function closedSession(): CodecallError {
  return new CodecallError('CLOSED', 'this session is closed; start a new one with codecall.session()');
}
