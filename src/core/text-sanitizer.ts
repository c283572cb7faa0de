// What the script prints or reports (stdout, stderr, exception type, message and traceback) passes through here before
// a model or a terminal sees it.

const decoder = new TextDecoder('utf-8', { fatal: false });

// CSI, OSC (ended by BEL or ST), DCS/SOS/PM/APC strings, and two-byte escapes.
const ESCAPE_SEQUENCE =
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*(?:\x1b\\)?|\x1b[@-Z\\-_]|\x1b/g;
// Control characters other than tab and newline, DEL, and the C1 range (U+009B acts as CSI on some terminals).
const CONTROL_CHARACTER = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/** Decodes bytes as UTF-8, replacing invalid sequences with U+FFFD. */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/**
 * Makes script text (output, exception messages, tracebacks) safe to show a model or a terminal: terminal escape sequences removed, `\r\n` folded to `\n`,
 * a lone `\r` made a newline, and other control characters (NUL included) written as visible `\xNN` escapes.
 */
export function sanitizeForModel(text: string): string {
  if (!/[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(text)) return text;
  return text
    .replace(ESCAPE_SEQUENCE, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n')
    .replace(CONTROL_CHARACTER, (character) => `\\x${character.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
