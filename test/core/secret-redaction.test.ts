import { describe, expect, it } from 'vitest';
import { REDACTION_MARK, redactSecrets, SHORTEST_MASKED_TEXT } from '../../src/core/secret-redaction.js';

// Samples are assembled at run time from a seeded generator: real-looking shapes, no literal credential in the repo.
function randomText(seed: number): (length: number, alphabet?: string) => string {
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state;
  };
  return (length, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789') =>
    Array.from({ length }, () => alphabet[next() % alphabet.length]).join('');
}

const random = randomText(42);
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const URL_SAFE = `${BASE62}_-`;
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const BASE64 = `${BASE62}+/`;

/** Prefixed tokens: [what, the token, the prefix it keeps]. */
const PREFIXED: readonly (readonly [string, string, string])[] = [
  ['OpenAI project key', `sk-proj-${random(156, URL_SAFE)}`, 'sk-proj-'],
  ['OpenAI service account key', `sk-svcacct-${random(120, URL_SAFE)}`, 'sk-svcacct-'],
  ['OpenAI legacy key', `sk-${random(48)}1`, 'sk-'],
  ['Anthropic key', `sk-ant-api03-${random(93, URL_SAFE)}AA`, 'sk-ant-'],
  ['DeepSeek-style hex key', `sk-${random(32, '0123456789abcdef')}7`, 'sk-'],
  ['Stripe live key', `sk_live_${random(99)}`, 'sk_live_'],
  ['Stripe restricted key', `rk_test_${random(40)}`, 'rk_test_'],
  ['GitHub classic token', `ghp_${random(36)}`, 'ghp_'],
  ['GitHub OAuth token', `gho_${random(36)}`, 'gho_'],
  ['GitHub app token', `ghs_${random(36)}`, 'ghs_'],
  ['GitHub fine-grained token', `github_pat_11${random(20, UPPER)}_${random(59)}`, 'github_pat_'],
  ['GitLab token', `glpat-${random(20, URL_SAFE)}`, 'glpat-'],
  ['Slack bot token', `xoxb-${random(12, '0123456789')}-${random(13, '0123456789')}-${random(24)}`, 'xoxb-'],
  ['Slack user token', `xoxp-${random(12, '0123456789')}-${random(12, '0123456789')}-${random(32)}`, 'xoxp-'],
  ['Slack app token', `xapp-1-${random(11, UPPER)}-${random(13, '0123456789')}-${random(64)}`, 'xapp-'],
  ['Google API key', `AIza${random(35, URL_SAFE)}`, 'AIza'],
  ['Google OAuth access token', `ya29.${random(150, URL_SAFE)}`, 'ya29.'],
  ['AWS access key id', `AKIA${random(16, UPPER)}`, 'AKIA'],
  ['AWS temporary access key id', `ASIA${random(16, UPPER)}`, 'ASIA'],
  ['npm token', `npm_${random(36)}`, 'npm_'],
  ['PyPI token', `pypi-AgEIcHlwaS5vcmc${random(70, URL_SAFE)}`, 'pypi-'],
  ['Hugging Face token', `hf_${random(34)}`, 'hf_'],
  ['JSON Web Token', `eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ${random(60, URL_SAFE)}.${random(43, URL_SAFE)}`, 'eyJ'],
];

describe('redactSecrets: tokens with a known prefix', () => {
  it.each(PREFIXED)('masks a %s and keeps its prefix', (_what, token, prefix) => {
    expect(redactSecrets(token)).toBe(`${prefix}…${REDACTION_MARK}`);
  });

  it.each(PREFIXED)('masks a %s wherever it stands in a line', (_what, token, prefix) => {
    const masked = `${prefix}…${REDACTION_MARK}`;
    const contexts: readonly [string, string][] = [
      [`KEY=${token}`, `KEY=${masked}`],
      [`{"key": "${token}"}`, `{"key": "${masked}"}`],
      [`{'key': '${token}'}`, `{'key': '${masked}'}`],
      [`use ${token}, then`, `use ${masked}, then`],
      [`(${token})`, `(${masked})`],
      [`line one\n${token}\nline three`, `line one\n${masked}\nline three`],
      [`"first\\n${token}"`, `"first\\n${masked}"`],
    ];
    for (const [text, expected] of contexts) expect(redactSecrets(text)).toBe(expected);
  });

  it('masks every token of a text, and leaves the text around them alone', () => {
    const [, first = ''] = PREFIXED[0] ?? [];
    const [, second = ''] = PREFIXED[7] ?? [];
    expect(redactSecrets(`a ${first} b ${second} c`)).toBe(`a sk-proj-…${REDACTION_MARK} b ghp_…${REDACTION_MARK} c`);
  });
});

