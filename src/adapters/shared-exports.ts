/**
 * What every adapter entry (`codecall/ai-sdk`, `codecall/openai`, `codecall/anthropic`) exports besides its own
 * SDK's tool: sessions per conversation, the model content of a result, and the limits on images.
 */

export type { ModelImage, ModelImageMediaType } from './artifact-images.js';
export { MAX_MODEL_IMAGE_BYTES, MAX_MODEL_IMAGES } from './artifact-images.js';
export type {
  ConversationExecuteOptions,
  ConversationSessionsOptions,
  SessionHost,
} from './conversation-sessions.js';
export {
  ConversationSessions,
  DEFAULT_CONVERSATION_ID,
  DEFAULT_CONVERSATION_IDLE_MS,
  MAX_CONVERSATION_ID_LENGTH,
} from './conversation-sessions.js';
export type { AdapterHost } from './execute-code-tool.js';
export { CONVERSATION_STATE_NOTE } from './execute-code-tool.js';
export type { ModelContent } from './model-content.js';
export { toModelContent } from './model-content.js';
