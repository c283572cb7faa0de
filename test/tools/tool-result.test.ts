import { describe, expect, it } from 'vitest';
import { describeThrownValue, serializeToolResult, ToolResultError } from '../../src/tools/tool-result.js';

function refusal(value: unknown): ToolResultError {
  try {
    serializeToolResult('add', value);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolResultError);
    return error as ToolResultError;
  }
  throw new Error('expected a ToolResultError');
}

describe('serializeToolResult', () => {
  it.each([
    [3, '3'],
    ['text', '"text"'],
    [null, 'null'],
    [true, 'true'],
    [{ a: [1, 'b', null], c: { d: false } }, '{"a":[1,"b",null],"c":{"d":false}}'],
    [[], '[]'],
    [{}, '{}'],
    ['\u2028"\\\n', JSON.stringify('\u2028"\\\n')],
  ])('writes %j exactly as JSON.stringify does', (value, expected) => {
    expect(serializeToolResult('add', value)).toBe(expected);
    expect(serializeToolResult('add', value)).toBe(JSON.stringify(value));
  });

  it('turns undefined into null', () => {
    expect(serializeToolResult('add', undefined)).toBe('null');
  });

  it('follows JSON for undefined inside: dropped from objects, null in arrays', () => {
    expect(serializeToolResult('add', { a: undefined, b: 1 })).toBe('{"b":1}');
    expect(serializeToolResult('add', [undefined, 1])).toBe('[null,1]');
  });

  it('honours toJSON (Date, Buffer, custom) and unboxes primitives', () => {
    const date = new Date(Date.UTC(2024, 0, 2));
    const value = {
      date,
      buffer: Buffer.from('hi'),
      custom: { toJSON: (key: string) => `key:${key}` },
      boxed: [Object(1), Object('s'), Object(false)],
    };
    expect(serializeToolResult('add', value)).toBe(JSON.stringify(value));
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };
    expect(serializeToolResult('add', { a: shared, b: [shared, shared] })).toBe('{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });

  it('keeps an own __proto__ key as data', () => {
    const value = JSON.parse('{"__proto__":{"admin":true}}') as unknown;
    expect(serializeToolResult('add', value)).toBe('{"__proto__":{"admin":true}}');
  });

  it('writes a result nested 100,000 deep without overflowing the stack', () => {
    let value: unknown = 1;
    for (let level = 0; level < 100_000; level += 1) value = [value];
    expect(serializeToolResult('add', value)).toBe(`${'['.repeat(100_000)}1${']'.repeat(100_000)}`);
  });

  it('writes exactly what JSON.stringify writes when the careful writer takes over', () => {
    // The toJSON fails once: the fast path gives up and the iterative writer produces the text.
    let calls = 0;
    const flaky = {
      toJSON: () => {
        calls += 1;
        if (calls === 1) throw new Error('first call fails');
        return { recovered: true };
      },
    };
    const value = JSON.parse('{"__proto__":1}') as Record<string, unknown>;
    Object.assign(value, {
      a: [1, undefined, 'x\n"', { b: null, c: undefined, d: new Date(0), e: Object(2), f: Object('s') }],
      flaky,
      empty: { inner: [] },
      [Symbol('hidden')]: 1,
    });
    const text = serializeToolResult('add', value);
    expect(calls).toBe(2);
    expect(text).toBe(JSON.stringify(value));
  });

  it.each([
    [{ total: 10n }, 'add returned a BigInt at /total, which cannot be sent as JSON; return a number or string'],
    [5n, 'add returned a BigInt at the top level, which cannot be sent as JSON; return a number or string'],
    [
      { values: [1, Number.NaN] },
      'add returned NaN at /values/1, which cannot be sent as JSON; return a number, null or a string',
    ],
    [
      { x: Number.POSITIVE_INFINITY },
      'add returned Infinity at /x, which cannot be sent as JSON; return a number, null or a string',
    ],
    [
      [Number.NEGATIVE_INFINITY],
      'add returned -Infinity at /0, which cannot be sent as JSON; return a number, null or a string',
    ],
    [
      { run: () => 1 },
      'add returned a function at /run, which cannot be sent as JSON; return plain data (call it, or leave it out)',
    ],
    [{ id: Symbol('x') }, 'add returned a symbol at /id, which cannot be sent as JSON; return a string'],
    [
      { 'a/b~c': new Map() },
      'add returned a Map at /a~1b~0c, which cannot be sent as JSON; return a plain object (Object.fromEntries(map)) or an array',
    ],
    [{ s: new Set([1]) }, 'add returned a Set at /s, which cannot be sent as JSON; return an array ([...set])'],
    [
      { p: Promise.resolve(1) },
      'add returned a Promise at /p, which cannot be sent as JSON; await it before returning',
    ],
    [
      { error: new Error('x') },
      'add returned an Error at /error, which cannot be sent as JSON; throw it, or return its message as a string',
    ],
    [
      { bytes: new Uint8Array(2) },
      'add returned binary data at /bytes, which cannot be sent as JSON; return a string (e.g. base64) or an array of numbers',
    ],
  ])('refuses %s', (value, message) => {
    const error = refusal(value);
    expect(error.message).toBe(message);
    expect(error.toolName).toBe('add');
  });

  it('refuses a circular structure, naming where', () => {
    const value: Record<string, unknown> = { a: { list: [] as unknown[] } };
    ((value.a as Record<string, unknown>).list as unknown[]).push(value.a);
    const error = refusal(value);
    expect(error.message).toBe(
      'add returned a circular structure at /a/list/0 (an object that contains itself), which cannot be sent as JSON; return a copy without the cycle',
    );
    expect(error.pointer).toBe('/a/list/0');
  });

  it('reports a getter or toJSON that throws', () => {
    const getter = {
      get broken(): never {
        throw new Error('nope');
      },
    };
    expect(refusal(getter).message).toBe(
      'add returned a value whose property at /broken could not be read (nope); return plain data',
    );
    expect(
      refusal({
        x: {
          toJSON() {
            throw new Error('bad');
          },
        },
      }).message,
    ).toBe('add returned a value at /x whose toJSON() threw (bad); return plain data');
  });

  it('reports a throwing Proxy cleanly', () => {
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
      },
    );
    expect(refusal({ p: proxy }).message).toBe(
      'add returned a value that cannot be sent as JSON (trap); return plain data',
    );
  });
});

