import type { RawTextSegment } from './protocol.js';

/**
 * Strings of a tool result at least this long travel as raw UTF-8 after their reply frame (see `RAW_TEXT_FIELD`)
 * instead of as escaped JSON text: the host encodes them once, the script decodes them once, and neither side
 * escapes, scans or unescapes them as JSON.
 */
export const RAW_TEXT_MIN_CHARS = 4_096;

/** A result whose long strings were taken out to travel as raw bytes. */
export interface RawTextResult {
  /** What to send as JSON: the result with those strings replaced by `""` (a shallow copy of an object). */
  readonly value: unknown;
  readonly segments: RawTextSegment[];
  /** The UTF-8 bytes of each string, in the order of `segments`. */
  readonly bytes: Buffer[];
  /** Their total length. */
  readonly byteLength: number;
}

interface WellFormedString {
  isWellFormed(): boolean;
}

// A lone surrogate has no UTF-8 form: such a string keeps its JSON escape (\ud800), which the script decodes exactly.
function isRawText(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length >= RAW_TEXT_MIN_CHARS &&
    (value as unknown as WellFormedString).isWellFormed()
  );
}

/**
 * Takes the long strings out of a result: the result itself, or the values of a plain object's own properties.
 * Undefined when there are none (or the value is anything else: it then travels as JSON, checked as usual).
 */
export function splitRawText(value: unknown): RawTextResult | undefined {
  if (isRawText(value)) {
    const bytes = Buffer.from(value, 'utf8');
    return { value: '', segments: [[null, bytes.length]], bytes: [bytes], byteLength: bytes.length };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  try {
    const prototype: unknown = Object.getPrototypeOf(value);
    if ((prototype !== Object.prototype && prototype !== null) || 'toJSON' in value) return undefined;
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (!keys.some((key) => isRawText(record[key]))) return undefined;
    // The copy is what is sent: each property is read once more here, and the strings are taken from the copy.
    const copy: Record<string, unknown> = { ...record };
    const segments: RawTextSegment[] = [];
    const bytes: Buffer[] = [];
    let byteLength = 0;
    for (const key of keys) {
      const text = copy[key];
      // `__proto__` cannot be set back to "" on a plain object: it stays JSON.
      if (key === '__proto__' || !isRawText(text)) continue;
      const encoded = Buffer.from(text, 'utf8');
      copy[key] = '';
      segments.push([key, encoded.length]);
      bytes.push(encoded);
      byteLength += encoded.length;
    }
    return segments.length === 0 ? undefined : { value: copy, segments, bytes, byteLength };
  } catch {
    // A throwing getter or Proxy trap: the JSON path says what is wrong with the value.
    return undefined;
  }
}
