/**
 * `codecall/anthropic`: `execute_code` for the Anthropic SDK (`@anthropic-ai/sdk`, an optional peer dependency): the
 * tool definition, and handlers that run a `tool_use` block in the conversation's session and return its
 * `tool_result` block (text and base64 image blocks). Only the SDK's types are imported, so a version of the SDK whose
 * types no longer fit fails type-checking here.
 */

import type {
  ContentBlock,
  ContentBlockParam,
  ImageBlockParam,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
  ToolUseBlock,
  ToolUseBlockParam,
} from '@anthropic-ai/sdk/resources/messages';
import { EXECUTE_CODE_TOOL_NAME } from '../codegen/execute-code-description.js';
import { CodecallError } from '../core/errors.js';
import type { ExecuteResult } from '../core/result.js';
import {
  type ConversationExecuteOptions,
  ConversationSessions,
  type ConversationSessionsOptions,
} from './conversation-sessions.js';
import { type AdapterHost, adapterToolDefinition, parseExecuteCodeInput } from './execute-code-tool.js';
import { type ModelContent, toModelContent } from './model-content.js';

export * from './shared-exports.js';

/** A `tool_use` block as the handlers need it: from a response (`ToolUseBlock`) or from your history (the param). */
export type AnthropicToolUse = Pick<ToolUseBlock | ToolUseBlockParam, 'id' | 'name' | 'input'>;

/** The Anthropic adapter of one codecall. */
export interface AnthropicAdapter {
  /** One session per conversation; `execute` and `closeConversation` can be used directly. */
  readonly sessions: ConversationSessions;
  /** `execute_code` as a Messages API tool definition. */
  tool(): Promise<Tool>;
  /**
   * Runs one `tool_use` block of `execute_code` in the conversation's session and returns its `tool_result` block.
   * Input that is not `{"code": string}` answers the model with what is wrong (`is_error`); host failures reject.
   * @throws CodecallError `INVALID_CONFIG` when the block is a use of another tool.
   */
  handleToolUse(toolUse: AnthropicToolUse, options?: ConversationExecuteOptions): Promise<ToolResultBlockParam>;
  /**
   * Runs every `execute_code` `tool_use` block among `content` (a response's `content`; other tools are left to you),
   * one after another, and returns their `tool_result` blocks in the same order, for the next user message.
   */
  handleToolUses(
    content: readonly (ContentBlock | ContentBlockParam)[],
    options?: ConversationExecuteOptions,
  ): Promise<ToolResultBlockParam[]>;
  /** Closes every conversation's session; the codecall stays open. */
  close(): Promise<void>;
}

/**
 * Creates the Anthropic adapter of a codecall.
 * @throws CodecallError `INVALID_CONFIG` for a bad option.
 */
export function createAnthropicAdapter(
  codecall: AdapterHost,
  options: ConversationSessionsOptions = {},
): AnthropicAdapter {
  const sessions = new ConversationSessions(codecall, options);
  const adapter: AnthropicAdapter = {
    sessions,
    async tool() {
      const definition = await adapterToolDefinition(codecall);
      return {
        name: definition.name,
        description: definition.description,
        input_schema: { ...definition.inputSchema },
      };
    },
    async handleToolUse(toolUse, runOptions = {}) {
      if (toolUse.name !== EXECUTE_CODE_TOOL_NAME) {
        throw new CodecallError(
          'INVALID_CONFIG',
          `handleToolUse takes uses of ${EXECUTE_CODE_TOOL_NAME}, got a use of ${JSON.stringify(toolUse.name)}`,
          { name: toolUse.name },
        );
      }
      const input = parseExecuteCodeInput(EXECUTE_CODE_TOOL_NAME, toolUse.input);
      const content: ModelContent =
        typeof input === 'string'
          ? { text: input, images: [], isError: true }
          : await toModelContent(await sessions.execute(input.code, runOptions));
      return toolResultBlock(toolUse.id, content);
    },
    async handleToolUses(content, runOptions = {}) {
      const results: ToolResultBlockParam[] = [];
      for (const block of content) {
        if (block.type !== 'tool_use' || block.name !== EXECUTE_CODE_TOOL_NAME) continue;
        results.push(await adapter.handleToolUse(block, runOptions));
      }
      return results;
    },
    close: () => sessions.close(),
  };
  return adapter;
}

/**
 * A result as the `tool_result` block of a `tool_use`: a text block, then each image as a base64 image block;
 * `is_error` when the run did not succeed.
 */
export async function toToolResultBlock(toolUseId: string, result: ExecuteResult): Promise<ToolResultBlockParam> {
  return toolResultBlock(toolUseId, await toModelContent(result));
}

function toolResultBlock(toolUseId: string, content: ModelContent): ToolResultBlockParam {
  const blocks: (TextBlockParam | ImageBlockParam)[] = [
    { type: 'text', text: content.text },
    ...content.images.map(
      (image): ImageBlockParam => ({
        type: 'image',
        source: { type: 'base64', media_type: image.mediaType, data: image.base64 },
      }),
    ),
  ];
  return {
    type: 'tool_result',
    tool_use_id: toolUseId,
    content: blocks,
    ...(content.isError ? { is_error: true } : {}),
  };
}
