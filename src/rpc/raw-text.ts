import { encodedTextOf } from '../tools/encoded-text.js';
import type { RawTextSegment } from './protocol.js';

/**
 * Strings of a tool result at least this long travel as raw UTF-8 after their reply frame (see `RAW_TEXT_FIELD`)
 * instead of as escaped JSON text: the host encodes them once (or not at all, for text a tool holds as bytes), the
 * script decodes them once, and neither side escapes, scans or unescapes them as JSON.
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
 * Takes the long strings out of a result: the result itself, or the values of a plain object's own properties
 * (a property holding encoded text, see `defineEncodedText`, is sent as its bytes without being read). Undefined
 * when there are none (or the value is anything else: it then travels as JSON, checked as usual).
 */
export function splitRawText(value: unknown): RawTextResult | undefined {
  if (isRawText(value)) {
    const bytes = Buffer.from(value, 'utf8');
    return { value: '', segments: [[null, bytes.length]], bytes: [bytes], byteLength: bytes.length };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  try {
    const record = value as Record<string, unknown>;
    const encoded = encodedTextOf(record);
    const keys = Object.keys(record);
    // The common case, on every call: nothing long.
    if (encoded === undefined && !keys.some((key) => isRawText(record[key]))) return undefined;
    const prototype: unknown = Object.getPrototypeOf(value);
    if ((prototype !== Object.prototype && prototype !== null) || 'toJSON' in value) return undefined;
    // `__proto__` cannot be copied by assignment: such a result stays JSON.
    if (keys.includes('__proto__')) return undefined;
    // Each property is read once; the copy is what is sent.
    const copy: Record<string, unknown> = {};
    const segments: RawTextSegment[] = [];
    const bytes: Buffer[] = [];
    let byteLength = 0;
    for (const key of keys) {
      let encodedBytes: Buffer | undefined;
      if (key === encoded?.key) {
        encodedBytes = encoded.bytes;
      } else {
        const property = record[key];
        if (!isRawText(property)) {
          copy[key] = property;
          continue;
        }
        encodedBytes = Buffer.from(property, 'utf8');
      }
      copy[key] = '';
      segments.push([key, encodedBytes.length]);
      bytes.push(encodedBytes);
      byteLength += encodedBytes.length;
    }
    return segments.length === 0 ? undefined : { value: copy, segments, bytes, byteLength };
  } catch {
    // A throwing getter or Proxy trap: the JSON path says what is wrong with the value.
    return undefined;
  }
}
