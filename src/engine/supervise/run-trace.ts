import type { RunTrace, TraceCallStatus, TracedCall } from '../../core/result.js';
import { ChannelErrorCode } from '../../rpc/protocol.js';
import type { ToolCallEnded } from '../../rpc/tool-call-server.js';

/** Calls a result's trace lists at most; later ones are only counted (`droppedCalls`). */
export const MAX_TRACED_CALLS = 1_000;

function statusOf(call: ToolCallEnded): TraceCallStatus {
  if (call.error === undefined) return 'ok';
  if (call.denied) return 'denied';
  if (call.errorCode === ChannelErrorCode.toolCallTimeout) return 'timeout';
  if (call.errorCode === ChannelErrorCode.runEnded) return 'cut_off';
  return 'error';
}

/** Rounds milliseconds to hundredths: the trace stays compact in JSON. */
function rounded(milliseconds: number): number {
  return Math.round(milliseconds * 100) / 100;
}

/**
 * The compact timeline of one run or cell, always kept: each tool call's start and end (ms from the start of the
 * supervision), tool, status and result bytes, in the order the calls ended. Costs one small object per call.
 */
export class RunTraceRecorder {
  /** `performance.now()` when the run or cell started. */
  readonly origin: number;
  readonly #calls: TracedCall[] = [];
  #dropped = 0;

  constructor(origin: number) {
    this.origin = origin;
  }

  /** Records a call that ended. */
  add(call: ToolCallEnded): void {
    if (this.#calls.length >= MAX_TRACED_CALLS) {
      this.#dropped += 1;
      return;
    }
    const status = statusOf(call);
    this.#calls.push({
      id: call.id,
      tool: call.tool,
      startMs: rounded(call.startedAt - this.origin),
      endMs: rounded(call.endedAt - this.origin),
      status,
      bytes: call.resultBytes,
      ...(status === 'ok' || call.error === undefined ? {} : { error: call.error }),
    });
  }

  /** The timeline; none when no call started. */
  finish(): RunTrace | undefined {
    if (this.#calls.length === 0) return undefined;
    return this.#dropped === 0 ? { calls: this.#calls } : { calls: this.#calls, droppedCalls: this.#dropped };
  }
}
