import { describe, expect, it } from 'vitest';
import { RAW_TEXT_MIN_CHARS, splitRawText } from '../../src/rpc/raw-text.js';
import { defineEncodedText, encodedTextOf } from '../../src/tools/encoded-text.js';

const TEXT = `é中😀 ${'x'.repeat(RAW_TEXT_MIN_CHARS)}\n`;

function encodedResult(): Record<string, unknown> {
  const result: Record<string, unknown> = { path: 'a.txt', content: '', totalLines: 1 };
  defineEncodedText(result, 'content', Buffer.from(TEXT));
  return result;
}

describe('text held as UTF-8 bytes', () => {
  it('reads, enumerates and serialises like a plain property, in its place', () => {
    const result = encodedResult();
    expect(Object.keys(result)).toEqual(['path', 'content', 'totalLines']);
    expect(JSON.stringify(result)).toBe(JSON.stringify({ path: 'a.txt', content: TEXT, totalLines: 1 }));
    expect(result).toEqual({ path: 'a.txt', content: TEXT, totalLines: 1 });
    expect({ ...result }).toEqual({ path: 'a.txt', content: TEXT, totalLines: 1 });
  });

  it('travels as its bytes without being decoded, also after it was read', () => {
    const unread = encodedResult();
    const split = splitRawText(unread);
    expect(split?.segments).toEqual([['content', Buffer.byteLength(TEXT)]]);
    expect(split?.value).toEqual({ path: 'a.txt', content: '', totalLines: 1 });
    expect(split?.bytes[0]?.toString()).toBe(TEXT);
    // Still not decoded: the property is the getter.
    expect(Object.getOwnPropertyDescriptor(unread, 'content')?.get).toBeTypeOf('function');
    const read = encodedResult();
    expect(read.content).toBe(TEXT);
    expect(encodedTextOf(read)?.key).toBe('content');
    expect(splitRawText(read)?.bytes[0]?.toString()).toBe(TEXT);
  });

  it('is forgotten once the property is given another value, which is what travels', () => {
    const assigned = encodedResult();
    assigned.content = 'short';
    expect(encodedTextOf(assigned)).toBeUndefined();
    expect(splitRawText(assigned)).toBeUndefined();
    expect(assigned).toEqual({ path: 'a.txt', content: 'short', totalLines: 1 });
    const redefined = encodedResult();
    void redefined.content;
    Object.defineProperty(redefined, 'content', { value: `${TEXT}!` });
    expect(encodedTextOf(redefined)).toBeUndefined();
    expect(splitRawText(redefined)?.bytes[0]?.toString()).toBe(`${TEXT}!`);
  });
});
