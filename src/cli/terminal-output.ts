import { sanitizeForModel } from '../core/text-sanitizer.js';

// What the command line writes to a terminal carries no escape sequence or control character it did not put there
// itself: a message may quote a path, a configuration value or a script's text.

/** `text` with terminal escape sequences removed and control characters written as `\xNN` (tab and newline kept). */
export function terminalText(text: string): string {
  return sanitizeForModel(text);
}

/**
 * `value` as indented JSON safe to print on a terminal: JSON escapes the C0 controls itself; DEL and the C1 controls
 * (U+009B acts as CSI on some terminals) are escaped here as `\u00NN`, which leaves the JSON equal.
 */
export function terminalJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /[\u007f-\u009f]/g,
    (character) => `\\u00${character.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}
