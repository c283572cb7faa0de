/**
 * `codecall/remote`: the worker fleet on BullMQ and Redis. `startFleetWorker` is what `codecall worker` runs;
 * `createRemoteCodecall` is what `createCodecall({ remote })` returns, typed with its extra `runId` option.
 */

export type { RemoteFailureReason } from '../core/result.js';
export type { RemoteOptions } from '../engine/codecall-options.js';
export { MAX_SENT_ARTIFACT_BYTES } from './artifact-transfer.js';
export {
  DEFAULT_QUEUE_NAME,
  HEARTBEAT_INTERVAL_MS,
  HEARTBEAT_TTL_MS,
  MAX_RUN_ATTEMPTS,
} from './fleet-protocol.js';
export {
  DEFAULT_WORKER_CONCURRENCY,
  type FleetWorker,
  type FleetWorkerOptions,
  IDLE_CODECALL_MS,
  MAX_WORKER_CODECALLS,
  startFleetWorker,
  type WorkerCodecallOptions,
} from './fleet-worker.js';
export { createRemoteCodecall, type RemoteCodecall, type RemoteExecuteOptions } from './remote-codecall.js';
