import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const stateDir = mkdtempSync(join(tmpdir(), 'codecall-cli-hygiene-'));
const rawChannel = readFileSync(new URL('../fixtures/raw_channel.py', import.meta.url), 'utf8');

// A byte a terminal acts on: ESC, BEL, CR, the other C0 controls but tab and newline, DEL, and the C1 controls
// however they arrive (as bytes 0x80-0x9f, or UTF-8 encoded as 0xc2 0x80-0x9f).
function terminalControls(output: Buffer): string[] {
  const found: string[] = [];
  for (let index = 0; index < output.length; index += 1) {
    const byte = output[index] ?? 0;
    const next = output[index + 1] ?? 0;
    if ((byte < 0x20 && byte !== 0x09 && byte !== 0x0a) || byte === 0x7f) found.push(`0x${byte.toString(16)}`);
    if (byte === 0xc2 && next >= 0x80 && next <= 0x9f) found.push(`U+00${next.toString(16)}`);
  }
  return found;
}

interface Completed {
  readonly status: number | null;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
}

function codecall(args: readonly string[], input = ''): Promise<Completed> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: stateDir,
      env: { ...process.env, TMPDIR: stateDir },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr) }));
    child.stdin.end(input);
  });
}

// Every way a script can put terminal controls in its exception: the message (str of the exception), the source line
// the traceback quotes, and the type name.
const HOSTILE_SCRIPTS: readonly (readonly [string, string])[] = [
  ['a screen clear in the message', "raise ValueError('\\x1b[2J\\x1b[3J\\x1b[Hcleared')"],
  ['a clipboard write in the message', "raise ValueError('\\x1b]52;c;ZXZpbA==\\x07copied')"],
  ['hidden text and a carriage return', "raise ValueError('shown\\x1b[8mhidden\\x1b[0m\\rover')"],
  ['C1 controls in the message', "raise ValueError('\\x9b2J\\x9d0;t\\x9c\\x85')"],
  ['controls in the quoted source line', 'raise KeyError(1)  # \x1b]52;c;ZXZpbA==\x07 \x1b[2J \u009b31m \r'],
  ['controls in the type name', "raise type('Bad\\x1b[2J\\x9b31mError', (Exception,), {})('boom\\x07')"],
  [
    'a forged $exception frame',
    `${rawChannel}\nimport sys\nsend(json.dumps({"method": "$exception", "params": {"type": "E\\x1b[2J\\n\\x9b", "message": "\\x1b]52;c;eA==\\x07", "traceback": "\\x1b[2J\\r\\x85"}}).encode() + b"\\n")\ncall({"id": 1, "method": "nope", "params": {}})\nsys.exit(1)`,
  ],
];

describe('codecall run prints no terminal control the script wrote (item 9)', () => {
  it.each(HOSTILE_SCRIPTS)('model text: %s', async (_what, script) => {
    const result = await codecall(['run', '--sandbox', 'none', '-'], script);
    expect(result.status).toBe(1);
    expect(result.stdout.toString()).toContain('[status: error]');
    expect(terminalControls(result.stdout)).toEqual([]);
    expect(terminalControls(result.stderr)).toEqual([]);
  });

  it.each(HOSTILE_SCRIPTS)('--json: %s', async (_what, script) => {
    const result = await codecall(['run', '--sandbox', 'none', '--json', '-'], script);
    expect(result.status).toBe(1);
    expect(terminalControls(result.stdout)).toEqual([]);
    expect(JSON.parse(result.stdout.toString())).toMatchObject({ status: 'error' });
  });

  it('prints a bounded text for a 5 MiB forged exception and a 5 MB real one', async () => {
    const forged = `${rawChannel}\nimport sys\nsend(json.dumps({"method": "$exception", "params": {"type": "E", "message": "\\x1b[2J" * (1 << 20)}}).encode() + b"\\n")\ncall({"id": 1, "method": "nope", "params": {}})\nsys.exit(1)`;
    const real = "raise ValueError('\\x1b]52;c;' + 'x' * 5_000_000 + '\\x07')";
    for (const script of [forged, real]) {
      for (const json of [false, true]) {
        const result = await codecall(['run', '--sandbox', 'none', ...(json ? ['--json'] : []), '-'], script);
        expect(result.status).toBe(1);
        expect(result.stdout.length).toBeLessThan(json ? 40_000 : 20_000);
        expect(terminalControls(result.stdout)).toEqual([]);
      }
    }
  });

  it('cleans what it prints on stderr about a script path or a configuration', async () => {
    const badPath = await codecall(['run', '--sandbox', 'none', '/nonexistent/\x1b]52;c;eA==\x07\x1b[2J.py']);
    expect(badPath.status).toBe(2);
    expect(badPath.stderr.toString()).toContain('cannot read script');
    expect(terminalControls(badPath.stderr)).toEqual([]);
    const config = join(stateDir, 'bad.json');
    writeFileSync(config, JSON.stringify({ sandbox: '\x1b[2J\u009b31m' }));
    const badConfig = await codecall(['run', '--config', config, '-'], 'print(1)');
    expect(badConfig.status).toBe(2);
    expect(badConfig.stderr.toString()).toContain('sandbox must be one of');
    expect(terminalControls(badConfig.stderr)).toEqual([]);
  });
});

describe('codecall run masks secrets unless told not to (item 10)', () => {
  const script =
    'import sys\nkey = "sk-proj-" + "Ab3_Xy9-Qz7" * 12\nprint("OPENAI_API_KEY=" + key)\n' +
    'sys.stderr.write("token ghp_" + "aB3dE6gH9jK2" * 3 + "\\n")\nraise RuntimeError("leaked " + key)';
  const key = `sk-proj-${'Ab3_Xy9-Qz7'.repeat(12)}`;

  it('masks them in the model text and in --json', async () => {
    const text = await codecall(['run', '--sandbox', 'none', '-'], script);
    expect(text.stdout.toString()).toContain('OPENAI_API_KEY=sk-proj-…[REDACTED]\n');
    expect(text.stdout.toString()).toContain('RuntimeError: leaked sk-proj-…[REDACTED]');
    expect(text.stdout.toString()).not.toContain(key);
    const json = await codecall(['run', '--sandbox', 'none', '--json', '-'], script);
    const result = JSON.parse(json.stdout.toString());
    expect(result.stderr).toContain('token ghp_…[REDACTED]');
    expect(json.stdout.toString()).not.toContain(key);
    expect(json.stdout.toString()).not.toContain('aB3dE6gH9jK2aB3dE6gH9jK2');
  });

  it('shows them with "redactSecrets": false in codecall.json', async () => {
    const config = join(stateDir, 'unmasked.json');
    writeFileSync(config, JSON.stringify({ sandbox: 'none', redactSecrets: false }));
    const result = await codecall(['run', '--config', config, '-'], script);
    expect(result.stdout.toString()).toContain(`OPENAI_API_KEY=${key}\n`);
    expect(result.stdout.toString()).toContain(`RuntimeError: leaked ${key}`);
  });
});
