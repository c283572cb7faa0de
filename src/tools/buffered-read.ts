import type { Tool, ToolContext } from './types.js';

/** Bytes of each buffer the tool-call server lends to a {@link BufferedRead}. */
export const LENT_BUFFER_BYTES = 256 * 1024;

/**
 * What a {@link BufferedRead} gives back: the tool's result, and the UTF-8 bytes of one of its text properties when
 * they are to travel as they are (the property then holds `""` in `value`).
 */
export interface BufferedReadResult {
  /** The result; it holds no reference to the lent buffer. */
  readonly value: Record<string, unknown>;
  /** The property whose text `bytes` are. */
  readonly key: string;
  /**
   * The UTF-8 of `value[key]`, possibly a view of the lent buffer, possibly invalid (the script decodes it as Node
   * does, each invalid sequence one U+FFFD); undefined when `value` is complete as it is (its text was decoded, so
   * nothing of the lent buffer is in use any more).
   */
  readonly bytes: Buffer | undefined;
}

/**
 * A built-in tool's private way to run for the tool-call server alone: it may read into `buffer`, which the server
 * lends for this call and takes back only once its socket has taken every byte of the reply. Only the server calls
 * it, and only the server sees its result; no value that other code could keep ever refers to the buffer.
 */
export type BufferedRead = (
  args: Record<string, unknown>,
  context: ToolContext,
  buffer: Buffer,
) => Promise<BufferedReadResult>;

interface BufferedReadEntry {
  readonly read: BufferedRead;
  /** The `execute` the tool was made with: a tool whose `execute` was replaced since runs that one instead. */
  readonly execute: Tool['execute'];
}

const bufferedReads = new WeakMap<object, BufferedReadEntry>();

/** Gives a built-in tool its {@link BufferedRead}, which does what its current `execute` does. */
export function defineBufferedRead(tool: Tool, read: BufferedRead): void {
  bufferedReads.set(tool, { read, execute: tool.execute });
}

/**
 * The {@link BufferedRead} of `tool`, when it has one and still runs the `execute` it was made with (a copy of the
 * tool, or one whose `execute` was replaced, has none).
 */
export function bufferedReadOf(tool: Tool): BufferedRead | undefined {
  const entry = bufferedReads.get(tool);
  return entry !== undefined && entry.execute === tool.execute ? entry.read : undefined;
}
