/** Error codes of the tool channel (JSON-RPC 2.0 where it has one; see docs/protocol.md). */
export const ChannelErrorCode = {
  parseError: -32700,
  invalidRequest: -32600,
  unknownTool: -32601,
  invalidArguments: -32602,
  toolFailed: -32000,
  toolCallLimit: -32001,
  toolCallTimeout: -32002,
  frameTooLarge: -32003,
  runEnded: -32004,
} as const;

/** One of {@link ChannelErrorCode}. */
export type ChannelErrorCodeValue = (typeof ChannelErrorCode)[keyof typeof ChannelErrorCode];

/** A tool call from the script. */
export interface ToolCallRequest {
  readonly id: number;
  readonly method: string;
  readonly params: Record<string, unknown>;
}

/** Notification the boot script sends when the script ends with an uncaught exception. */
export interface ScriptExceptionReport {
  readonly type: string;
  readonly message: string;
  readonly traceback?: string | undefined;
}

/** Prefix of notification names: never a tool name, since tool names cannot contain `$`. */
export const NOTIFICATION_PREFIX = '$';

/** The notification carrying an uncaught exception. */
export const EXCEPTION_NOTIFICATION = '$exception';

/** Renders an error reply frame (with its newline). */
export function encodeErrorReply(id: number | null, code: ChannelErrorCodeValue, message: string): string {
  return `{"id":${id === null ? 'null' : id},"error":{"code":${code},"message":${JSON.stringify(message)}}}\n`;
}

/** Renders a success reply frame from the result's JSON text (with its newline). */
export function encodeResultReply(id: number, resultJson: string): string {
  return `{"id":${id},"result":${resultJson}}\n`;
}
