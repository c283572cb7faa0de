/**
 * `codecall/ai-sdk`: `execute_code` as an AI SDK tool (`ai` v6, an optional peer dependency). Its `execute` runs the
 * model's script in the conversation's session, and its `toModelOutput` gives the model the result's text and the
 * images the script saved. Loaded only by those who import it.
 */

import { jsonSchema, type Tool } from 'ai';
import type { ExecuteCodeInput } from '../codegen/execute-code-description.js';
import type { ExecuteResult } from '../core/result.js';
import {
  type ConversationExecuteOptions,
  ConversationSessions,
  type ConversationSessionsOptions,
} from './conversation-sessions.js';
import { type AdapterHost, adapterToolDefinition, parseExecuteCodeInput } from './execute-code-tool.js';
import { toModelContent } from './model-content.js';

export * from './shared-exports.js';

/** The AI SDK's own type of what `toModelOutput` returns (a tool result as the model sees it). */
export type AiSdkToolOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;

/** `execute_code` as an AI SDK tool: input `{ code }`, output the run's {@link ExecuteResult}. */
export type ExecuteCodeAiSdkTool = Tool<ExecuteCodeInput, ExecuteResult>;

/**
 * Options of one tool: the conversation its calls run in, and cell options for every call (`timeoutMs`, `limits`,
 * `signal`). The AI SDK's own abort signal (`generateText({ abortSignal })`) aborts a call too.
 */
export type AiSdkToolOptions = ConversationExecuteOptions;

/** The AI SDK adapter of one codecall: tools bound to conversations, and the sessions behind them. */
export interface AiSdkAdapter {
  /** One session per conversation; `execute` and `closeConversation` can be used directly. */
  readonly sessions: ConversationSessions;
  /** `execute_code` as an AI SDK tool whose calls run in the conversation `options.conversationId` names. */
  tool(options?: AiSdkToolOptions): Promise<ExecuteCodeAiSdkTool>;
  /** The tool set `{ execute_code: tool }` to pass as `generateText({ tools })`. */
  tools(options?: AiSdkToolOptions): Promise<{ execute_code: ExecuteCodeAiSdkTool }>;
  /** Closes every conversation's session; the codecall stays open. */
  close(): Promise<void>;
}

/**
 * Creates the AI SDK adapter of a codecall.
 *
 * ```ts
 * const adapter = createAiSdkAdapter(codecall);
 * const { text } = await generateText({ model, prompt, stopWhen: stepCountIs(5),
 *   tools: await adapter.tools({ conversationId: chatId }) });
 * ```
 * @throws CodecallError `INVALID_CONFIG` for a bad option.
 */
export function createAiSdkAdapter(codecall: AdapterHost, options: ConversationSessionsOptions = {}): AiSdkAdapter {
  const sessions = new ConversationSessions(codecall, options);
  const adapter: AiSdkAdapter = {
    sessions,
    async tool(toolOptions = {}) {
      const definition = await adapterToolDefinition(codecall);
      return {
        description: definition.description,
        inputSchema: jsonSchema<ExecuteCodeInput>(definition.inputSchema, {
          validate: (value) => {
            const parsed = parseExecuteCodeInput(definition.name, value);
            return typeof parsed === 'string'
              ? { success: false, error: new TypeError(parsed) }
              : { success: true, value: parsed };
          },
        }),
        execute: (input, { abortSignal }) =>
          sessions.execute(input.code, { ...toolOptions, signal: combineSignals(toolOptions.signal, abortSignal) }),
        toModelOutput: ({ output }) => toAiSdkToolOutput(output),
      };
    },
    async tools(toolOptions = {}) {
      return { execute_code: await adapter.tool(toolOptions) };
    },
    close: () => sessions.close(),
  };
  return adapter;
}

/**
 * Renders a result as AI SDK tool output: `content` with the model-facing text, then each image artifact as
 * `image-data` (base64 and its media type).
 */
export async function toAiSdkToolOutput(result: ExecuteResult): Promise<AiSdkToolOutput> {
  const content = await toModelContent(result);
  return {
    type: 'content',
    value: [
      { type: 'text', text: content.text },
      ...content.images.map((image) => ({
        type: 'image-data' as const,
        data: image.base64,
        mediaType: image.mediaType,
      })),
    ],
  };
}

function combineSignals(first: AbortSignal | undefined, second: AbortSignal | undefined): AbortSignal | undefined {
  if (first === undefined) return second;
  if (second === undefined) return first;
  return AbortSignal.any([first, second]);
}
