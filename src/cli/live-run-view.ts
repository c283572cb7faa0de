import type { Writable } from 'node:stream';
import type { RunEvent, RunEventListener } from '../engine/supervise/run-events.js';
import { terminalText } from './terminal-output.js';

/** How often a long run's progress line is written. */
export const PROGRESS_INTERVAL_MS = 5_000;
/** Characters of a call's arguments shown on its line. */
export const MAX_SHOWN_ARGUMENT_CHARACTERS = 80;

/** Options of {@link liveRunView}. */
export interface LiveRunViewOptions {
  /** The command's standard output: the view is shown only when it is a terminal. */
  readonly stdout: Writable;
  /** Where the view is written (the result itself still goes to `stdout`). */
  readonly stderr: Writable;
}

/** Whether a stream is a terminal (`isTTY` on a TTY stream; absent on pipes, files and test streams). */
export function isTerminal(stream: Writable): boolean {
  return (stream as Writable & { readonly isTTY?: boolean }).isTTY === true;
}

/** A call's arguments in one short line: JSON, cut to {@link MAX_SHOWN_ARGUMENT_CHARACTERS}, safe for a terminal. */
function shownArguments(value: unknown): string {
  let json: string;
  try {
    json = JSON.stringify(value) ?? '';
  } catch {
    json = '';
  }
  const cut = json.length > MAX_SHOWN_ARGUMENT_CHARACTERS ? `${json.slice(0, MAX_SHOWN_ARGUMENT_CHARACTERS)}…` : json;
  return terminalText(cut).replace(/\n/g, ' ');
}

/**
 * `codecall run`'s live view: on a terminal, each tool call as it starts and ends, what the script prints as it
 * prints it, and every {@link PROGRESS_INTERVAL_MS} a progress line; nothing when the output is piped (the result
 * alone is written then). Returns the listener to pass as `onEvent`, or undefined when there is nothing to show.
 */
export function liveRunView(options: LiveRunViewOptions): RunEventListener | undefined {
  if (!isTerminal(options.stdout)) return undefined;
  const out = options.stderr;
  let startedAt = 0;
  let calls = 0;
  let inFlight = 0;
  let progressTimer: NodeJS.Timeout | undefined;
  return (event: RunEvent) => {
    switch (event.type) {
      case 'run-start':
        startedAt = performance.now();
        progressTimer = setInterval(() => {
          const seconds = Math.round((performance.now() - startedAt) / 1000);
          out.write(`… running ${seconds} s: ${calls} tool calls, ${inFlight} in flight\n`);
        }, PROGRESS_INTERVAL_MS);
        progressTimer.unref();
        return;
      case 'tool-call-start':
        calls += 1;
        inFlight += 1;
        out.write(`→ ${terminalText(event.tool)}(${shownArguments(event.arguments)})\n`);
        return;
      case 'tool-call-end': {
        inFlight -= 1;
        const duration = `${Math.round(event.durationMs)} ms`;
        out.write(
          event.error === undefined
            ? `← ${terminalText(event.tool)} ${duration}\n`
            : `✗ ${terminalText(event.tool)} ${duration}: ${terminalText(event.error).replace(/\n/g, ' ')}\n`,
        );
        return;
      }
      case 'stdout':
      case 'stderr':
        // Already cleaned like the result.
        out.write(event.text);
        return;
      case 'artifact':
        out.write(`▣ ${terminalText(event.artifact.path)} (${event.artifact.bytes} bytes)\n`);
        return;
      case 'run-end':
        clearInterval(progressTimer);
        out.write(`── ${event.result.status} after ${Math.round(event.result.durationMs)} ms ──\n`);
        return;
    }
  };
}
