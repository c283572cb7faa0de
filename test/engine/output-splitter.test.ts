import { describe, expect, it } from 'vitest';
import { OutputSplitter } from '../../src/engine/supervise/output-splitter.js';
import { outputEndMarker } from '../../src/rpc/protocol.js';

function recorder() {
  const events: string[] = [];
  const splitter = new OutputSplitter({
    output: (chunk) => events.push(`output:${chunk.toString('latin1')}`),
    outside: (chunk) => events.push(`outside:${chunk.toString('latin1')}`),
    ended: () => events.push('ended'),
  });
  return { events, splitter };
}

const outputOf = (events: readonly string[]) =>
  events
    .filter((event) => event.startsWith('output:'))
    .map((event) => event.slice('output:'.length))
    .join('');

const ending = (nonce: string, text: string) => Buffer.concat([Buffer.from(text, 'latin1'), outputEndMarker(nonce)]);

describe('splitting session output into cells', () => {
  it('gives a cell what comes after it starts, up to its end marker; the rest is outside any cell', () => {
    const { events, splitter } = recorder();
    splitter.push(Buffer.from('idle '));
    splitter.expect('a1');
    splitter.push(Buffer.concat([ending('a1', 'inside'), Buffer.from(' after')]));
    splitter.push(Buffer.from('later'));
    expect(events).toEqual(['outside:idle ', 'output:inside', 'ended', 'outside: after', 'outside:later']);
  });

  it('finds a marker split across reads of one reused buffer, which each read overwrites', () => {
    const { events, splitter } = recorder();
    splitter.expect('r1');
    const bytes = ending('r1', 'text');
    const reused = Buffer.alloc(bytes.length);
    // The text and half the marker, then the other half, both landing at the start of the same buffer.
    const half = 4 + Math.floor((bytes.length - 4) / 2);
    for (const [start, end] of [
      [0, half],
      [half, bytes.length],
    ] as const) {
      const length = bytes.copy(reused, 0, start, end);
      splitter.push(reused.subarray(0, length));
    }
    expect(outputOf(events)).toBe('text');
    expect(events.filter((event) => event === 'ended')).toHaveLength(1);
  });

  it('finds a marker split across chunks, one byte at a time', () => {
    const { events, splitter } = recorder();
    splitter.expect('b2');
    for (const byte of ending('b2', 'xy')) splitter.push(Buffer.from([byte]));
    expect(outputOf(events)).toBe('xy');
    expect(events.filter((event) => event === 'ended')).toHaveLength(1);
  });

  it('ignores the marker of another cell and a replayed one', () => {
    const { events, splitter } = recorder();
    splitter.expect('c3');
    splitter.push(ending('zz', 'forged'));
    splitter.push(ending('c3', 'real'));
    splitter.push(ending('c3', 'replayed'));
    expect(outputOf(events)).toBe(`forged${outputEndMarker('zz').toString('latin1')}real`);
    expect(events.filter((event) => event === 'ended')).toHaveLength(1);
  });

  it('gives a held-back partial marker to the cell when the stream ends', () => {
    const { events, splitter } = recorder();
    splitter.expect('d4');
    splitter.push(Buffer.from('text\0codecall'));
    splitter.flush();
    expect(outputOf(events)).toBe('text\0codecall');
  });

  it('starts each cell afresh', () => {
    const { events, splitter } = recorder();
    splitter.expect('e5');
    splitter.push(ending('e5', 'first'));
    splitter.push(Buffer.from('between'));
    splitter.expect('e6');
    splitter.push(ending('e6', 'second'));
    expect(events).toEqual(['output:first', 'ended', 'outside:between', 'output:second', 'ended']);
  });
});
