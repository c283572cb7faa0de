/**
 * The wire protocol of the tool channel (docs/protocol.md): error codes, notification names, the output end marker,
 * and the frames the host writes. `python/codecall_boot.py` mirrors every constant here under the same name (error
 * codes as `ChannelErrorCode.TOOL_FAILED` ...); the protocol parity test compares the two.
 */

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

/**
 * Script → host: the script has finished (threads joined, atexit run, output flushed and closed) and the interpreter
 * exits with `params.exitCode` right after, so the host need not wait for the process to be torn down.
 */
export const DONE_NOTIFICATION = '$done';

/** Script → host: a warm-pool interpreter is prepared and waits for its script. */
export const READY_NOTIFICATION = '$ready';

/** Host → script: the script a warm-pool interpreter runs (`params.code`). */
export const RUN_NOTIFICATION = '$run';

/** Host → script: one cell of a session (`params: { id, code, nonce, cpuSeconds }`). */
export const CELL_NOTIFICATION = '$cell';

/** Script → host: a session cell finished (`params: { id, exitCode, exception, stdout, stderr }`). */
export const CELL_DONE_NOTIFICATION = '$cell_done';

/**
 * Script → host: one chunk of an artifact (`params: { name, offset, data, final, mimeType? }`, `data` in base64).
 * The host writes it into a folder only the host writes; the script never names a host path.
 */
export const ARTIFACT_NOTIFICATION = '$artifact';

/** Start of the marker the boot writes at the end of a script's or a cell's output; the nonce follows. */
export const OUTPUT_END_MARKER_PREFIX = '\0codecall-end-';

/** End of the output end marker, after the nonce. */
export const OUTPUT_END_MARKER_SUFFIX = '\0';

/**
 * The marker the boot writes at the end of a script's or a cell's output, on stdout and on stderr, straight to the
 * file descriptor.
 */
export function outputEndMarker(nonce: string): Buffer {
  return Buffer.from(`${OUTPUT_END_MARKER_PREFIX}${nonce}${OUTPUT_END_MARKER_SUFFIX}`, 'latin1');
}

/**
 * Field of a reply frame whose long strings follow it as raw UTF-8 instead of escaped JSON text: a list of
 * `[key, bytes]`, in order, where `key` names the property of the result that holds the string (its JSON value in
 * the frame is `""`), or is null when the result itself is the string. The frame's newline is followed by the bytes
 * of each string in turn; the next frame starts after them.
 */
export const RAW_TEXT_FIELD = 'rawText';

/** One string of a reply sent as raw UTF-8 after its frame: its key (null for the result itself) and its bytes. */
export type RawTextSegment = readonly [key: string | null, bytes: number];

/** Renders a notification frame (with its newline). */
export function encodeNotification(method: string, params: unknown): string {
  return `${JSON.stringify({ method, params })}\n`;
}

/** Renders an error reply frame (with its newline). */
export function encodeErrorReply(id: number | null, code: ChannelErrorCodeValue, message: string): string {
  return `{"id":${id === null ? 'null' : id},"error":{"code":${code},"message":${JSON.stringify(message)}}}\n`;
}

/**
 * Renders the frame of a success reply whose long strings follow as raw bytes (see {@link RAW_TEXT_FIELD}), from the
 * result's JSON text with those strings left empty; the caller writes the bytes right after it.
 */
export function encodeRawTextReply(id: number, resultJson: string, segments: readonly RawTextSegment[]): string {
  return `{"id":${id},"result":${resultJson},"${RAW_TEXT_FIELD}":${JSON.stringify(segments)}}\n`;
}

/** Renders a success reply frame from the result's JSON text (with its newline). */
export function encodeResultReply(id: number, resultJson: string): string {
  return `{"id":${id},"result":${resultJson}}\n`;
}
