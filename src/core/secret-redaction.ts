// Masks secret-shaped tokens (API keys, access tokens, private keys, credentials next to their names) in text on its
// way to a model. It catches secrets a script prints by accident (a config file, a request dump, a tool result); it is
// no barrier against a script that means to leak one (base64 is enough), which isolation and the tool set must stop.
// Every expression here runs in linear time: each starts with a literal or a bounded lookbehind that anchors it to
// the start of a run of token characters, repeats are bounded or over classes the next element cannot match, and the
// private-key blocks are found by scanning for their markers once.

/** What replaces the secret part of a token. */
export const REDACTION_MARK = '[REDACTED]';

/** Separates the kept, recognisable prefix of a token from {@link REDACTION_MARK}. */
const KEPT_PREFIX_END = '…';

/** Where the text handed to {@link redactSecrets} was cut from a longer one. */
export interface RedactionOptions {
  /** The text is the start of a longer one: a token running into its end may be cut short and is masked too. */
  readonly cutAfter?: boolean | undefined;
  /** The text is the end of a longer one: a private key whose begin marker was cut off is masked up to its end. */
  readonly cutBefore?: boolean | undefined;
}

// A token starts where no token character precedes it, or right after a backslash escape (`\n` in JSON text): no
// digit, `_` or `-` before it, and no letter but one escaped by a backslash.
const TOKEN_START = String.raw`(?<![0-9_-]|(?<!\\)[A-Za-z])`;

/** A family of tokens recognisable by a literal prefix: the prefix (kept) and the body (masked). */
interface TokenFamily {
  /** Expression of the kept prefix (no capturing groups). */
  readonly prefix: string;
  /** Expression of the rest of the token (no capturing groups). */
  readonly body: string;
  /** Only a body with a digit counts (for prefixes that also start ordinary hyphenated words). */
  readonly needsDigit?: boolean;
}

// More specific prefixes come before the general ones they start with (`sk-ant-` before `sk-`).
const TOKEN_FAMILIES: readonly TokenFamily[] = [
  { prefix: 'sk-ant-', body: '[A-Za-z0-9_-]{20,}' },
  { prefix: 'sk-(?:proj|svcacct|admin)-', body: '[A-Za-z0-9_-]{20,}' },
  { prefix: '(?:sk|rk)_(?:live|test)_', body: '[A-Za-z0-9]{16,}' },
  { prefix: 'sk-', body: '[A-Za-z0-9_-]{20,}', needsDigit: true },
  { prefix: 'github_pat_', body: '[A-Za-z0-9_]{40,}' },
  { prefix: 'gh[pousr]_', body: '[A-Za-z0-9]{30,}' },
  { prefix: 'glpat-', body: '[A-Za-z0-9_-]{20,}' },
  { prefix: 'xox[abposr]-', body: '[A-Za-z0-9-]{10,}' },
  { prefix: 'xapp-', body: '[0-9]-[A-Za-z0-9-]{10,}' },
  { prefix: 'AIza', body: '[A-Za-z0-9_-]{30,}' },
  { prefix: 'ya29\\.', body: '[A-Za-z0-9_-]{20,}' },
  { prefix: '(?:AKIA|ASIA|ABIA|ACCA)', body: '[A-Z0-9]{16}(?![A-Za-z0-9])' },
  { prefix: 'npm_', body: '[A-Za-z0-9]{30,}' },
  { prefix: 'pypi-', body: '[A-Za-z0-9_-]{50,}' },
  { prefix: 'hf_', body: '[A-Za-z0-9]{30,}' },
  // JSON Web Tokens: base64url of `{"` starts every header; header and payload at least.
  { prefix: 'eyJ', body: '[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}(?:\\.[A-Za-z0-9_-]+)?' },
];

// One capturing group per family (its prefix), so a match tells which family it is.
const PREFIXED_TOKEN = new RegExp(
  `${TOKEN_START}(?:${TOKEN_FAMILIES.map((family) => `(${family.prefix})${family.body}`).join('|')})`,
  'g',
);

// A known prefix and whatever token characters follow it up to the end of a text that was cut there.
const CUT_TOKEN_AT_END = new RegExp(
  `${TOKEN_START}(${TOKEN_FAMILIES.map((family) => family.prefix).join('|')})[A-Za-z0-9_.-]+$`,
);
/** Characters at the end of a cut text looked at for a token cut short (longer than any prefix and some body). */
const CUT_TOKEN_WINDOW = 512;

