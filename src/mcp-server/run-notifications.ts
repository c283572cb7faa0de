import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { LoggingLevel, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import { LoggingLevelSchema, SetLevelRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { RunEvent, RunEventListener } from '../engine/supervise/run-events.js';
import type { ApproveToolCall } from '../tools/tool-approval.js';

/** Logger name of codecall's `notifications/message`. */
export const LOGGER_NAME = 'codecall';
/** Characters of a call's arguments shown in an approval question. */
export const MAX_QUESTION_ARGUMENT_CHARACTERS = 500;

const LEVELS = LoggingLevelSchema.options;

/** Sends a notification related to the request being served (so it travels on that request's stream). */
type SendNotification = (notification: ServerNotification) => Promise<void>;

/**
 * The log level a client set with `logging/setLevel`, kept per server (one server per client connection): messages
 * below it are not sent. Replaces the SDK's own handler, whose level cannot be read.
 */
export class ClientLogLevel {
  #level: LoggingLevel | undefined;

  constructor(server: Server) {
    server.setRequestHandler(SetLevelRequestSchema, async (request) => {
      this.#level = request.params.level;
      return {};
    });
  }

  /** Whether a message at `level` goes out. */
  allows(level: LoggingLevel): boolean {
    return this.#level === undefined || LEVELS.indexOf(level) >= LEVELS.indexOf(this.#level);
  }
}

/** Options of {@link mcpRunListener}. */
export interface McpRunListenerOptions {
  /** The client's `_meta.progressToken` of the call; no progress notifications without one. */
  readonly progressToken: string | number | undefined;
  readonly sendNotification: SendNotification;
  readonly logLevel: ClientLogLevel;
}

/**
 * What a client of `serve` sees of a running `execute_code`: `notifications/progress` (when it passed a progress
 * token) as the run starts and each tool call ends, and `notifications/message` log messages for tool calls
 * (`debug` at the start, `info` at the end, `warning` when it failed). A failure to send is ignored.
 */
export function mcpRunListener(options: McpRunListenerOptions): RunEventListener {
  const { progressToken, sendNotification, logLevel } = options;
  let progress = 0;
  const send = (notification: ServerNotification): void => {
    sendNotification(notification).catch(() => {});
  };
  const report = (message: string): void => {
    if (progressToken === undefined) return;
    progress += 1;
    send({ method: 'notifications/progress', params: { progressToken, progress, message } });
  };
  const log = (level: LoggingLevel, data: Record<string, unknown>): void => {
    if (logLevel.allows(level)) send({ method: 'notifications/message', params: { level, logger: LOGGER_NAME, data } });
  };
  return (event: RunEvent) => {
    switch (event.type) {
      case 'run-start':
        report('the script is running');
        return;
      case 'tool-call-start':
        log('debug', { event: event.type, callId: event.callId, tool: event.tool });
        return;
      case 'tool-call-end': {
        const duration = Math.round(event.durationMs);
        log(event.error === undefined ? 'info' : 'warning', {
          event: event.type,
          callId: event.callId,
          tool: event.tool,
          durationMs: duration,
          ...(event.error === undefined ? {} : { error: event.error }),
        });
        report(`${event.tool} ${event.error === undefined ? 'returned' : 'failed'} after ${duration} ms`);
        return;
      }
      default:
        return;
    }
  };
}

/** Whether the client of `server` can answer elicitation forms. */
export function clientSupportsElicitation(server: Server): boolean {
  return server.getClientCapabilities()?.elicitation?.form !== undefined;
}

/**
 * An approval hook that asks the person at the client through elicitation (`elicitation/create`): a form with one
 * yes/no field. Accepting with yes allows the call; declining, cancelling, or a failure of the request denies it.
 */
export function elicitationApprover(server: Server, relatedRequestId: string | number): ApproveToolCall {
  return async ({ tool, arguments: args, signal }) => {
    let shown = JSON.stringify(args) ?? '{}';
    if (shown.length > MAX_QUESTION_ARGUMENT_CHARACTERS) shown = `${shown.slice(0, MAX_QUESTION_ARGUMENT_CHARACTERS)}…`;
    const answer = await server.elicitInput(
      {
        mode: 'form',
        message: `The script wants to call the tool "${tool}" with ${shown}. Allow this call?`,
        requestedSchema: {
          type: 'object',
          properties: { allow: { type: 'boolean', title: 'Allow this call', default: false } },
          required: ['allow'],
        },
      },
      { signal, relatedRequestId },
    );
    if (answer.action === 'accept') {
      return answer.content?.allow === true ? true : { allow: false, reason: 'the user did not allow it' };
    }
    return {
      allow: false,
      reason: answer.action === 'decline' ? 'the user declined it' : 'the user dismissed the question',
    };
  };
}
