/**
 * Deepest nesting of arrays and objects accepted in JSON that arrives from outside the host (channel frames, HTTP
 * bodies). Parsing deeper text costs time and memory out of proportion to its size (a few megabytes of `[` block the
 * event loop for seconds), and no tool argument needs more.
 */
export const MAX_JSON_NESTING_DEPTH = 256;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;

const PLAIN = 0;
const OPENER = 1;
const CLOSER = 2;
/** What each byte means to the scan outside strings: one table load per byte in the hot loop. */
const BYTE_KINDS = new Uint8Array(256);
BYTE_KINDS[OPEN_BRACKET] = OPENER;
BYTE_KINDS[OPEN_BRACE] = OPENER;
BYTE_KINDS[0x5d] = CLOSER; // ]
BYTE_KINDS[0x7d] = CLOSER; // }
const STRING_START = 3;
BYTE_KINDS[QUOTE] = STRING_START;

/** Bytes of a string stepped through one by one before the rest is crossed with native searches. */
const SHORT_STRING_BYTES = 32;

/**
 * Whether UTF-8 JSON text `bytes[start, end)` nests arrays and objects deeper than `maxDepth`, found without parsing
 * it, in time linear in its length and without copying it. Bytes of multi-byte UTF-8 characters are all above 0x7f,
 * so they never look like brackets or quotes.
 *
 * Text no longer than the limit cannot nest deeper and is not looked at; text with at most `maxDepth` opening
 * brackets anywhere (most big frames: file contents, lists of numbers) is recognised by a native search for them;
 * the rest is scanned once, counting `[` and `{` against `]` and `}` outside strings (escapes respected, long strings
 * crossed with native searches for quotes). The count is an upper bound of the depth a parser reaches before it
 * stops: text that is not JSON may be counted deeper than it is, never shallower.
 */
export function exceedsJsonNesting(
  bytes: Uint8Array,
  maxDepth: number = MAX_JSON_NESTING_DEPTH,
  start = 0,
  end = bytes.length,
): boolean {
  if (end - start <= maxDepth) return false;
  const text = start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end);
  if (countOpeners(text, maxDepth + 1) <= maxDepth) return false;
  return scanDepth(text, maxDepth);
}

/** Occurrences of `[` and `{` in `bytes`, counted up to `cap` (native searches: a memchr per occurrence). */
function countOpeners(bytes: Uint8Array, cap: number): number {
  let count = 0;
  for (const opener of [OPEN_BRACKET, OPEN_BRACE]) {
    let index = bytes.indexOf(opener);
    while (index !== -1) {
      count += 1;
      if (count >= cap) return count;
      index = bytes.indexOf(opener, index + 1);
    }
  }
  return count;
}

function scanDepth(bytes: Uint8Array, maxDepth: number): boolean {
  const end = bytes.length;
  let depth = 0;
  let index = 0;
  while (index < end) {
    const kind = BYTE_KINDS[bytes[index++] as number];
    if (kind === PLAIN) continue;
    if (kind === OPENER) {
      depth += 1;
      if (depth > maxDepth) return true;
    } else if (kind === CLOSER) {
      // Clamped at zero: stray closers must not lend depth to the openers after them.
      if (depth > 0) depth -= 1;
    } else {
      index = skipString(bytes, index);
      if (index === -1) return false;
    }
  }
  return false;
}

/**
 * From just after an opening quote, where scanning goes on after the closing one; -1 when the string runs to the end.
 * Short strings (keys) are stepped through byte by byte; a long one is crossed with native searches for quotes, each
 * checked for the backslashes before it.
 */
function skipString(bytes: Uint8Array, start: number): number {
  const end = bytes.length;
  const shortEnd = Math.min(end, start + SHORT_STRING_BYTES);
  let index = start;
  while (index < shortEnd) {
    const byte = bytes[index++];
    if (byte === QUOTE) return index;
    if (byte === BACKSLASH) index += 1;
  }
  // Here no escape is pending: a backslash and the byte it escapes were stepped over together.
  for (;;) {
    if (index >= end) return -1;
    const quote = bytes.indexOf(QUOTE, index);
    if (quote === -1) return -1;
    let backslash = quote - 1;
    while (backslash >= index && bytes[backslash] === BACKSLASH) backslash -= 1;
    index = quote + 1;
    // An even run of backslashes (none included) leaves the quote unescaped.
    if ((quote - 1 - backslash) % 2 === 0) return index;
  }
}
