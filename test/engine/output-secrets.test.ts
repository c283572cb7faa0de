import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { formatResultForModel } from '../../src/engine/result/format-result.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();

// Real-looking credentials, assembled here so that none stands in the repository as a literal.
const OPENAI_KEY = `sk-proj-${'Xy7_Qz3-Lm9'.repeat(14)}`;
const GITHUB_TOKEN = `ghp_${'aB3dE6gH9jK2'.repeat(3)}`;
const AWS_KEY_ID = `AKIA${'Q7ZP4M2XK9WB3T5N'}`;
const AWS_SECRET = `${'wJa1rXUtnFEMI/K7'.repeat(2)}bPxRfiCY`;
const PRIVATE_KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${'b3BlbnNzaC1rZXktdjEAAAAA'.repeat(3)}\n-----END OPENSSH PRIVATE KEY-----`;

// Python statements that set the same credentials in the script (nothing in its source is a literal token either).
const PYTHON_SECRETS = [
  `openai_key = "sk-proj-" + ${JSON.stringify('Xy7_Qz3-Lm9')} * 14`,
  `github_token = "ghp_" + ${JSON.stringify('aB3dE6gH9jK2')} * 3`,
  `aws_key_id = "AKIA" + ${JSON.stringify('Q7ZP4M2XK9WB3T5N')}`,
  `aws_secret = ${JSON.stringify('wJa1rXUtnFEMI/K7')} * 2 + "bPxRfiCY"`,
  `private_key = "-----BEGIN OPENSSH PRIVATE KEY-----\\n" + ${JSON.stringify('b3BlbnNzaC1rZXktdjEAAAAA')} * 3 + "\\n-----END OPENSSH PRIVATE KEY-----"`,
].join('\n');

const RAW_SECRETS = [OPENAI_KEY, GITHUB_TOKEN, AWS_KEY_ID, AWS_SECRET, 'b3BlbnNzaC1rZXktdjEAAAAA'];

function expectNoSecret(text: string | undefined): void {
  for (const secret of RAW_SECRETS) expect(text ?? '').not.toContain(secret);
}

describe('secrets do not reach the model (item 10)', () => {
  const codecall = codecallWith();

  it('masks secrets in stdout, keeping what identifies them', async () => {
    const result = await codecall.execute(
      `${PYTHON_SECRETS}\nprint(f"OPENAI_API_KEY={openai_key}")\nprint({"token": github_token})\n` +
        `print(f"[default]\\naws_access_key_id = {aws_key_id}\\naws_secret_access_key = {aws_secret}")\nprint(private_key)`,
    );
    expect(result.status).toBe('success');
    expect(result.stdout).toBe(
      'OPENAI_API_KEY=sk-proj-…[REDACTED]\n' +
        "{'token': 'ghp_…[REDACTED]'}\n" +
        '[default]\naws_access_key_id = AKIA…[REDACTED]\naws_secret_access_key = [REDACTED]\n' +
        '-----BEGIN OPENSSH PRIVATE KEY-----\n…[REDACTED]\n-----END OPENSSH PRIVATE KEY-----\n',
    );
    expectNoSecret(formatResultForModel(result));
  });

  it('masks secrets in stderr', async () => {
    const result = await codecall.execute(
      `${PYTHON_SECRETS}\nimport sys\nsys.stderr.write(f"debug: Authorization: Bearer {openai_key}\\n{private_key}\\n")`,
    );
    expect(result.stderr).toBe(
      'debug: Authorization: Bearer sk-proj-…[REDACTED]\n-----BEGIN OPENSSH PRIVATE KEY-----\n…[REDACTED]\n-----END OPENSSH PRIVATE KEY-----\n',
    );
  });

  it('masks secrets in the exception message and the traceback, and in the model text', async () => {
    const result = await codecall.execute(
      `${PYTHON_SECRETS}\nraise PermissionError(f"denied for {openai_key} and " + "${GITHUB_TOKEN}")`,
    );
    expect(result.error?.type).toBe('PermissionError');
    expect(result.error?.message).toBe('denied for sk-proj-…[REDACTED] and ghp_…[REDACTED]');
    expect(result.error?.traceback).toContain(
      'raise PermissionError(f"denied for {openai_key} and " + "ghp_…[REDACTED]")',
    );
    expect(result.error?.traceback).toContain('PermissionError: denied for sk-proj-…[REDACTED] and ghp_…[REDACTED]');
    for (const text of [result.stderr, result.error?.message, result.error?.traceback, formatResultForModel(result)]) {
      expectNoSecret(text);
    }
  });

  it('masks a secret a tool returned and the script printed', async () => {
    const withTool = codecallWith({
      tools: [
        defineTool({
          name: 'read_config',
          description: 'Read the deployment configuration.',
          inputSchema: { type: 'object', properties: {}, additionalProperties: false },
          execute: async () => ({ region: 'eu-west-1', aws_secret_access_key: AWS_SECRET, api_key: OPENAI_KEY }),
        }),
      ],
    });
    const result = await withTool.execute('from tools import read_config\nprint(read_config())');
    expect(result.stdout).toBe(
      "{'region': 'eu-west-1', 'aws_secret_access_key': '[REDACTED]', 'api_key': 'sk-proj-…[REDACTED]'}\n",
    );
  });

  it('masks a key split by an escape sequence, once the sequence is removed', async () => {
    const result = await codecall.execute(`${PYTHON_SECRETS}\nprint(openai_key[:20] + "\\x1b[0m" + openai_key[20:])`);
    expect(result.stdout).toBe('sk-proj-…[REDACTED]\n');
  });

  it('masks a key cut short where long stdout was truncated, and a private key cut in two', async () => {
    const small = codecallWith({ limits: { maxStdoutBytes: 1_000 } });
    const keyAtCut = await small.execute(`${PYTHON_SECRETS}\nprint("x" * 380 + " " + openai_key + "y" * 5000)`);
    expect(keyAtCut.stdoutTruncated).toBeDefined();
    expect(keyAtCut.stdout).toContain(' sk-proj-…[REDACTED]\n[…');
    expectNoSecret(keyAtCut.stdout);
    const body = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC'.repeat(40);
    const keyAcrossCut = await small.execute(
      `print("-----BEGIN PRIVATE KEY-----\\n" + ${JSON.stringify(body)} + "\\n-----END PRIVATE KEY-----\\ndone")`,
    );
    expect(keyAcrossCut.stdout).toMatch(
      /^-----BEGIN PRIVATE KEY-----\n…\[REDACTED\]\n\[… \d+ bytes omitted[^\n]*\]\n\[REDACTED\]\n-----END PRIVATE KEY-----\ndone\n$/,
    );
  });

  it('masks secrets in a session cell', async () => {
    const session = codecall.session();
    await session.execute(PYTHON_SECRETS);
    const result = await session.execute('print(openai_key, github_token)');
    expect(result.stdout).toBe('sk-proj-…[REDACTED] ghp_…[REDACTED]\n');
    await session.close();
  });

  it('leaves ordinary output exactly as printed', async () => {
    const text = [
      'commit 3f786850e387550fdab836ed7e6dc881de23001b',
      'sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      'max_tokens=4096 ask-me-anything id 123e4567-e89b-12d3-a456-426614174000',
      'password = args.password',
    ].join('\n');
    const result = await codecall.execute(`print(${JSON.stringify(text)})`);
    expect(result.stdout).toBe(`${text}\n`);
  });
});

describe('redactSecrets: false shows what the script printed', () => {
  it('leaves secrets in stdout, stderr, the error and the model text', async () => {
    const codecall = codecallWith({ redactSecrets: false });
    const result = await codecall.execute(
      `${PYTHON_SECRETS}\nimport sys\nprint(openai_key)\nsys.stderr.write(github_token + "\\n")\nraise ValueError(aws_key_id)`,
    );
    expect(result.stdout).toBe(`${OPENAI_KEY}\n`);
    expect(result.stderr).toContain(`${GITHUB_TOKEN}\n`);
    expect(result.error?.message).toBe(AWS_KEY_ID);
    expect(result.error?.traceback).toContain(`ValueError: ${AWS_KEY_ID}`);
    expect(formatResultForModel(result)).toContain(OPENAI_KEY);
    const session = codecall.session();
    expect((await session.execute(`print(${JSON.stringify(PRIVATE_KEY)})`)).stdout).toBe(`${PRIVATE_KEY}\n`);
    await session.close();
  });

  it('refuses a value that is not a boolean', () => {
    for (const value of ['false', 0, null]) {
      expect(() => codecallWith({ redactSecrets: value as unknown as boolean })).toThrow(CodecallError);
    }
  });
});
