import { describe, expect, it } from 'vitest';
import { escapeDocstringText, pythonStringLiteral, toPythonLiteral } from '../../src/codegen/python-literals.js';

describe('pythonStringLiteral', () => {
  it('double-quotes plain text as is', () => {
    expect(pythonStringLiteral('read_file')).toBe('"read_file"');
    expect(pythonStringLiteral("it's")).toBe('"it\'s"');
  });

  it('escapes backslashes, quotes and control characters', () => {
    expect(pythonStringLiteral('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(pythonStringLiteral('line\nnext\r\t\0')).toBe('"line\\nnext\\r\\t\\x00"');
    expect(pythonStringLiteral('\u202eevil\u2028')).toBe('"\\u202eevil\\u2028"');
  });

  it('keeps printable non-ASCII text and escapes lone surrogates', () => {
    expect(pythonStringLiteral('café 日本')).toBe('"café 日本"');
    expect(pythonStringLiteral('\ud800x')).toBe('"\\ud800x"');
  });
});

describe('toPythonLiteral', () => {
  it('renders JSON values as Python literals', () => {
    expect(toPythonLiteral(null)).toBe('None');
    expect(toPythonLiteral(true)).toBe('True');
    expect(toPythonLiteral(false)).toBe('False');
    expect(toPythonLiteral(10)).toBe('10');
    expect(toPythonLiteral(-0.5)).toBe('-0.5');
    expect(toPythonLiteral(1e21)).toBe('1e+21');
    expect(toPythonLiteral('x')).toBe('"x"');
    expect(toPythonLiteral([1, 'a', null])).toBe('[1, "a", None]');
    expect(toPythonLiteral({ a: { b: [true] }, 'c-d': 1.5 })).toBe('{"a": {"b": [True]}, "c-d": 1.5}');
    expect(toPythonLiteral([])).toBe('[]');
    expect(toPythonLiteral({})).toBe('{}');
  });

  it('refuses what JSON cannot hold', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(toPythonLiteral(undefined)).toBeUndefined();
    expect(toPythonLiteral(Number.NaN)).toBeUndefined();
    expect(toPythonLiteral(Number.POSITIVE_INFINITY)).toBeUndefined();
    expect(toPythonLiteral(10n)).toBeUndefined();
    expect(toPythonLiteral(() => 1)).toBeUndefined();
    expect(toPythonLiteral(new Date(0))).toBeUndefined();
    expect(toPythonLiteral([1, undefined])).toBeUndefined();
    expect(toPythonLiteral(cyclic)).toBeUndefined();
  });

  it('accepts a value shared twice (not a cycle)', () => {
    const shared = [1];
    expect(toPythonLiteral({ a: shared, b: shared })).toBe('{"a": [1], "b": [1]}');
  });
});

describe('escapeDocstringText', () => {
  it('doubles backslashes and breaks up triple quotes', () => {
    expect(escapeDocstringText('a """b""" c\\d')).toBe('a ""\\"b""\\" c\\\\d');
    expect(escapeDocstringText('ends with "')).toBe('ends with \\"');
    expect(escapeDocstringText('""""')).toBe('""\\"\\"');
  });

  it('normalises line ends and escapes characters unsafe in source', () => {
    expect(escapeDocstringText('a\r\nb\rc\td')).toBe('a\nb\nc\td');
    expect(escapeDocstringText('nul\0 bidi\u202e')).toBe('nul\\x00 bidi\\u202e');
    expect(escapeDocstringText('lone \udc00')).toBe('lone \ufffd');
  });
});
