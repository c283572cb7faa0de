// Long script text keeps its beginning and its end, with an explicit notice of what was left out in between: the same
// rule for stdout, stderr and exception text.

/** Share of the kept bytes taken from the start of a long text; the rest comes from its end. */
export const HEAD_SHARE = 0.4;

/** Moves `end` back so that `bytes.subarray(0, end)` does not end inside a UTF-8 character. */
export function utf8PrefixEnd(bytes: Uint8Array): number {
  let end = bytes.length;
  let back = 0;
  while (end - back - 1 >= 0 && back < 4 && ((bytes[end - back - 1] ?? 0) & 0xc0) === 0x80) back += 1;
  const leadIndex = end - back - 1;
  if (leadIndex < 0) return end;
  const lead = bytes[leadIndex] ?? 0;
  const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  if (length > back + 1) end = leadIndex;
  return end;
}

/** Index of the first byte of `bytes` that does not continue a UTF-8 character. */
export function utf8SuffixStart(bytes: Uint8Array): number {
  let start = 0;
  while (start < bytes.length && start < 4 && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return start;
}

/** What an omission notice reports. */
export interface OmissionNoticeOptions {
  /** Bytes kept from the start. */
  readonly headBytes: number;
  /** Bytes kept from the end. */
  readonly tailBytes: number;
  /** Bytes of the whole text. */
  readonly totalBytes: number;
  /** Appended inside the brackets, e.g. `; the complete output is in /path`. */
  readonly where?: string | undefined;
}

/** The line that stands for the left-out middle of a long text, on a line of its own. */
export function omissionNotice(options: OmissionNoticeOptions): string {
  const { headBytes, tailBytes, totalBytes } = options;
  const omitted = totalBytes - headBytes - tailBytes;
  return `\n[… ${omitted} bytes omitted: kept the first ${headBytes} and the last ${tailBytes} of ${totalBytes} bytes${options.where ?? ''} …]\n`;
}

/** A text cut to a byte budget: all of it, or its head and tail (whole UTF-8 characters) with the middle left out. */
export type BoundedText =
  | { readonly truncated: false; readonly text: string }
  | {
      readonly truncated: true;
      readonly head: string;
      readonly tail: string;
      readonly headBytes: number;
      readonly tailBytes: number;
      readonly totalBytes: number;
    };

/**
 * Cuts `text` to at most `maxBytes` bytes of UTF-8: {@link HEAD_SHARE} from its start, the rest from its end, never
 * inside a character. Linear in the text; a text that fits is returned as it is.
 */
export function boundText(text: string, maxBytes: number): BoundedText {
  // A UTF-16 code unit is at most 3 bytes of UTF-8: short texts need no encoding to know they fit.
  if (text.length * 3 <= maxBytes) return { truncated: false, text };
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { truncated: false, text };
  const headLimit = Math.floor(maxBytes * HEAD_SHARE);
  const tailLimit = maxBytes - headLimit;
  const headSlice = bytes.subarray(0, headLimit);
  const head = headSlice.subarray(0, utf8PrefixEnd(headSlice));
  const tailSlice = bytes.subarray(bytes.length - tailLimit);
  const tail = tailSlice.subarray(utf8SuffixStart(tailSlice));
  return {
    truncated: true,
    head: head.toString('utf8'),
    tail: tail.toString('utf8'),
    headBytes: head.length,
    tailBytes: tail.length,
    totalBytes: bytes.length,
  };
}