describe('describeThrownValue', () => {
  it('uses an Error message without the stack', () => {
    const error = new TypeError('bad input');
    expect(describeThrownValue(error)).toBe('bad input');
    expect(describeThrownValue(error)).not.toContain('at ');
  });

  it('adds the cause of an Error', () => {
    expect(describeThrownValue(new Error('fetch failed', { cause: new Error('getaddrinfo ENOTFOUND x') }))).toBe(
      'fetch failed (cause: getaddrinfo ENOTFOUND x)',
    );
  });

  it('falls back to the name of an Error without a message', () => {
    expect(describeThrownValue(new RangeError())).toBe('RangeError');
  });

  it.each([
    ['disk full', 'disk full'],
    ['', 'the tool failed with an empty message'],
    [undefined, 'the tool failed without a message (it threw undefined)'],
    [null, 'the tool failed without a message (it threw null)'],
    [42, 'the tool failed with a non-Error value: 42'],
    [{ message: 'shaped like an error' }, 'shaped like an error'],
    [{ code: 7 }, 'the tool failed with a non-Error value: {"code":7}'],
    [Symbol('s'), 'the tool failed with a non-Error value: Symbol(s)'],
  ])('describes a thrown %j', (thrown, expected) => {
    expect(describeThrownValue(thrown)).toBe(expected);
  });

  it('never throws, even for hostile values', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(describeThrownValue(circular)).toBe('the tool failed with a non-Error value: [object Object]');
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    expect(describeThrownValue(revoked.proxy)).toBe('the tool failed with a value that cannot be described');
    expect(describeThrownValue({ message: 'x'.repeat(5) })).toBe('xxxxx');
    expect(describeThrownValue({ big: 'y'.repeat(5_000) })).toHaveLength(
      'the tool failed with a non-Error value: '.length + 1_000 + 1,
    );
  });
});
