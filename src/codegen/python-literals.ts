/** Longest Python literal used as a default value; a longer schema default is left to the tool (rendered `None`). */
export const MAX_DEFAULT_LITERAL_LENGTH = 200;

// Characters that must not appear raw in generated source: controls (a NUL is a SyntaxError, a CR becomes a newline),
// format characters such as bidirectional overrides, line/paragraph separators, private use and unassigned points.
const UNSAFE_IN_SOURCE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/gu;
const LONE_SURROGATE = /\p{Cs}/gu;
// Printable ASCII without backslash or double quote: the common case, which needs no escaping at all.
const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
// Printable ASCII, newlines and tabs, without backslash: in a docstring only runs of double quotes need care.
const PLAIN_DOCSTRING = /^[\n\t\x20-\x5b\x5d-\x7e]*$/;

function escapeCodePoint(character: string): string {
  const codePoint = character.codePointAt(0) ?? 0;
  if (codePoint <= 0xff) return `\\x${codePoint.toString(16).padStart(2, '0')}`;
  if (codePoint <= 0xffff) return `\\u${codePoint.toString(16).padStart(4, '0')}`;
  return `\\U${codePoint.toString(16).padStart(8, '0')}`;
}

const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A double-quoted Python string literal with the same value as `text`: backslashes, quotes and unsafe characters
 * escaped (lone surrogates too, so the value round-trips exactly).
 */
export function pythonStringLiteral(text: string): string {
  if (PLAIN_ASCII.test(text)) return `"${text}"`;
  if (PRINTABLE_ASCII.test(text)) return `"${text.replace(/[\\"]/g, '\\$&')}"`;
  const escaped = text
    .replace(/[\\"]/g, (character) => `\\${character}`)
    .replace(UNSAFE_IN_SOURCE, (character) => SHORT_ESCAPES[character] ?? escapeCodePoint(character))
    .replace(LONE_SURROGATE, escapeCodePoint);
  return `"${escaped}"`;
}

/**
 * Renders a JSON value as a Python literal (`None`, `True`, `False`, numbers, strings, lists, dicts).
 * @returns the literal, or `undefined` when the value is not JSON (undefined, functions, non-finite numbers, cycles...)
 */
export function toPythonLiteral(value: unknown): string | undefined {
  return renderLiteral(value, new Set());
}

function renderLiteral(value: unknown, ancestors: Set<object>): string | undefined {
  if (value === null) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return pythonStringLiteral(value);
  if (typeof value === 'number') {
    // JavaScript prints numbers as valid Python literals: 10, 0.5, 1e-7, 1e+21.
    return Number.isFinite(value) ? String(value) : undefined;
  }
  if (typeof value !== 'object' || ancestors.has(value)) return undefined;
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const items: string[] = [];
      for (const item of value) {
        const rendered = renderLiteral(item, ancestors);
        if (rendered === undefined) return undefined;
        items.push(rendered);
      }
      return `[${items.join(', ')}]`;
    }
    if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return undefined;
    const entries: string[] = [];
    for (const [key, item] of Object.entries(value)) {
      const rendered = renderLiteral(item, ancestors);
      if (rendered === undefined) return undefined;
      entries.push(`${pythonStringLiteral(key)}: ${rendered}`);
    }
    return `{${entries.join(', ')}}`;
  } finally {
    ancestors.delete(value);
  }
}

/**
 * Makes `text` safe between `"""` quotes: backslashes doubled, `"""` broken up, unsafe characters escaped, lone
 * surrogates replaced by U+FFFD (printing one would raise in `help()`), CRLF and CR turned into LF. The docstring
 * Python builds from the result reads exactly like `text`.
 */
export function escapeDocstringText(text: string): string {
  if (PLAIN_DOCSTRING.test(text)) {
    // Searching first: most texts have quotes but no final one and no run of three, and then need no copy.
    const closed = text.endsWith('"') ? `${text.slice(0, -1)}\\"` : text;
    return closed.includes('"""') ? closed.replace(/"""/g, '""\\"') : closed;
  }
  return text
    .replace(/\r\n?/g, '\n')
    .replace(LONE_SURROGATE, '\ufffd')
    .replace(/\\/g, '\\\\')
    .replace(/"$/, '\\"')
    .replace(/"""/g, '""\\"')
    .replace(UNSAFE_IN_SOURCE, (character) =>
      character === '\n' || character === '\t' ? character : escapeCodePoint(character),
    );
}
