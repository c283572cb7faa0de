import { hostname } from 'node:os';
import type { Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { CodecallAbortError, CodecallError, errorMessage } from '../core/errors.js';
import { randomHex } from '../core/random-bytes.js';
import type { ExecuteResult } from '../core/result.js';
import { type Codecall, type CodecallOptions, createLocalCodecall } from '../engine/codecall.js';
import type { RunEvent } from '../engine/supervise/run-events.js';
import type { CodecallSession } from '../engine/supervise/session.js';
import { ToolCallDeniedError } from '../tools/tool-approval.js';
import type { ToolContext } from '../tools/types.js';
import { packRunFiles, withoutFileData } from './artifact-transfer.js';
import { loadFleetPackages } from './fleet-packages.js';
import {
  checkFleetAddress,
  FINISHED_JOB_RETENTION_SECONDS,
  type FleetJobData,
  FleetKeys,
  HEARTBEAT_INTERVAL_MS,
  HEARTBEAT_TTL_MS,
  MAX_FORWARDED_EVENTS,
  type WorkerReply,
} from './fleet-protocol.js';
import { Mailbox, sendMail } from './mailbox.js';
import { forwardingSources, forwardingTools, type ToolManifest } from './tool-manifest.js';

/** Runs a worker takes at once when `concurrency` is not given. */
export const DEFAULT_WORKER_CONCURRENCY = 2;
/**
 * Codecalls (one per agents' tool manifest: its generated module, its warm pool) a worker keeps at most; past it the
 * least recently used one with no run and no session in flight is closed.
 */
export const MAX_WORKER_CODECALLS = 16;
/** A worker closes a codecall that had no run and no session in flight for this long. */
export const IDLE_CODECALL_MS = 10 * 60_000;
/** How long a job's BullMQ lock lasts without renewal: a dead worker's job is failed (never re-run) after it. */
export const WORKER_LOCK_MS = 10_000;

/** The options of the local codecall a worker runs scripts with: sandbox, interpreter, pool, state folder... */
export type WorkerCodecallOptions = Omit<
  CodecallOptions,
  'tools' | 'builtinTools' | 'mcpServers' | 'databases' | 'remote' | 'moduleName' | 'limits' | 'approveToolCall'
>;

/** Options of {@link startFleetWorker}. */
export interface FleetWorkerOptions {
  /** Redis (or Valkey) URL. */
  readonly redis: string;
  /** The queue to take runs from (default `codecall`). */
  readonly queue?: string | undefined;
  /** Runs at once (default {@link DEFAULT_WORKER_CONCURRENCY}). */
  readonly concurrency?: number | undefined;
  /** Id of this worker as results name it (default: host name, process id and a random suffix). */
  readonly id?: string | undefined;
  /** How scripts run here: sandbox, Python, warm pool, state folder. Tools and limits come from each agent. */
  readonly codecall?: WorkerCodecallOptions | undefined;
  /** Codecalls (one per tool manifest) kept at most (default {@link MAX_WORKER_CODECALLS}). */
  readonly maxCodecalls?: number | undefined;
  /** Milliseconds after which an idle codecall is closed (default {@link IDLE_CODECALL_MS}). */
  readonly idleCodecallMs?: number | undefined;
}

/** A running worker. */
export interface FleetWorker {
  /** The id results carry in `worker`. */
  readonly id: string;
  /** Codecalls this worker holds now, one per tool manifest of the agents it ran for (bounded, see `maxCodecalls`). */
  readonly codecalls: number;
  /** Stops taking runs, waits for the runs in progress, and closes everything. */
  close(): Promise<void>;
}

/**
 * The reply of a run that ended with `result`, its full output and artifacts read for the agent (see
 * {@link packRunFiles}).
 */
async function replyWithFiles(
  result: ExecuteResult,
  reply: { readonly worker: string; readonly aborted?: true },
): Promise<WorkerReply> {
  const packed = await packRunFiles({ ...result, worker: reply.worker }, reply.worker);
  return {
    ...reply,
    result: packed.result,
    ...(packed.artifacts.length > 0 ? { artifacts: packed.artifacts } : {}),
    ...(packed.fullOutput !== undefined ? { fullOutput: packed.fullOutput } : {}),
  };
}

/** A job this worker is running. */
interface ActiveJob {
  readonly id: string;
  readonly agent: string;
  readonly controller: AbortController;
  readonly engineRuns: Set<string>;
}

/** A session living on this worker: pinned here by its agent for its whole life. */
interface HostedSession {
  readonly session: CodecallSession;
  readonly agent: string;
  /** The tool manifest whose codecall holds it (kept open while the session lives). */
  readonly manifest: string;
}

/** The codecall of one tool manifest, and what uses it. */
interface ManifestCodecall {
  readonly codecall: Promise<Codecall>;
  /** Jobs using it now. */
  jobs: number;
  /** `performance.now()` when a job last took or left it. */
  lastUsed: number;
}

/** A tool call sent to an agent, waiting for the reply. */
interface PendingCall {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
}

const ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Starts a worker of the fleet: takes runs from the BullMQ queue (and the cells of the sessions pinned to it from its
 * own queue), runs them with the same engine as a local codecall, and sends every tool call back to the agent that
 * submitted the run. A worker holds no tool handler and no credential of any agent.
 * @throws CodecallError `INVALID_CONFIG` for a bad option or a missing `bullmq` / `ioredis`.
 */
export async function startFleetWorker(options: FleetWorkerOptions): Promise<FleetWorker> {
  const address = checkFleetAddress({ redis: options.redis, ...(options.queue ? { queue: options.queue } : {}) });
  const concurrency = options.concurrency ?? DEFAULT_WORKER_CONCURRENCY;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    throw new CodecallError('INVALID_CONFIG', `concurrency must be a positive integer (got ${concurrency})`);
  }
  const id = options.id ?? `${hostname().replace(/[^A-Za-z0-9_.-]/g, '-')}-${process.pid}-${randomHex(3)}`;
  if (!ID_PATTERN.test(id))
    throw new CodecallError('INVALID_CONFIG', `worker id must match ${ID_PATTERN} (got "${id}")`);
  const maxCodecalls = options.maxCodecalls ?? MAX_WORKER_CODECALLS;
  const idleCodecallMs = options.idleCodecallMs ?? IDLE_CODECALL_MS;
  if (!Number.isSafeInteger(maxCodecalls) || maxCodecalls < 1) {
    throw new CodecallError('INVALID_CONFIG', `maxCodecalls must be a positive integer (got ${maxCodecalls})`);
  }
  if (!Number.isFinite(idleCodecallMs) || idleCodecallMs < 0) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `idleCodecallMs must be a number of milliseconds ≥ 0 (got ${idleCodecallMs})`,
    );
  }
  const { bullmq, ioredis } = await loadFleetPackages();
  const keys = new FleetKeys(address.queue);
  const connect = (): Redis => {
    const connection = new ioredis.Redis(address.redis, { maxRetriesPerRequest: null });
    // Failures reach the commands that were waiting; the event itself only reports reconnect attempts.
    connection.on('error', () => {});
    return connection;
  };
  const command = connect();
  await command.set(keys.workerAlive(id), '1', 'PX', HEARTBEAT_TTL_MS);

  const codecalls = new Map<string, ManifestCodecall>();
  const jobs = new Map<string, ActiveJob>();
  const byEngineRun = new Map<string, ActiveJob>();
  const pendingCalls = new Map<number, PendingCall>();
  const sessions = new Map<string, HostedSession>();
  let callCount = 0;

  const forward = (context: ToolContext, tool: string, args: unknown): Promise<unknown> => {
    const job = byEngineRun.get(context.runId);
    if (job === undefined) return Promise.reject(new Error('the run has ended'));
    callCount += 1;
    const call = callCount;
    return new Promise<unknown>((resolve, reject) => {
      const signal = context.signal;
      const onAbort = () => {
        pendingCalls.delete(call);
        reject(new Error(errorMessage(signal.reason)));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      pendingCalls.set(call, {
        resolve: (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject: (error) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      const mail = { type: 'tool-call', job: job.id, worker: id, call, tool, arguments: args };
      sendMail(command, keys.agentMailbox(job.agent), JSON.stringify(mail)).catch((error: unknown) => {
        pendingCalls.get(call)?.reject(new Error(`the agent could not be reached: ${errorMessage(error)}`));
        pendingCalls.delete(call);
      });
    });
  };

  const mailbox = new Mailbox(connect(), keys.workerMailbox(id), (mail) => {
    if (mail.type === 'tool-reply' && typeof mail.call === 'number') {
      const pending = pendingCalls.get(mail.call);
      if (pending === undefined) return;
      pendingCalls.delete(mail.call);
      if (mail.ok === true) pending.resolve(mail.value);
      else {
        const message = typeof mail.message === 'string' ? mail.message : 'the tool call failed';
        pending.reject(mail.denied === true ? new ToolCallDeniedError(message) : new Error(message));
      }
    } else if (mail.type === 'abort' && typeof mail.job === 'string') {
      jobs.get(mail.job)?.controller.abort(new Error('aborted by the agent'));
    }
  });

  const inUse = (hash: string, entry: ManifestCodecall): boolean => {
    if (entry.jobs > 0) return true;
    for (const hosted of sessions.values()) if (hosted.manifest === hash) return true;
    return false;
  };
  const closeCodecall = (hash: string, entry: ManifestCodecall): void => {
    codecalls.delete(hash);
    void entry.codecall.then((codecall) => codecall.close()).catch(() => {});
  };
  // Closes the codecalls idle for too long, then the least recently used idle ones past the bound; never one in use.
  const evictCodecalls = (): void => {
    const now = performance.now();
    for (const [hash, entry] of codecalls) {
      if (now - entry.lastUsed >= idleCodecallMs && !inUse(hash, entry)) closeCodecall(hash, entry);
    }
    if (codecalls.size <= maxCodecalls) return;
    const idle = [...codecalls].filter(([hash, entry]) => !inUse(hash, entry));
    idle.sort(([, first], [, second]) => first.lastUsed - second.lastUsed);
    for (const [hash, entry] of idle.slice(0, codecalls.size - maxCodecalls)) closeCodecall(hash, entry);
  };

  /** The codecall of a tool manifest, counted as used by one more job until {@link release}. */
  const acquire = (hash: string): ManifestCodecall => {
    let entry = codecalls.get(hash);
    if (entry === undefined) {
      const made = command.get(keys.manifest(hash)).then((json) => {
        if (json === null) {
          throw new CodecallError('INVALID_CONFIG', `tool manifest ${hash} is not in Redis (expired or never sent)`);
        }
        const manifest = JSON.parse(json) as ToolManifest;
        return createLocalCodecall(
          {
            ...options.codecall,
            tools: forwardingTools(manifest, forward),
            moduleName: manifest.moduleName,
            limits: manifest.limits,
            redactSecrets: manifest.redactSecrets,
            // The workspace is the agent's: its file tools run there, and the script here sees none of it.
            workspaceMount: 'none',
          },
          { toolSources: forwardingSources(manifest, forward) },
        );
      });
      const created: ManifestCodecall = { codecall: made, jobs: 0, lastUsed: performance.now() };
      made.catch(() => {
        if (codecalls.get(hash) === created) codecalls.delete(hash);
      });
      codecalls.set(hash, created);
      entry = created;
    }
    entry.jobs += 1;
    entry.lastUsed = performance.now();
    evictCodecalls();
    return entry;
  };
  const release = (entry: ManifestCodecall): void => {
    entry.jobs -= 1;
    entry.lastUsed = performance.now();
    evictCodecalls();
  };

  const run = async (job: ActiveJob, data: FleetJobData, codecall: Codecall): Promise<ExecuteResult | undefined> => {
    let forwarded = 0;
    const agentMailbox = keys.agentMailbox(data.agent);
    const onEvent = (event: RunEvent) => {
      if (event.type === 'run-start') {
        byEngineRun.set(event.runId, job);
        job.engineRuns.add(event.runId);
      }
      // The agent makes its own artifact and run-end events from the result (artifacts are written there).
      if (!data.events || event.type === 'run-end' || event.type === 'artifact') return;
      if (forwarded >= MAX_FORWARDED_EVENTS) return;
      forwarded += 1;
      void sendMail(command, agentMailbox, JSON.stringify({ type: 'event', job: job.id, worker: id, event })).catch(
        () => {},
      );
    };
    const signal = job.controller.signal;
    if (data.kind === 'run') {
      return codecall.execute(data.code ?? '', { signal, onEvent, limits: data.limits });
    }
    const sessionId = data.session?.id ?? '';
    let hosted = sessions.get(sessionId);
    if (data.kind === 'session-close') {
      sessions.delete(sessionId);
      await hosted?.session.close();
      evictCodecalls();
      return undefined;
    }
    if (data.kind === 'session-reset') {
      await hosted?.session.reset();
      return undefined;
    }
    if (hosted === undefined) {
      hosted = {
        session: codecall.session({ limits: data.session?.limits, idleTimeoutMs: data.session?.idleTimeoutMs }),
        agent: data.agent,
        manifest: data.manifest,
      };
      sessions.set(sessionId, hosted);
    }
    return hosted.session.execute(data.code ?? '', { signal, onEvent, limits: data.limits });
  };

  const processJob = async (bullJob: Job): Promise<WorkerReply> => {
    const data = bullJob.data as FleetJobData;
    const jobId = bullJob.id ?? '';
    const [cancelled, agentAlive] = await Promise.all([
      command.exists(keys.cancelled(jobId)),
      command.exists(keys.agentAlive(data.agent)),
    ]);
    if (cancelled > 0 || agentAlive === 0) return { worker: id, aborted: true };
    const job: ActiveJob = { id: jobId, agent: data.agent, controller: new AbortController(), engineRuns: new Set() };
    jobs.set(jobId, job);
    const entry = acquire(data.manifest);
    let reply: WorkerReply;
    try {
      const codecall = await entry.codecall;
      const isolation = await codecall.isolation();
      const started = { type: 'started', job: jobId, worker: id, isolation };
      await sendMail(command, keys.agentMailbox(data.agent), JSON.stringify(started));
      const result = await run(job, data, codecall);
      reply = result === undefined ? { worker: id } : await replyWithFiles(result, { worker: id });
    } catch (error) {
      if (error instanceof CodecallAbortError) {
        reply =
          error.result === undefined
            ? { worker: id, aborted: true }
            : await replyWithFiles(error.result, { worker: id, aborted: true });
      } else {
        const code = error instanceof CodecallError ? error.code : 'SPAWN_FAILED';
        reply = { worker: id, error: { code, message: errorMessage(error) } };
      }
    } finally {
      release(entry);
      jobs.delete(jobId);
      for (const engineRun of job.engineRuns) if (byEngineRun.get(engineRun) === job) byEngineRun.delete(engineRun);
    }
    await sendMail(command, keys.agentMailbox(data.agent), JSON.stringify({ type: 'result', job: jobId, reply })).catch(
      () => {},
    );
    return withoutFileData(reply);
  };

  const workerOptions = {
    concurrency,
    // A job whose worker died is failed by the stalled check, never handed to another worker: the agent decides
    // whether it may run again (only when it made no tool call).
    maxStalledCount: 0,
    lockDuration: WORKER_LOCK_MS,
    stalledInterval: WORKER_LOCK_MS,
    removeOnComplete: { age: FINISHED_JOB_RETENTION_SECONDS },
    removeOnFail: { age: FINISHED_JOB_RETENTION_SECONDS },
  };
  const bullConnections: Redis[] = [];
  const bullWorker = (name: string): Worker => {
    const connection = connect();
    bullConnections.push(connection);
    const worker = new bullmq.Worker(name, processJob, { ...workerOptions, connection });
    worker.on('error', () => {});
    return worker;
  };
  const workers = [bullWorker(keys.queue), bullWorker(keys.workerQueue(id))];

  // Renews this worker's liveness; stops the runs and sessions of agents that are gone (missed twice in a row).
  const missedAgents = new Map<string, number>();
  let beating = false;
  const heartbeat = setInterval(() => {
    if (beating) return;
    beating = true;
    evictCodecalls();
    void (async () => {
      await command.set(keys.workerAlive(id), '1', 'PX', HEARTBEAT_TTL_MS);
      const agents = new Set([...jobs.values()].map((job) => job.agent));
      for (const hosted of sessions.values()) agents.add(hosted.agent);
      for (const agent of agents) {
        if ((await command.exists(keys.agentAlive(agent))) > 0) {
          missedAgents.delete(agent);
          continue;
        }
        const missed = (missedAgents.get(agent) ?? 0) + 1;
        missedAgents.set(agent, missed);
        if (missed < 2) continue;
        missedAgents.delete(agent);
        for (const job of jobs.values()) if (job.agent === agent) job.controller.abort(new Error('the agent is gone'));
        for (const [sessionId, hosted] of sessions) {
          if (hosted.agent !== agent) continue;
          sessions.delete(sessionId);
          void hosted.session.close().catch(() => {});
        }
      }
    })()
      .catch(() => {})
      .finally(() => {
        beating = false;
      });
  }, HEARTBEAT_INTERVAL_MS);
  heartbeat.unref();

  let closing: Promise<void> | undefined;
  return {
    id,
    get codecalls() {
      return codecalls.size;
    },
    close() {
      closing ??= (async () => {
        await Promise.allSettled(workers.map((worker) => worker.close()));
        clearInterval(heartbeat);
        await Promise.allSettled([...sessions.values()].map((hosted) => hosted.session.close()));
        sessions.clear();
        const made = await Promise.allSettled([...codecalls.values()].map((entry) => entry.codecall));
        codecalls.clear();
        await Promise.allSettled(made.map((entry) => (entry.status === 'fulfilled' ? entry.value.close() : undefined)));
        await command.del(keys.workerAlive(id)).catch(() => {});
        await mailbox.close();
        for (const connection of [command, ...bullConnections]) connection.disconnect();
      })();
      return closing;
    },
  };
}
