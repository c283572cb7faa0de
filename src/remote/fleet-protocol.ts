import { CodecallError } from '../core/errors.js';
import type { IsolationLevel } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import type { ExecuteResult } from '../core/result.js';
import type { RunEvent } from '../engine/supervise/run-events.js';
import type { SentArtifact, SentFullOutput } from './artifact-transfer.js';

/** Queue name when the `remote` option names none. */
export const DEFAULT_QUEUE_NAME = 'codecall';
/** How often agents and workers renew their liveness key and check the other side's. */
export const HEARTBEAT_INTERVAL_MS = 1_000;
/** A process whose liveness key was not renewed for this long is gone: its runs end (`worker_lost`) or stop. */
export const HEARTBEAT_TTL_MS = 4_000;
/** Messages taken from a mailbox per round trip. */
export const MAILBOX_BATCH = 256;
/** Seconds a mailbox outlives its last message (a dead reader's mail does not stay in Redis for ever). */
export const MAILBOX_TTL_SECONDS = 3_600;
/** Seconds a tool manifest stays in Redis after its last upload (agents renew it while they submit runs). */
export const MANIFEST_TTL_SECONDS = 24 * 3_600;
/** Largest message read from a mailbox; a bigger one is dropped (a tool call's frame is capped far below this). */
export const MAX_MESSAGE_CHARACTERS = 64 * 1024 * 1024;
/** Attempts of a run whose worker was lost before the run made any tool call (the first one included). */
export const MAX_RUN_ATTEMPTS = 2;
/** How long an aborted run waits for its worker's result before it is reported without it. */
export const ABORT_GRACE_MS = 5_000;
/** Seconds finished jobs are kept, so that a resubmitted run id is recognised. */
export const FINISHED_JOB_RETENTION_SECONDS = 3_600;
/** Redis unreachable this long with runs in flight: they end with reason `queue_unavailable`. */
export const REDIS_OUTAGE_LIMIT_MS = 30_000;
/** Heartbeats between checks of the queue state of runs in flight (results whose mail was lost, jobs gone). */
export const RECONCILE_EVERY_BEATS = 3;
/** Events of one run forwarded to the agent; past it output events are dropped (a flood must not fill Redis). */
export const MAX_FORWARDED_EVENTS = 10_000;

const QUEUE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** The `remote` option, checked. */
export interface FleetAddress {
  readonly redis: string;
  readonly queue: string;
}

/**
 * Checks the `remote` option (or the worker's `--redis`/`--queue`).
 * @throws CodecallError `INVALID_CONFIG` naming the bad value.
 */
export function checkFleetAddress(value: unknown): FleetAddress {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CodecallError('INVALID_CONFIG', 'remote must be an object { redis: URL, queue?: name }');
  }
  const { redis, queue, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) {
    throw new CodecallError('INVALID_CONFIG', `remote: unknown key "${unknown[0]}" (known: redis, queue)`, {
      key: unknown[0],
    });
  }
  if (typeof redis !== 'string' || !/^(rediss?|valkeys?):\/\/./.test(redis)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `remote.redis must be a redis:// or rediss:// URL (got ${JSON.stringify(redis)})`,
      { redis },
    );
  }
  if (queue !== undefined && (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue))) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `remote.queue must be 1 to 64 letters, digits, "_", "-" or "." (got ${JSON.stringify(queue)})`,
      { queue },
    );
  }
  return { redis: redis.replace(/^valkey/, 'redis'), queue: queue ?? DEFAULT_QUEUE_NAME };
}

/** Names of the Redis keys and BullMQ queues of one fleet queue (all under `codecall:<queue>:`). */
export class FleetKeys {
  readonly queue: string;
  readonly #prefix: string;

  constructor(queue: string) {
    this.queue = queue;
    this.#prefix = `codecall:${queue}`;
  }