describe('redactSecrets: credentials recognised by what stands before them', () => {
  const awsSecret = `${random(20, BASE64)}/${random(19, BASE64)}`;
  const bearer = random(40, URL_SAFE);
  const basic = Buffer.from(`deploy:${random(16)}`).toString('base64');
  const cases: readonly (readonly [string, string, string])[] = [
    [
      'an AWS credentials file',
      `[default]\naws_secret_access_key = ${awsSecret}\n`,
      `[default]\naws_secret_access_key = ${REDACTION_MARK}\n`,
    ],
    ['an AWS environment line', `AWS_SECRET_ACCESS_KEY=${awsSecret}`, `AWS_SECRET_ACCESS_KEY=${REDACTION_MARK}`],
    ['an AWS secret in JSON', `{"SecretAccessKey": "${awsSecret}"}`, `{"SecretAccessKey": "${REDACTION_MARK}"}`],
    ['a bearer header', `Authorization: Bearer ${bearer}`, `Authorization: Bearer ${REDACTION_MARK}`],
    [
      'a curl command',
      `curl -H "Authorization: Bearer ${bearer}" https://api`,
      `curl -H "Authorization: Bearer ${REDACTION_MARK}" https://api`,
    ],
    ['a basic header', `authorization: Basic ${basic}`, `authorization: Basic ${REDACTION_MARK}`],
    ['a proxy header', `Proxy-Authorization: ${bearer}`, `Proxy-Authorization: ${REDACTION_MARK}`],
    [
      'headers as a Python dict',
      `{'Authorization': 'token ${bearer}'}`,
      `{'Authorization': 'token ${REDACTION_MARK}'}`,
    ],
    ['a bearer token alone', `sent bearer ${bearer} to the API`, `sent bearer ${REDACTION_MARK} to the API`],
    [
      'a database URL',
      `postgres://app:${random(16)}@db.internal:5432/app`,
      `postgres://app:${REDACTION_MARK}@db.internal:5432/app`,
    ],
    [
      'a git URL',
      `https://user:${random(20)}@git.example.com/r.git`,
      `https://user:${REDACTION_MARK}@git.example.com/r.git`,
    ],
    [
      'a password in JSON',
      '{"password": "hunter22", "user": "bob"}',
      `{"password": "${REDACTION_MARK}", "user": "bob"}`,
    ],
    ['a password with spaces', "connect(password='correct horse battery')", `connect(password='${REDACTION_MARK}')`],
    ['a password in YAML', 'db:\n  password: s3cr3t-value\n', `db:\n  password: ${REDACTION_MARK}\n`],
    ['a client secret', `CLIENT_SECRET=${random(32)}`, `CLIENT_SECRET=${REDACTION_MARK}`],
    ['an API token variable', `export SERVICE_API_TOKEN=${random(30)}9`, `export SERVICE_API_TOKEN=${REDACTION_MARK}`],
    [
      'a token in a query string',
      `GET /feed?access_token=${random(30)}7&page=2`,
      `GET /feed?access_token=${REDACTION_MARK}&page=2`,
    ],
  ];

  it.each(cases)('masks %s', (_what, text, expected) => {
    expect(redactSecrets(text)).toBe(expected);
  });
});

describe('redactSecrets: private keys', () => {
  const body = Array.from({ length: 6 }, () => random(64, BASE64)).join('\n');

  it.each(['RSA ', 'EC ', 'OPENSSH ', 'ENCRYPTED ', ''])('masks the body of a %sPRIVATE KEY block', (kind) => {
    const block = `-----BEGIN ${kind}PRIVATE KEY-----\n${body}\n-----END ${kind}PRIVATE KEY-----`;
    expect(redactSecrets(`key:\n${block}\nafter`)).toBe(
      `key:\n-----BEGIN ${kind}PRIVATE KEY-----\n…${REDACTION_MARK}\n-----END ${kind}PRIVATE KEY-----\nafter`,
    );
  });

  it('masks an encrypted key with its headers, a PGP block, and two blocks in one text', () => {
    const encrypted = `-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,${random(32, '0123456789ABCDEF')}\n\n${body}\n-----END RSA PRIVATE KEY-----`;
    const pgp = `-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n${body}\n-----END PGP PRIVATE KEY BLOCK-----`;
    const masked = redactSecrets(`${encrypted}\nbetween\n${pgp}`);
    expect(masked).toBe(
      `-----BEGIN RSA PRIVATE KEY-----\n…${REDACTION_MARK}\n-----END RSA PRIVATE KEY-----\nbetween\n` +
        `-----BEGIN PGP PRIVATE KEY BLOCK-----\n…${REDACTION_MARK}\n-----END PGP PRIVATE KEY BLOCK-----`,
    );
  });

  it('masks to the end of the text a block without its end marker', () => {
    expect(redactSecrets(`x\n-----BEGIN PRIVATE KEY-----\n${body}`)).toBe(
      `x\n-----BEGIN PRIVATE KEY-----\n…${REDACTION_MARK}`,
    );
  });

  it('leaves public keys and certificates alone', () => {
    const certificate = `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----`;
    const publicKey = `-----BEGIN PUBLIC KEY-----\n${body}\n-----END PUBLIC KEY-----`;
    expect(redactSecrets(`${certificate}\n${publicKey}`)).toBe(`${certificate}\n${publicKey}`);
  });
});

