import type { Attributes } from '@opentelemetry/api';
import { importModule } from '../../core/module-import.js';
import { codecallVersion } from '../../core/package-version.js';
import type { ExecuteResult } from '../../core/result.js';

type OpenTelemetryApi = typeof import('@opentelemetry/api');

/** Name of the tracer codecall's spans come from. */
export const TRACER_NAME = 'codecall';

let openTelemetry: Promise<OpenTelemetryApi | undefined> | undefined;

/** `@opentelemetry/api` (an optional peer dependency), imported on first use; undefined when it is not installed. */
function loadOpenTelemetry(): Promise<OpenTelemetryApi | undefined> {
  openTelemetry ??= importModule<OpenTelemetryApi>('@opentelemetry/api').then(
    (module) => module,
    () => undefined,
  );
  return openTelemetry;
}

/** Where `@opentelemetry/api` (version 1) keeps what an application registered, tracer provider included. */
const OPEN_TELEMETRY_GLOBAL = Symbol.for('opentelemetry.js.api.1');

/** Whether an application registered a tracer provider with `@opentelemetry/api` (without importing it). */
function tracerProviderRegistered(): boolean {
  const registered: unknown = (globalThis as Record<symbol, unknown>)[OPEN_TELEMETRY_GLOBAL];
  return (
    typeof registered === 'object' && registered !== null && (registered as { trace?: unknown }).trace !== undefined
  );
}

/** Options of {@link recordRunSpans}. */
export interface RunSpansOptions {
  readonly result: ExecuteResult;
  readonly runId: string;
  /** Sessions: the cell's number. */
  readonly cell?: number | undefined;
  /** `performance.now()` when the run started (the origin of the trace's offsets) and when it ended. */
  readonly startedAt: number;
  readonly endedAt: number;
}

function epochMilliseconds(performanceTime: number): number {
  return performance.timeOrigin + performanceTime;
}

/**
 * Records a finished run as OpenTelemetry spans, through whatever tracer provider the application registered: one
 * `codecall.run` span and a child `codecall.tool_call` span per traced call, with their real start and end times.
 * Attributes are the tool, status, durations and sizes — never argument values or error texts (they may quote them).
 * Nothing happens when `@opentelemetry/api` is not installed, and little when no provider is registered.
 */
export async function recordRunSpans(options: RunSpansOptions): Promise<void> {
  // Without a registered tracer provider every span would be a no-op: skip loading the API (tens of milliseconds).
  if (openTelemetry === undefined && !tracerProviderRegistered()) return;
  const api = await loadOpenTelemetry();
  if (api === undefined) return;
  const { result, startedAt } = options;
  const tracer = api.trace.getTracer(TRACER_NAME, codecallVersion());
  const runAttributes: Attributes = {
    'codecall.run_id': options.runId,
    'codecall.status': result.status,
    'codecall.tool_calls': result.toolCalls,
    'codecall.duration_ms': result.durationMs,
    'codecall.stdout_bytes': Buffer.byteLength(result.stdout),
    'codecall.isolation': result.isolation,
  };
  if (options.cell !== undefined) runAttributes['codecall.cell'] = options.cell;
  if (result.reason !== undefined) runAttributes['codecall.reason'] = result.reason;
  if (result.deniedToolCalls !== undefined) runAttributes['codecall.denied_tool_calls'] = result.deniedToolCalls;
  const runSpan = tracer.startSpan('codecall.run', {
    startTime: epochMilliseconds(startedAt),
    attributes: runAttributes,
  });
  if (result.status !== 'success') runSpan.setStatus({ code: api.SpanStatusCode.ERROR, message: result.status });
  const parent = api.trace.setSpan(api.context.active(), runSpan);
  for (const call of result.trace?.calls ?? []) {
    const span = tracer.startSpan(
      'codecall.tool_call',
      {
        startTime: epochMilliseconds(startedAt + call.startMs),
        attributes: {
          'codecall.tool': call.tool,
          'codecall.call_id': call.id,
          'codecall.status': call.status,
          'codecall.duration_ms': Math.round((call.endMs - call.startMs) * 100) / 100,
          'codecall.result_bytes': call.bytes,
        },
      },
      parent,
    );
    if (call.status !== 'ok') span.setStatus({ code: api.SpanStatusCode.ERROR, message: call.status });
    span.end(epochMilliseconds(startedAt + call.endMs));
  }
  runSpan.end(epochMilliseconds(options.endedAt));
}
