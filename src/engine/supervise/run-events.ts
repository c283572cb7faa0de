import type { Artifact, ExecuteResult } from '../../core/result.js';
import { cleanScriptText } from '../../core/script-text.js';
import type { ToolCallEnded, ToolCallStarted } from '../../rpc/tool-call-server.js';

/** Output kept back waiting for its line's end before it is sent anyway (a script printing without newlines). */
export const MAX_PENDING_OUTPUT_CHARACTERS = 16 * 1024;

/** A run (or session cell) began: its interpreter has the code. */
export interface RunStartEvent {
  readonly type: 'run-start';
  /** Id of the run (of the session's interpreter for a cell). */
  readonly runId: string;
  /** Sessions: the cell's number in its interpreter (from 1). */
  readonly cell?: number | undefined;
}

/** The script called a tool (the call left the queue and is being checked, approved and run). */
export interface ToolCallStartEvent {
  readonly type: 'tool-call-start';
  /** The call's id, unique among the run's calls in flight; its `tool-call-end` has the same. */
  readonly callId: number;
  readonly tool: string;
  /** The arguments as the script sent them: untrusted values (sanitise before showing them on a terminal). */
  readonly arguments: unknown;
}

/** A tool call ended: its reply went back to the script, or the run ended under it. */
export interface ToolCallEndEvent {
  readonly type: 'tool-call-end';
  readonly callId: number;
  readonly tool: string;
  /** Milliseconds from its start to its end (approval waits included). */
  readonly durationMs: number;
  /** The error the script got as a ToolError; none on success. */
  readonly error?: string | undefined;
  /** Approval denied the call. */
  readonly denied?: boolean | undefined;
}

/** What the script printed: whole lines (or long runs without a newline), sanitised and redacted like the result. */
export type OutputEvent =
  | { readonly type: 'stdout'; readonly text: string }
  | { readonly type: 'stderr'; readonly text: string };

/** A file the run left, moved to where the result names it. */
export interface ArtifactEvent {
  readonly type: 'artifact';
  readonly artifact: Artifact;
}

/** The run ended with this result (also an aborted run: the result its AbortError carries). */
export interface RunEndEvent {
  readonly type: 'run-end';
  readonly result: ExecuteResult;
}

/** What `onEvent` receives while a run or cell goes on, in the order it happens. */
export type RunEvent =
  | RunStartEvent
  | ToolCallStartEvent
  | ToolCallEndEvent
  | OutputEvent
  | ArtifactEvent
  | RunEndEvent;

/**
 * The `onEvent` option of `execute` and `session.execute`: called synchronously as things happen. What it throws
 * or rejects with is ignored, and the run goes on; slow work belongs in a queue of its own.
 */
export type RunEventListener = (event: RunEvent) => unknown;

/** One output stream's text waiting for its line to end. */
class PendingOutput {
  readonly #decoder = new TextDecoder('utf-8', { fatal: false });
  #text = '';

  /** Adds a chunk; returns what is ready to send (whole lines), or an empty string. */
  push(chunk: Buffer): string {
    this.#text += this.#decoder.decode(chunk, { stream: true });
    const lineEnd = this.#text.lastIndexOf('\n');
    if (lineEnd < 0 && this.#text.length < MAX_PENDING_OUTPUT_CHARACTERS) return '';
    const cut = lineEnd < 0 ? this.#text.length : lineEnd + 1;
    const ready = this.#text.slice(0, cut);
    this.#text = this.#text.slice(cut);
    return ready;
  }

  /** Everything left, the stream being over. */
  flush(): string {
    const rest = this.#text + this.#decoder.decode();
    this.#text = '';
    return rest;
  }
}

/** Options of {@link RunEvents}. */
export interface RunEventsOptions {
  readonly listener: RunEventListener;
  /** Mask secret-shaped tokens in output events, as in the result. */
  readonly redactSecrets: boolean;
}

/**
 * Sends one run's (or cell's) events to its listener, shielding the run from the listener: a throw or a rejected
 * promise is dropped. Output goes out in whole lines so each is sanitised and redacted like the result's text.
 */
export class RunEvents {
  readonly #listener: RunEventListener;
  readonly #redactSecrets: boolean;
  readonly #stdout = new PendingOutput();
  readonly #stderr = new PendingOutput();

  constructor(options: RunEventsOptions) {
    this.#listener = options.listener;
    this.#redactSecrets = options.redactSecrets;
  }

  /** Calls the listener; nothing it does can reach the run. */
  emit(event: RunEvent): void {
    try {
      const returned = this.#listener(event);
      if (typeof (returned as Promise<unknown> | undefined)?.then === 'function') {
        (returned as Promise<unknown>).then(undefined, ignoreListenerFailure);
      }
    } catch {
      // The listener's own failure is its business; the run goes on.
    }
  }

  /** A chunk of the script's stdout or stderr. */
  output(type: 'stdout' | 'stderr', chunk: Buffer): void {
    const text = (type === 'stdout' ? this.#stdout : this.#stderr).push(chunk);
    if (text.length > 0) this.#emitOutput(type, text);
  }

  /** The output streams are over: what is left of them goes out. */
  flushOutput(): void {
    const stdout = this.#stdout.flush();
    if (stdout.length > 0) this.#emitOutput('stdout', stdout);
    const stderr = this.#stderr.flush();
    if (stderr.length > 0) this.#emitOutput('stderr', stderr);
  }

  toolCallStart(call: ToolCallStarted): void {
    this.emit({ type: 'tool-call-start', callId: call.id, tool: call.tool, arguments: call.arguments });
  }

  toolCallEnd(call: ToolCallEnded): void {
    this.emit({
      type: 'tool-call-end',
      callId: call.id,
      tool: call.tool,
      durationMs: call.endedAt - call.startedAt,
      error: call.error,
      denied: call.denied ? true : undefined,
    });
  }

  /** The run's end: one `artifact` event per artifact, then `run-end`. */
  end(result: ExecuteResult): void {
    for (const artifact of result.artifacts ?? []) this.emit({ type: 'artifact', artifact });
    this.emit({ type: 'run-end', result });
  }

  #emitOutput(type: 'stdout' | 'stderr', text: string): void {
    this.emit({ type, text: cleanScriptText(text, { redactSecrets: this.#redactSecrets }) });
  }
}

function ignoreListenerFailure(): void {}

/** The events of a run whose caller passed `onEvent`; none otherwise (the run then pays nothing for them). */
export function runEventsFor(
  listener: RunEventListener | undefined,
  options: { readonly redactSecrets?: boolean | undefined },
): RunEvents | undefined {
  return listener === undefined ? undefined : new RunEvents({ listener, redactSecrets: options.redactSecrets ?? true });
}
