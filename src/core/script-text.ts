import type { ScriptError } from './result.js';
import { type RedactionOptions, redactSecrets } from './secret-redaction.js';
import { sanitizeForModel } from './text-sanitizer.js';
import { boundText, omissionNotice } from './text-truncation.js';

// Text the script controls (what it prints, what its exception says) reaches the model and terminals only through
// here: escape sequences and control characters neutralised, secrets masked, length bounded.

/** Characters of an exception type name kept at most (a real one is a short identifier). */
export const MAX_ERROR_TYPE_CHARACTERS = 100;
/** Characters of a type name looked at (the rest is cut before any work). */
const TYPE_SCAN_CHARACTERS = MAX_ERROR_TYPE_CHARACTERS * 4;
/** The type reported when the script's own is empty. */
export const DEFAULT_ERROR_TYPE = 'Exception';

/** Options of {@link cleanScriptText}. */
export interface CleanScriptTextOptions extends RedactionOptions {
  /** Mask secret-shaped tokens (see `redactSecrets`). */
  readonly redactSecrets: boolean;
}

/** Options of {@link boundScriptText} and {@link cleanScriptError}. */
export interface BoundScriptTextOptions {
  /** Bytes (UTF-8) of the script's text kept at most: the head and the tail, with a notice of what was left out. */
  readonly maxBytes: number;
  readonly redactSecrets: boolean;
}

/**
 * Makes script text fit to show: terminal escape sequences removed, control characters written as `\xNN`, then
 * secret-shaped tokens masked when asked. `cutAfter`/`cutBefore` say the text is the head/tail of a longer one.
 */
export function cleanScriptText(text: string, options: CleanScriptTextOptions): string {
  const sanitized = sanitizeForModel(text);
  return options.redactSecrets ? redactSecrets(sanitized, options) : sanitized;
}

/**
 * Bounds and cleans script text: at most `maxBytes` of it (40 % head, 60 % tail, never inside a character) with an
 * omission notice between, each part cleaned by {@link cleanScriptText}. Cost is linear in the text.
 */
export function boundScriptText(text: string, options: BoundScriptTextOptions): string {
  const bounded = boundText(text, options.maxBytes);
  if (!bounded.truncated) return cleanScriptText(text, { redactSecrets: options.redactSecrets });
  const head = cleanScriptText(bounded.head, { redactSecrets: options.redactSecrets, cutAfter: true });
  const tail = cleanScriptText(bounded.tail, { redactSecrets: options.redactSecrets, cutBefore: true });
  return `${head}${omissionNotice(bounded)}${tail}`;
}

/** Drops a high surrogate left alone at the end of a cut string. */
function wholeCharacters(text: string): string {
  const last = text.charCodeAt(text.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? text.slice(0, -1) : text;
}

/**
 * Makes an exception type name short and clean: one line (whitespace of any kind folded to a space), no escape or
 * control characters, secrets masked when asked, at most {@link MAX_ERROR_TYPE_CHARACTERS} characters.
 */
export function cleanErrorType(type: string, options: { readonly redactSecrets: boolean }): string {
  // Cut first, generously (escape sequences shrink when removed): a forged type of megabytes costs no more than a
  // short one.
  const head = type.length > TYPE_SCAN_CHARACTERS ? wholeCharacters(type.slice(0, TYPE_SCAN_CHARACTERS)) : type;
  const line = cleanScriptText(head, options).replace(/\s+/g, ' ').trim();
  if (line.length === 0) return DEFAULT_ERROR_TYPE;
  if (line.length <= MAX_ERROR_TYPE_CHARACTERS && head.length === type.length) return line;
  return `${Array.from(line).slice(0, MAX_ERROR_TYPE_CHARACTERS).join('')}…`;
}

/**
 * The script's error as the result carries it: type by {@link cleanErrorType}, message and traceback each by
 * {@link boundScriptText}.
 */
export function cleanScriptError(error: ScriptError, options: BoundScriptTextOptions): ScriptError {
  return {
    type: cleanErrorType(error.type, options),
    message: boundScriptText(error.message, options),
    ...(error.traceback !== undefined ? { traceback: boundScriptText(error.traceback, options) } : {}),
  };
}
