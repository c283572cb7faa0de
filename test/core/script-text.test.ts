import { describe, expect, it } from 'vitest';
import {
  boundScriptText,
  cleanErrorType,
  cleanScriptError,
  DEFAULT_ERROR_TYPE,
  MAX_ERROR_TYPE_CHARACTERS,
} from '../../src/core/script-text.js';
import { boundText } from '../../src/core/text-truncation.js';

// No byte a terminal acts on: ESC, BEL, CR, other C0 controls but tab and newline, DEL, C1.
const TERMINAL_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

describe('boundText', () => {
  it('keeps a text that fits, whatever its characters', () => {
    expect(boundText('héllo ✓', 10)).toEqual({ truncated: false, text: 'héllo ✓' });
  });

  it('keeps 40 % head and 60 % tail, never cutting a character', () => {
    const text = `${'é'.repeat(1000)}${'✓'.repeat(1000)}`;
    const bounded = boundText(text, 101);
    expect(bounded.truncated).toBe(true);
    if (!bounded.truncated) return;
    expect(bounded.head).toBe('é'.repeat(20));
    expect(bounded.tail).toBe('✓'.repeat(20));
    expect(bounded).toMatchObject({ headBytes: 40, tailBytes: 60, totalBytes: 5000 });
  });
});

describe('boundScriptText', () => {
  it('bounds megabytes of text to the budget with a notice of what was left out', () => {
    const text = `start ${'x'.repeat(5 << 20)} end`;
    const bounded = boundScriptText(text, { maxBytes: 10_000, redactSecrets: true });
    expect(bounded.startsWith('start xxx')).toBe(true);
    expect(bounded.endsWith('xxx end')).toBe(true);
    expect(bounded).toContain(
      `[… ${Buffer.byteLength(text) - 10_000} bytes omitted: kept the first 4000 and the last 6000 of ${Buffer.byteLength(text)} bytes …]`,
    );
    expect(Buffer.byteLength(bounded)).toBeLessThan(10_200);
  });

  it('removes escape sequences and writes control characters visibly, in the head and in the tail', () => {
    const hostile = '\x1b[2J\x1b]52;c;ZXZpbA==\x07\x1b]0;title\x1b\\\x9b31m\rhidden\x00\x7f';
    for (const text of [hostile, `${hostile}${'y'.repeat(50_000)}${hostile}`]) {
      const bounded = boundScriptText(text, { maxBytes: 1_000, redactSecrets: false });
      expect(bounded).not.toMatch(TERMINAL_CONTROL);
      expect(bounded).toContain('\\x9b31m\nhidden\\x00\\x7f');
    }
  });

  it('leaves no half escape sequence where the text was cut', () => {
    const text = `${'a'.repeat(398)}\x1b]52;c;${'Z'.repeat(10_000)}\x07tail`;
    const bounded = boundScriptText(text, { maxBytes: 1_000, redactSecrets: false });
    expect(bounded).not.toMatch(TERMINAL_CONTROL);
    expect(bounded.startsWith(`${'a'.repeat(398)}\n[…`)).toBe(true);
  });

  it('masks secrets when asked, including one cut short by the bound', () => {
    const key = `sk-proj-${'A1b2C3d4'.repeat(10)}`;
    const text = `${'x'.repeat(3_980)} ${key}${'y'.repeat(20_000)}`;
    expect(boundScriptText(text, { maxBytes: 10_000, redactSecrets: true })).toContain(
      `${'x'.repeat(10)} sk-proj-…[REDACTED]\n[…`,
    );
    expect(boundScriptText(`key=${key}`, { maxBytes: 10_000, redactSecrets: false })).toBe(`key=${key}`);
  });
});

describe('cleanErrorType', () => {
  it('keeps a real type name', () => {
    expect(cleanErrorType('KeyError', { redactSecrets: true })).toBe('KeyError');
    expect(cleanErrorType('json.decoder.JSONDecodeError', { redactSecrets: true })).toBe(
      'json.decoder.JSONDecodeError',
    );
    expect(cleanErrorType('ÉchecError', { redactSecrets: true })).toBe('ÉchecError');
  });

  it.each([
    ['a megabyte of name', 'E'.repeat(1 << 20)],
    ['a megabyte of escapes', '\x1b[2J'.repeat(1 << 18)],
    ['a megabyte of multi-byte characters', '✓'.repeat(1 << 20)],
    ['a megabyte of astral characters', '😀'.repeat(1 << 19)],
  ])('makes %s short', (_what, type) => {
    const clean = cleanErrorType(type, { redactSecrets: true });
    expect(Array.from(clean).length).toBeLessThanOrEqual(MAX_ERROR_TYPE_CHARACTERS + 1);
    expect(clean).not.toMatch(TERMINAL_CONTROL);
    expect(clean).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });

  it.each([
    ['a screen clear', 'Key\x1b[2JError', 'KeyError'],
    ['a clipboard write', 'ValueError\x1b]52;c;ZXZpbA==\x07', 'ValueError'],
    ['a forged second line', 'Error\n[status: success]\nok', 'Error [status: success] ok'],
    ['a carriage return', 'Harmless\rDangerous', 'Harmless Dangerous'],
    ['C1 controls', 'Err\x9b2J\x85or', 'Err\\x9b2J\\x85or'],
    ['only whitespace', ' \n\t ', DEFAULT_ERROR_TYPE],
    ['nothing', '', DEFAULT_ERROR_TYPE],
  ])('cleans a type with %s', (_what, type, expected) => {
    expect(cleanErrorType(type, { redactSecrets: true })).toBe(expected);
  });
});

describe('cleanScriptError', () => {
  it('bounds the message and the traceback each, and cleans the type', () => {
    const error = cleanScriptError(
      { type: 'T\x1b[31m', message: 'm'.repeat(1 << 20), traceback: `Traceback\n${'t'.repeat(1 << 20)}` },
      { maxBytes: 2_000, redactSecrets: true },
    );
    expect(error.type).toBe('T');
    expect(Buffer.byteLength(error.message)).toBeLessThan(2_200);
    expect(Buffer.byteLength(error.traceback ?? '')).toBeLessThan(2_200);
    expect(error.traceback?.startsWith('Traceback\nttt')).toBe(true);
  });

  it('keeps an absent traceback absent', () => {
    expect(cleanScriptError({ type: 'E', message: 'm' }, { maxBytes: 100, redactSecrets: true })).toEqual({
      type: 'E',
      message: 'm',
    });
  });
});
