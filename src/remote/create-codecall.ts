import { type Codecall, type CodecallOptions, createLocalCodecall } from '../engine/codecall.js';
import { createRemoteCodecall } from './remote-codecall.js';

/**
 * Creates a codecall. Returns synchronously after checking the configuration; the interpreter, the sandbox and
 * upstream servers are set up on first use. With `remote: { redis, queue? }` runs go to a worker fleet
 * (`codecall worker`) and their tool calls come back here; `bullmq` and `ioredis` are loaded on the first run.
 *
 * Why this lives in the remote layer: the engine may not depend on the fleet, so the root entry's `createCodecall` is
 * this one, a layer above both; it hands local options to the engine untouched and never loads BullMQ for them.
 * @throws CodecallError `INVALID_CONFIG` / `INVALID_TOOL` / `DUPLICATE_TOOL` naming the bad value.
 */
export function createCodecall(options: CodecallOptions = {}): Codecall {
  if (typeof options === 'object' && options !== null && options.remote !== undefined) {
    return createRemoteCodecall(options);
  }
  return createLocalCodecall(options);
}
