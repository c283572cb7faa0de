/**
 * `codecall/openai`: `execute_code` for the OpenAI SDK (`openai` v6, an optional peer dependency), for both the Chat
 * Completions and the Responses API: the function-tool definitions, and handlers that run a tool call in the
 * conversation's session and build the messages that carry its result back. Only the SDK's types are imported, so a
 * version of the SDK whose types no longer fit fails type-checking here.
 */

import type {
  ChatCompletionContentPart,
  ChatCompletionFunctionTool,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionToolMessageParam,
  ChatCompletionUserMessageParam,
} from 'openai/resources/chat/completions';
import type {
  FunctionTool,
  ResponseFunctionCallOutputItem,
  ResponseFunctionToolCall,
  ResponseInputItem,
  ResponseOutputItem,
} from 'openai/resources/responses/responses';
import { EXECUTE_CODE_TOOL_NAME } from '../codegen/execute-code-description.js';
import { CodecallError } from '../core/errors.js';
import type { ExecuteResult } from '../core/result.js';
import type { ModelImage } from './artifact-images.js';
import {
  type ConversationExecuteOptions,
  ConversationSessions,
  type ConversationSessionsOptions,
} from './conversation-sessions.js';
import { type AdapterHost, adapterToolDefinition, parseExecuteCodeArgumentsJson } from './execute-code-tool.js';
import { type ModelContent, toModelContent } from './model-content.js';

export * from './shared-exports.js';

/**
 * The Chat Completions messages of a batch of tool calls. A tool message carries text only, so the images of the
 * calls follow all tool messages in one user message; if you answer other tools' calls too, put your tool messages
 * before `imageMessage` (the API wants every tool message right after the assistant message).
 */
export interface ChatCompletionsToolResults {
  /** One tool message per `execute_code` call, in the order of the calls. */
  readonly toolMessages: ChatCompletionToolMessageParam[];
  /** A user message carrying the images the calls' scripts saved, or undefined when there are none. */
  readonly imageMessage: ChatCompletionUserMessageParam | undefined;
  /** `toolMessages`, then `imageMessage` when there is one: what to append when `execute_code` is your only tool. */
  readonly messages: ChatCompletionMessageParam[];
}

/** The OpenAI adapter of one codecall. */
export interface OpenAIAdapter {
  /** One session per conversation; `execute` and `closeConversation` can be used directly. */
  readonly sessions: ConversationSessions;
  /** `execute_code` as a Chat Completions function tool (strict: the schema has one required string). */
  chatCompletionsTool(): Promise<ChatCompletionFunctionTool>;
  /** `execute_code` as a Responses API function tool (strict). */
  responsesTool(): Promise<FunctionTool>;
  /**
   * Runs every `execute_code` call among `toolCalls` (others are left to you), one after another in the
   * conversation's session, and returns the tool messages and the message carrying the images.
   * Arguments that are not `{"code": string}` answer the model with what is wrong; host failures reject.
   */
  handleChatCompletionsToolCalls(
    toolCalls: readonly ChatCompletionMessageToolCall[],
    options?: ConversationExecuteOptions,
  ): Promise<ChatCompletionsToolResults>;
  /**
   * Runs every `execute_code` function call among `items` (a response's `output`; others are left to you), one after
   * another in the conversation's session, and returns one `function_call_output` item per call.
   */
  handleResponsesOutput(
    items: readonly (ResponseOutputItem | ResponseInputItem)[],
    options?: ConversationExecuteOptions,
  ): Promise<ResponseInputItem.FunctionCallOutput[]>;
  /**
   * Runs one Responses API function call of `execute_code` and returns its `function_call_output` item: a string when
   * the script saved no image, else the text followed by `input_image` items.
   * @throws CodecallError `INVALID_CONFIG` when the call is not one of `execute_code`.
   */
  handleResponsesFunctionCall(
    call: ResponseFunctionToolCall,
    options?: ConversationExecuteOptions,
  ): Promise<ResponseInputItem.FunctionCallOutput>;
  /** Closes every conversation's session; the codecall stays open. */
  close(): Promise<void>;
}

/**
 * Creates the OpenAI adapter of a codecall.
 * @throws CodecallError `INVALID_CONFIG` for a bad option.
 */