  /** The BullMQ queue a worker takes the cells of the sessions pinned to it from. */
  workerQueue(workerId: string): string {
    return `${this.queue}.worker.${workerId}`;
  }
  /** Set (with an expiry) while the agent lives. */
  agentAlive(agentId: string): string {
    return `${this.#prefix}:alive:agent:${agentId}`;
  }
  /** Set (with an expiry) while the worker lives. */
  workerAlive(workerId: string): string {
    return `${this.#prefix}:alive:worker:${workerId}`;
  }
  agentMailbox(agentId: string): string {
    return `${this.#prefix}:mail:agent:${agentId}`;
  }
  workerMailbox(workerId: string): string {
    return `${this.#prefix}:mail:worker:${workerId}`;
  }
  /** A tool manifest by its hash. */
  manifest(hash: string): string {
    return `${this.#prefix}:manifest:${hash}`;
  }
  /** Claimed (SET NX) by the agent that submits a job id: a second submission of the same id is detected. */
  claim(jobId: string): string {
    return `${this.#prefix}:claim:${jobId}`;
  }
  /** Set when the agent gave up on a job: a worker that takes it later does not run it. */
  cancelled(jobId: string): string {
    return `${this.#prefix}:cancelled:${jobId}`;
  }
}

/** What a job asks a worker to do: a run, a session's cell, or a session's reset or close. */
export type JobKind = 'run' | 'cell' | 'session-reset' | 'session-close';

/** The data of a BullMQ job of the fleet. */
export interface FleetJobData {
  readonly kind: JobKind;
  /** The agent that submitted it (where tool calls and the result go). */
  readonly agent: string;
  /** Hash of the tool manifest (`FleetKeys.manifest`). */
  readonly manifest: string;
  /** Random per submission: a job id already in the queue with another nonce is a resubmitted run. */
  readonly nonce: string;
  readonly code?: string | undefined;
  /** Limits of this run over the manifest's (the `execute` options' `timeoutMs` and `limits`). */
  readonly limits?: Partial<Limits> | undefined;
  readonly session?:
    | {
        readonly id: string;
        readonly limits?: Partial<Limits> | undefined;
        readonly idleTimeoutMs?: number | undefined;
      }
    | undefined;
  /** Whether the agent listens to the run's events (none are sent otherwise). */
  readonly events: boolean;
}

/** What a worker answers a job with. */
export interface WorkerReply {
  readonly worker: string;
  readonly result?: ExecuteResult | undefined;
  /** The result's artifacts, read on the worker: the agent writes them into its own folder and lists them. */
  readonly artifacts?: readonly SentArtifact[] | undefined;
  /** The full stdout file of a truncated output, read on the worker: the agent writes it where a local run would. */
  readonly fullOutput?: SentFullOutput | undefined;
  /** The run was aborted: `result` is the aborted run's result (absent when it never started). */
  readonly aborted?: boolean | undefined;
  /** A host-side failure on the worker (bad manifest, interpreter missing): thrown on the agent as a CodecallError. */
  readonly error?: { readonly code: string; readonly message: string } | undefined;
}

/** Mail to an agent. */
export type AgentMail =
  | { readonly type: 'started'; readonly job: string; readonly worker: string; readonly isolation: IsolationLevel }
  | {
      readonly type: 'tool-call';
      readonly job: string;
      readonly worker: string;
      readonly call: number;
      readonly tool: string;
      readonly arguments: unknown;
    }
  | { readonly type: 'event'; readonly job: string; readonly worker: string; readonly event: RunEvent }
  | { readonly type: 'result'; readonly job: string; readonly reply: WorkerReply };

/** Mail to a worker. */
export type WorkerMail =
  | { readonly type: 'tool-reply'; readonly call: number; readonly ok: true; readonly value: unknown }
  | {
      readonly type: 'tool-reply';
      readonly call: number;
      readonly ok: false;
      readonly message: string;
      /** The agent's approval denied the call (counted as denied, as in a local run, not as failed). */
      readonly denied?: true | undefined;
    }
  | { readonly type: 'abort'; readonly job: string };