describe('redactSecrets: what is not a secret stays as it is', () => {
  const ordinary = [
    'The quick brown fox jumps over the lazy dog. Total: 42 items, 3.5 s.',
    'commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)',
    `sha256: ${random(64, '0123456789abcdef')}`,
    'id 123e4567-e89b-12d3-a456-426614174000',
    `data: ${random(200, BASE64)}==`,
    'ask-me-anything task-runner-configuration-2024 risk-assessment-for-2025-q1-release',
    'sk-learn is a library; sk- alone; sk-short1',
    'max_tokens=4096 token_count: 12 tokens: 1500 num_tokens = 123456789',
    'password = args.password\nsecret = settings.secret_name\napi_key = os.environ["KEY"]',
    'Enter your password: please. is_secret: false. secret: True',
    'Bearer of bad news; Authorization: required; authorization: none',
    'https://example.com:8080/path?q=1&page=2 ssh://git@github.com:22/r.git mailto:bob@example.com',
    'KEYBOARD_LAYOUT=us AKIA is a prefix, AKIATOOSHORT, XAKIA1234567890ABCDEF0',
    'ghp_short gho_ xoxb- AIza eyJhbGciOi',
    `${'-'.repeat(40)}\n-----BEGIN CERTIFICATE REQUEST-----`,
  ];

  it.each(ordinary)('keeps %j', (text) => {
    expect(redactSecrets(text)).toBe(text);
  });

  it('masks nothing in masked text (redacting twice equals redacting once)', () => {
    const text = [...PREFIXED.map(([, token]) => `value: ${token}`), 'Authorization: Bearer abcdefghijklmnop1234'].join(
      '\n',
    );
    const once = redactSecrets(text);
    expect(redactSecrets(once)).toBe(once);
  });
});

describe('redactSecrets: text cut from a longer one', () => {
  it('masks a token cut short at the end of a head', () => {
    expect(redactSecrets('config: OPENAI=sk-proj-Ab3', { cutAfter: true })).toBe(
      `config: OPENAI=sk-proj-…${REDACTION_MARK}`,
    );
    expect(redactSecrets('token ghp_12', { cutAfter: true })).toBe(`token ghp_…${REDACTION_MARK}`);
    expect(redactSecrets('config: OPENAI=sk-proj-Ab3')).toBe('config: OPENAI=sk-proj-Ab3');
  });

  it('masks the shortest texts it masks at all, which are not shorter than the length it skips below', () => {
    const shortest = ['hf_x', 'sk-x', 'eyJx'];
    for (const text of shortest) {
      expect(text).toHaveLength(SHORTEST_MASKED_TEXT);
      expect(redactSecrets(text, { cutAfter: true })).toBe(`${text.slice(0, 3)}…${REDACTION_MARK}`);
    }
    expect(redactSecrets('a://b:c@')).toBe(`a://b:${REDACTION_MARK}@`);
    expect(redactSecrets('hf_', { cutAfter: true })).toBe('hf_');
  });

  it('masks the rest of a private key whose begin marker was cut off from a tail', () => {
    const tail = `${random(64, BASE64)}\n${random(30, BASE64)}\n-----END PRIVATE KEY-----\nafter`;
    expect(redactSecrets(tail, { cutBefore: true })).toBe(`${REDACTION_MARK}\n-----END PRIVATE KEY-----\nafter`);
    expect(redactSecrets(tail)).toBe(tail);
  });
});

describe('redactSecrets on hostile text (every expression linear; completes well within the test timeout)', () => {
  const MEBIBYTE = 1 << 20;
  const fill = (unit: string) => unit.repeat(Math.ceil(MEBIBYTE / unit.length)).slice(0, MEBIBYTE);
  const nearMatches: readonly (readonly [string, string])[] = [
    ['sk- prefixes with one character too few', fill(`sk-${'a'.repeat(19)} `)],
    ['one sk- token a megabyte long', `sk-${fill('a')}`],
    ['sk- repeated', fill('sk-')],
    ['ghp_ prefixes broken by an underscore', fill(`ghp_${'A'.repeat(29)}_`)],
    ['AKIA runs one character too long', fill(`AKIA${'A'.repeat(17)}`)],
    ['JWT headers without a payload', fill(`eyJ${'a'.repeat(12)}.`)],
    ['begin markers without an end', fill('-----BEGIN RSA PRIVATE KEY-----')],
    ['end markers without a begin', fill('-----END RSA PRIVATE KEY-----')],
    ['dashes', fill('-')],
    ['Authorization followed by spaces', fill(`Authorization${' '.repeat(50)}`)],
    ['Bearer followed by short words', fill(`Bearer ${'a'.repeat(15)} `)],
    ['URLs with a user and no host', fill(`a://${'b'.repeat(127)}:${'c'.repeat(255)} `)],
    ['credential names without a value', fill(`${'x'.repeat(59)}token `)],
    ['password repeated', fill('password')],
    ['unterminated quoted values', fill(`password: "${'a'.repeat(300)}`)],
    ['backslash escapes', fill('\\n')],
    ['one identifier a megabyte long', fill('a')],
  ];

  it.each(nearMatches)('%s', (_what, text) => {
    const masked = redactSecrets(text, { cutAfter: true, cutBefore: true });
    expect(typeof masked).toBe('string');
  });
});