export function createOpenAIAdapter(codecall: AdapterHost, options: ConversationSessionsOptions = {}): OpenAIAdapter {
  const sessions = new ConversationSessions(codecall, options);
  /** The call's result rendered for the model, or the sentence telling the model what was wrong with its arguments. */
  const run = async (argumentsJson: string, runOptions: ConversationExecuteOptions): Promise<ModelContent> => {
    const input = parseExecuteCodeArgumentsJson(EXECUTE_CODE_TOOL_NAME, argumentsJson);
    if (typeof input === 'string') return { text: input, images: [], isError: true };
    return toModelContent(await sessions.execute(input.code, runOptions));
  };
  const adapter: OpenAIAdapter = {
    sessions,
    async chatCompletionsTool() {
      const definition = await adapterToolDefinition(codecall);
      return {
        type: 'function',
        function: {
          name: definition.name,
          description: definition.description,
          parameters: { ...definition.inputSchema },
          strict: true,
        },
      };
    },
    async responsesTool() {
      const definition = await adapterToolDefinition(codecall);
      return {
        type: 'function',
        name: definition.name,
        description: definition.description,
        parameters: { ...definition.inputSchema },
        strict: true,
      };
    },
    async handleChatCompletionsToolCalls(toolCalls, runOptions = {}) {
      const toolMessages: ChatCompletionToolMessageParam[] = [];
      const imageParts: ChatCompletionContentPart[] = [];
      for (const toolCall of toolCalls) {
        if (!isExecuteCodeChatCall(toolCall)) continue;
        const content = await run(toolCall.function.arguments, runOptions);
        toolMessages.push({ role: 'tool', tool_call_id: toolCall.id, content: content.text });
        imageParts.push(...chatCompletionsImageParts(toolCall.id, content.images));
      }
      const imageMessage: ChatCompletionUserMessageParam | undefined =
        imageParts.length > 0 ? { role: 'user', content: imageParts } : undefined;
      return {
        toolMessages,
        imageMessage,
        messages: imageMessage === undefined ? [...toolMessages] : [...toolMessages, imageMessage],
      };
    },
    async handleResponsesOutput(items, runOptions = {}) {
      const outputs: ResponseInputItem.FunctionCallOutput[] = [];
      for (const item of items) {
        if (item.type !== 'function_call' || !isExecuteCodeResponsesCall(item)) continue;
        outputs.push(await adapter.handleResponsesFunctionCall(item, runOptions));
      }
      return outputs;
    },
    async handleResponsesFunctionCall(call, runOptions = {}) {
      if (!isExecuteCodeResponsesCall(call)) {
        throw new CodecallError(
          'INVALID_CONFIG',
          `handleResponsesFunctionCall takes calls of ${EXECUTE_CODE_TOOL_NAME}, got a call of ${JSON.stringify(call.name)}`,
          { name: call.name },
        );
      }
      return responsesFunctionCallOutput(call.call_id, await run(call.arguments, runOptions));
    },
    close: () => sessions.close(),
  };
  return adapter;
}

/** A result as the Chat Completions messages of one tool call (tool message, then the images' user message). */
export async function toChatCompletionsMessages(
  toolCallId: string,
  result: ExecuteResult,
): Promise<ChatCompletionMessageParam[]> {
  const content = await toModelContent(result);
  const toolMessage: ChatCompletionToolMessageParam = { role: 'tool', tool_call_id: toolCallId, content: content.text };
  if (content.images.length === 0) return [toolMessage];
  return [toolMessage, { role: 'user', content: chatCompletionsImageParts(toolCallId, content.images) }];
}

/**
 * A result as the Responses API `function_call_output` item of a call: the text alone as a string, or the text
 * followed by each image as an `input_image` with a base64 data URL.
 */
export async function toResponsesFunctionCallOutput(
  callId: string,
  result: ExecuteResult,
): Promise<ResponseInputItem.FunctionCallOutput> {
  return responsesFunctionCallOutput(callId, await toModelContent(result));
}

function responsesFunctionCallOutput(callId: string, content: ModelContent): ResponseInputItem.FunctionCallOutput {
  if (content.images.length === 0) return { type: 'function_call_output', call_id: callId, output: content.text };
  const output: ResponseFunctionCallOutputItem[] = [
    { type: 'input_text', text: content.text },
    ...content.images.map(
      (image): ResponseFunctionCallOutputItem => ({ type: 'input_image', image_url: dataUrl(image) }),
    ),
  ];
  return { type: 'function_call_output', call_id: callId, output };
}

/** The images of one call as user-message parts: a line naming the call, then each image as a data URL. */
function chatCompletionsImageParts(toolCallId: string, images: readonly ModelImage[]): ChatCompletionContentPart[] {
  if (images.length === 0) return [];
  return [
    { type: 'text', text: `Images saved by the ${EXECUTE_CODE_TOOL_NAME} call ${toolCallId}:` },
    ...images.map((image): ChatCompletionContentPart => ({ type: 'image_url', image_url: { url: dataUrl(image) } })),
  ];
}

function dataUrl(image: ModelImage): string {
  return `data:${image.mediaType};base64,${image.base64}`;
}

function isExecuteCodeChatCall(
  toolCall: ChatCompletionMessageToolCall,
): toolCall is ChatCompletionMessageFunctionToolCall {
  return toolCall.type === 'function' && toolCall.function.name === EXECUTE_CODE_TOOL_NAME;
}

function isExecuteCodeResponsesCall(call: ResponseFunctionToolCall): boolean {
  return call.name === EXECUTE_CODE_TOOL_NAME && (call.namespace === undefined || call.namespace === null);
}
