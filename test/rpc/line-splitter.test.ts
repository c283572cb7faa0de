import { describe, expect, it } from 'vitest';
import { MAX_JSON_NESTING_DEPTH } from '../../src/core/json-nesting.js';
import { LineSplitter } from '../../src/rpc/line-splitter.js';

/** What a splitter reported, in order: frames as text, oversized frames as `{ oversized: limit }`. */
type Event = string | { readonly oversized: number } | { readonly tooDeep: number };

function createSplitter(maxFrameBytes: number): { splitter: LineSplitter; events: Event[] } {
  const events: Event[] = [];
  const splitter = new LineSplitter(
    { maxFrameBytes, maxNestingDepth: MAX_JSON_NESTING_DEPTH },
    {
      line: (line) => events.push(line),
      oversized: (limit) => events.push({ oversized: limit }),
      tooDeep: (limit) => events.push({ tooDeep: limit }),
    },
  );
  return { splitter, events };
}

/** Feeds `text` (or bytes) as one chunk. */
function push(splitter: LineSplitter, chunk: string | Buffer): void {
  splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
}

describe('LineSplitter', () => {
  it('reports nothing until a newline arrives', () => {
    const { splitter, events } = createSplitter(1_024);
    push(splitter, '{"id":1}');
    expect(events).toEqual([]);
    push(splitter, '\n');
    expect(events).toEqual(['{"id":1}']);
  });

  it('splits several frames out of one chunk and keeps the unfinished rest for the next', () => {
    const { splitter, events } = createSplitter(1_024);
    push(splitter, 'one\ntwo\nthr');
    expect(events).toEqual(['one', 'two']);
    push(splitter, 'ee\nfour\n');
    expect(events).toEqual(['one', 'two', 'three', 'four']);
  });

  it('joins a frame split across many chunks, down to one byte each', () => {
    const { splitter, events } = createSplitter(1_024);
    for (const byte of Buffer.from('{"id":7,"method":"add"}\n')) splitter.push(Buffer.of(byte));
    expect(events).toEqual(['{"id":7,"method":"add"}']);
  });

  it('skips empty lines and keeps a carriage return as part of its frame', () => {
    const { splitter, events } = createSplitter(1_024);
    push(splitter, '\n\none\n\n');
    push(splitter, '\ntwo\r\n');
    push(splitter, 'thr');
    push(splitter, 'ee\r');
    push(splitter, '\n\n');
    expect(events).toEqual(['one', 'two\r', 'three\r']);
  });

  it('decodes a multi-byte UTF-8 character split across chunks', () => {
    const { splitter, events } = createSplitter(1_024);
    const bytes = Buffer.from('"€ and 😀"\n');
    // Cut inside the three bytes of € and inside the four bytes of 😀.
    const cuts = [2, 3, 10, 12, bytes.length];
    let start = 0;
    for (const cut of cuts) {
      splitter.push(bytes.subarray(start, cut));
      start = cut;
    }
    expect(events).toEqual(['"€ and 😀"']);
  });

  it('decodes invalid UTF-8 as U+FFFD instead of failing', () => {
    const { splitter, events } = createSplitter(1_024);
    splitter.push(Buffer.from([0x61, 0xff, 0xfe, 0x62, 0x0a, 0xe2, 0x82]));
    splitter.push(Buffer.from([0x0a]));
    expect(events).toEqual(['a\uFFFD\uFFFDb', '\uFFFD']);
  });

  it('accepts a frame of exactly the limit, newline included, in one chunk or in pieces', () => {
    const { splitter, events } = createSplitter(8);
    push(splitter, '1234567\n');
    push(splitter, '123');
    push(splitter, '4567\n');
    expect(events).toEqual(['1234567', '1234567']);
  });

  it('drops a frame one byte over the limit, whole in one chunk, and goes on with the next', () => {
    const { splitter, events } = createSplitter(8);
    push(splitter, '12345678\nnext\n');
    expect(events).toEqual([{ oversized: 8 }, 'next']);
  });

  it('drops a frame that grows over the limit across chunks once its newline arrives', () => {
    const { splitter, events } = createSplitter(8);
    push(splitter, '1234');
    push(splitter, '5678\nnext\n');
    expect(events).toEqual([{ oversized: 8 }, 'next']);
  });

  it('reports an oversized frame as soon as it passes the limit, before its end arrives', () => {
    const { splitter, events } = createSplitter(8);
    push(splitter, '1234');
    expect(events).toEqual([]);
    push(splitter, '5678');
    expect(events).toEqual([{ oversized: 8 }]);
  });

  it('discards an endless frame as it streams in, reports it once, and resyncs at its newline', () => {
    const maxFrameBytes = 1 << 20;
    const { splitter, events } = createSplitter(maxFrameBytes);
    push(splitter, 'before\n');
    // 64 MiB with no newline, in one reused 1 MiB chunk: a splitter buffering the frame would hold all of it.
    const chunk = Buffer.alloc(1 << 20, 0x78);
    for (let index = 0; index < 64; index += 1) splitter.push(chunk);
    expect(events).toEqual(['before', { oversized: maxFrameBytes }]);
    // The frame's end, then the next frame, in the same chunk.
    push(splitter, 'xxx\n{"id":2}\n');
    expect(events).toEqual(['before', { oversized: maxFrameBytes }, '{"id":2}']);
  });

  it('resyncs when the oversized frame ends at the very start of a chunk', () => {
    const { splitter, events } = createSplitter(4);
    push(splitter, 'abcdefgh');
    push(splitter, '\nok\n');
    expect(events).toEqual([{ oversized: 4 }, 'ok']);
  });

  it('reports each oversized frame of a run of them', () => {
    const { splitter, events } = createSplitter(4);
    push(splitter, 'aaaaaa\nbbbbbbbbbb');
    push(splitter, 'bbbbbb\ncccccc\nok\n');
    expect(events).toEqual([{ oversized: 4 }, { oversized: 4 }, { oversized: 4 }, 'ok']);
  });

  it('does not let the bytes of a dropped frame leak into the next one', () => {
    const { splitter, events } = createSplitter(6);
    push(splitter, 'abc');
    push(splitter, 'defghij\n');
    push(splitter, 'kl');
    push(splitter, 'm\n');
    expect(events).toEqual([{ oversized: 6 }, 'klm']);
  });
});