const PRIVATE_KEY_BEGIN = /-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----/g;
const PRIVATE_KEY_END = /-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----/g;

// `Authorization: Bearer x`, `"authorization": "Basic x"`, `Proxy-Authorization=x`: the scheme word is kept.
const AUTHORIZATION_VALUE =
  /(?<![A-Za-z0-9_-])((?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?(?:(?:bearer|basic|token|bot|digest|negotiate)[ \t]+)?)([^\s"'`,;]+)/gi;
const BEARER_TOKEN = /(?<![A-Za-z0-9_-])(bearer[ \t]+)([A-Za-z0-9._~+/=-]{16,})/gi;
// The password of `scheme://user:password@host`.
const URL_PASSWORD = /(?<![A-Za-z0-9+.-])([a-z][a-z0-9+.-]{0,20}:\/\/[^\s:/@]{1,128}:)([^\s/@]{1,256})(?=@)/gi;

const STRONG_KEY_WORD = 'secret[_-]?access[_-]?key|password|passwd|passphrase|secret|private[_-]?key|credentials?';
const WEAK_KEY_WORD = 'token|api[_-]?key|access[_-]?key|auth';
// A name ending in a credential word, a separator, and a value (quoted, or up to a delimiter).
const CREDENTIAL_ASSIGNMENT = new RegExp(
  String.raw`(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]{0,60}?(?:(${STRONG_KEY_WORD})|${WEAK_KEY_WORD})s?)(["']?[ \t]*[:=][ \t]*)` +
    String.raw`("[^"\n]{1,256}"|'[^'\n]{1,256}'|["']?[^\s"'\x60,;&<>()[\]{}=][^\s"'\x60,;&<>()[\]{}]*)`,
  'gi',
);
// Every credential name contains one of these: text without any has no assignment to look at.
const CREDENTIAL_NAME_GATE = /passw|passphrase|secret|key|credential|token|auth/i;
const STRONG_VALUE_MIN_LENGTH = 6;
/**
 * Characters of the shortest text anything here masks: a token cut short at the end of a head, a three-character
 * prefix (`hf_`, `sk-`, `eyJ`) and one character more; every other form is longer (a URL password: `a://b:c@`, 8).
 * A shorter text (an empty stderr, a `1` printed) comes back as it is without compiling an expression.
 */
export const SHORTEST_MASKED_TEXT = 4;
const WEAK_VALUE_MIN_LENGTH = 16;

function mask(prefix: string): string {
  return prefix.length === 0 ? REDACTION_MARK : `${prefix}${KEPT_PREFIX_END}${REDACTION_MARK}`;
}

function alreadyMasked(value: string): boolean {
  return value.includes(REDACTION_MARK) || value.includes(KEPT_PREFIX_END);
}

/** A random-looking value: long enough, with letters and digits. */
function looksOpaque(value: string): boolean {
  return value.length >= WEAK_VALUE_MIN_LENGTH && /[0-9]/.test(value) && /[A-Za-z]/.test(value);
}

/**
 * An unquoted word without digits, or an attribute path, is code or prose (`password = args.password`, `secret: True`,
 * `your password: please.`), not a value.
 */
function looksLikeCode(text: string): boolean {
  let end = text.length;
  while (end > 0 && '.!?:'.includes(text[end - 1] ?? '')) end -= 1;
  const value = text.slice(0, end);
  return /^[A-Za-z_]+$/.test(value) || /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$/.test(value);
}

function maskPrefixedTokens(text: string): string {
  return text.replace(PREFIXED_TOKEN, (match: string, ...groups: unknown[]) => {
    const index = groups.findIndex((group, position) => position < TOKEN_FAMILIES.length && group !== undefined);
    const prefix = groups[index] as string;
    if (TOKEN_FAMILIES[index]?.needsDigit && !/[0-9]/.test(match.slice(prefix.length))) return match;
    return mask(prefix);
  });
}

function maskPrivateKeys(text: string, cutBefore: boolean): string {
  const pieces: string[] = [];
  let position = 0;
  if (cutBefore) {
    // The tail of a cut text may hold the rest of a key whose begin marker was left out.
    PRIVATE_KEY_BEGIN.lastIndex = 0;
    PRIVATE_KEY_END.lastIndex = 0;
    const firstBegin = PRIVATE_KEY_BEGIN.exec(text);
    const firstEnd = PRIVATE_KEY_END.exec(text);
    if (firstEnd !== null && (firstBegin === null || firstEnd.index < firstBegin.index)) {
      pieces.push(`${REDACTION_MARK}\n`);
      position = firstEnd.index;
    }
  }
  for (;;) {
    PRIVATE_KEY_BEGIN.lastIndex = position;
    const begin = PRIVATE_KEY_BEGIN.exec(text);
    if (begin === null) break;
    const bodyStart = begin.index + begin[0].length;
    PRIVATE_KEY_END.lastIndex = bodyStart;
    const end = PRIVATE_KEY_END.exec(text);
    pieces.push(text.slice(position, bodyStart), `\n${KEPT_PREFIX_END}${REDACTION_MARK}`);
    // Without an end marker the key runs to the end of the text (it was cut, or is malformed): all of it is masked.
    if (end === null) return pieces.join('');
    pieces.push('\n');
    position = end.index;
  }
  if (position === 0) return text;
  pieces.push(text.slice(position));
  return pieces.join('');
}

function maskCredentialAssignments(text: string): string {
  if (!CREDENTIAL_NAME_GATE.test(text)) return text;
  return text.replace(
    CREDENTIAL_ASSIGNMENT,
    (match: string, name: string, strongWord: string | undefined, separator: string, value: string) => {
      const quote = value[0] === '"' || value[0] === "'" ? value[0] : '';
      const closed = quote !== '' && value.length > 1 && value.endsWith(quote);
      const bare = quote === '' ? value : value.slice(1, closed ? -1 : undefined);
      if (alreadyMasked(bare)) return match;
      if (strongWord !== undefined) {
        if (bare.length < STRONG_VALUE_MIN_LENGTH || (quote === '' && looksLikeCode(bare))) return match;
      } else if (!looksOpaque(bare)) {
        return match;
      }
      return `${name}${separator}${quote}${REDACTION_MARK}${closed ? quote : ''}`;
    },
  );
}

function maskAuthorizationValues(text: string): string {
  const replaced = text.replace(AUTHORIZATION_VALUE, (match: string, head: string, value: string) =>
    alreadyMasked(value) || value.length < 8 || /^[A-Za-z]+$/.test(value) ? match : `${head}${REDACTION_MARK}`,
  );
  return replaced.replace(BEARER_TOKEN, (match: string, head: string, value: string) =>
    looksOpaque(value) || value.length >= 32 ? `${head}${REDACTION_MARK}` : match,
  );
}

function maskCutToken(text: string): string {
  const start = Math.max(0, text.length - CUT_TOKEN_WINDOW);
  const window = text.slice(start);
  const match = CUT_TOKEN_AT_END.exec(window);
  if (match === null) return text;
  return `${text.slice(0, start + match.index)}${mask(match[1] ?? '')}`;
}

/**
 * Masks secret-shaped tokens in `text`: API keys and access tokens with a known prefix (OpenAI/Anthropic `sk-…`,
 * GitHub `ghp_…`/`github_pat_…`, GitLab, Slack, Google, AWS access key ids, Stripe, npm, PyPI, Hugging Face),
 * JSON Web Tokens, bearer and `Authorization` credentials, passwords in URLs, PEM private key blocks, and values
 * assigned to credential names (`aws_secret_access_key = …`, `"password": "…"`, `API_TOKEN=…`). A token keeps its
 * recognisable prefix (`sk-proj-…[REDACTED]`); other values become `[REDACTED]`. Text without such tokens comes back
 * unchanged; masking masked text changes nothing. Linear in the length of the text.
 */
export function redactSecrets(text: string, options: RedactionOptions = {}): string {
  if (text.length < SHORTEST_MASKED_TEXT) return text;
  let result = maskPrivateKeys(text, options.cutBefore === true);
  result = maskPrefixedTokens(result);
  result = maskAuthorizationValues(result);
  if (result.includes('://')) {
    result = result.replace(URL_PASSWORD, (match: string, head: string, password: string) =>
      alreadyMasked(password) ? match : `${head}${REDACTION_MARK}`,
    );
  }
  result = maskCredentialAssignments(result);
  if (options.cutAfter) result = maskCutToken(result);
  return result;
}
