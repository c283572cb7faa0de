/** A property whose text is held as UTF-8 bytes until it is read; see {@link defineEncodedText}. */
interface EncodedText {
  readonly key: string;
  readonly bytes: Buffer;
  readonly getter: () => string;
  /** The string the getter made, once the property was read. */
  decoded: string | undefined;
}

const encodedTexts = new WeakMap<object, EncodedText>();

/**
 * Makes `target[key]` the text of `bytes` (UTF-8), decoded only when it is first read, and remembers the bytes: the
 * tool channel sends them to the script as they are (see `encodedTextOf`), so text a tool read from a file is neither
 * decoded nor encoded again on the host on its way to the script. To anyone else the property reads, writes and
 * enumerates like a plain one. Decoding text that is not ASCII is slow in V8, several times slower than sending it.
 * The bytes need not be valid UTF-8, nor be checked: read here, they decode as Node decodes (each invalid sequence, its
 * maximal subpart, one U+FFFD), and the script's runtime decodes what it receives the same way
 * (test/engine/large-replies.test.ts compares the two), so both see the same text.
 */
export function defineEncodedText(target: object, key: string, bytes: Buffer): void {
  const entry: EncodedText = {
    key,
    bytes,
    decoded: undefined,
    getter: () => {
      const text = bytes.toString('utf8');
      entry.decoded = text;
      Object.defineProperty(target, key, { value: text, writable: true, enumerable: true, configurable: true });
      return text;
    },
  };
  Object.defineProperty(target, key, {
    get: entry.getter,
    set: (value: unknown) => {
      encodedTexts.delete(target);
      Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
    },
    enumerable: true,
    configurable: true,
  });
  encodedTexts.set(target, entry);
}

/**
 * The property of `value` defined by {@link defineEncodedText} and its UTF-8 bytes, while it still holds their text
 * (unread, or read and left as it was); undefined otherwise. Reads no property.
 */
export function encodedTextOf(value: object): { readonly key: string; readonly bytes: Buffer } | undefined {
  const entry = encodedTexts.get(value);
  if (entry === undefined) return undefined;
  const descriptor = Object.getOwnPropertyDescriptor(value, entry.key);
  if (descriptor === undefined) return undefined;
  const unchanged =
    descriptor.get === entry.getter || (entry.decoded !== undefined && descriptor.value === entry.decoded);
  return unchanged ? entry : undefined;
}
