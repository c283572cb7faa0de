import { describe, expect, it } from 'vitest';
import { CellOutputSplitter, cellMarkers } from '../../src/engine/cell-output.js';

function recorder() {
  const events: string[] = [];
  const splitter = new CellOutputSplitter({
    began: () => events.push('began'),
    output: (chunk) => events.push(`output:${chunk.toString('latin1')}`),
    outside: (chunk) => events.push(`outside:${chunk.toString('latin1')}`),
    ended: () => events.push('ended'),
  });
  return { events, splitter };
}

function cell(nonce: string, text: string): Buffer {
  const { begin, end } = cellMarkers(nonce);
  return Buffer.concat([begin, Buffer.from(text, 'latin1'), end]);
}

describe('splitting session output into cells', () => {
  it('keeps what lies between the markers and reports what lies outside', () => {
    const { events, splitter } = recorder();
    splitter.expect('a1');
    splitter.push(Buffer.concat([Buffer.from('idle '), cell('a1', 'inside'), Buffer.from(' after')]));
    expect(events).toEqual(['outside:idle ', 'began', 'output:inside', 'ended', 'outside: after']);
  });

  it('finds markers split across chunks, one byte at a time', () => {
    const { events, splitter } = recorder();
    splitter.expect('b2');
    for (const byte of cell('b2', 'xy')) splitter.push(Buffer.from([byte]));
    expect(events.filter((event) => !event.startsWith('output:'))).toEqual(['began', 'ended']);
    const output = events
      .filter((event) => event.startsWith('output:'))
      .map((event) => event.slice('output:'.length))
      .join('');
    expect(output).toBe('xy');
  });

  it('ignores markers of another cell and a replayed begin marker', () => {
    const { events, splitter } = recorder();
    splitter.expect('c3');
    splitter.push(cell('zz', 'forged'));
    splitter.push(cell('c3', 'real'));
    splitter.push(cell('c3', 'replayed'));
    expect(events.filter((event) => event.startsWith('output:'))).toEqual(['output:real']);
    expect(events.filter((event) => event === 'ended')).toHaveLength(1);
  });

  it('gives a held-back partial marker to the cell when the stream ends', () => {
    const { events, splitter } = recorder();
    splitter.expect('d4');
    const { begin } = cellMarkers('d4');
    splitter.push(Buffer.concat([begin, Buffer.from('text\0codecall')]));
    splitter.flush();
    const output = events
      .filter((event) => event.startsWith('output:'))
      .map((event) => event.slice('output:'.length))
      .join('');
    expect(output).toBe('text\0codecall');
  });

  it('starts each cell afresh', () => {
    const { events, splitter } = recorder();
    splitter.expect('e5');
    splitter.push(cell('e5', 'first'));
    splitter.expect('e6');
    splitter.push(Buffer.concat([Buffer.from('between'), cell('e6', 'second')]));
    expect(events).toEqual(['began', 'output:first', 'ended', 'outside:between', 'began', 'output:second', 'ended']);
  });
});
