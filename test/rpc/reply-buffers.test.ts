import { describe, expect, it } from 'vitest';
import { IdleBufferList, ReplyBufferPool } from '../../src/rpc/reply-buffers.js';

const BUFFER_BYTES = 1024;

describe('ReplyBufferPool', () => {
  it('lends at most its limit, then hands buffers given back to its waiters in order', () => {
    const pool = new ReplyBufferPool(new IdleBufferList(BUFFER_BYTES, 4), 2);
    const first = pool.take();
    const second = pool.take();
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(pool.take()).toBeUndefined();
    const got: [string, Buffer][] = [];
    const waiters = ['a', 'b', 'c'].map((name) => (buffer: Buffer) => got.push([name, buffer]));
    for (const waiter of waiters) pool.waitFor(waiter);
    pool.cancel(waiters[1] as (buffer: Buffer) => void);
    pool.give(second as Buffer);
    pool.give(first as Buffer);
    expect(got).toEqual([
      ['a', second],
      ['c', first],
    ]);
    expect(pool.lentBuffers).toBe(2);
    expect(pool.waiters).toBe(0);
  });

  it('lends to no newcomer ahead of a waiter', () => {
    const pool = new ReplyBufferPool(new IdleBufferList(BUFFER_BYTES, 4), 1);
    const lent = pool.take() as Buffer;
    const got: Buffer[] = [];
    pool.waitFor((buffer) => got.push(buffer));
    expect(pool.take()).toBeUndefined();
    pool.give(lent);
    expect(got).toEqual([lent]);
    expect(pool.take()).toBeUndefined();
  });

  it('keeps buffers given back in the idle list another pool lends from, up to its cap', () => {
    const idle = new IdleBufferList(BUFFER_BYTES, 1);
    const pool = new ReplyBufferPool(idle, 4);
    const first = pool.take() as Buffer;
    const second = pool.take() as Buffer;
    pool.give(first);
    pool.give(second);
    expect(idle.size).toBe(1);
    const next = new ReplyBufferPool(idle, 4);
    expect(next.take() === first).toBe(true);
  });

  // Another pool is another run: what one run's reads left in a buffer must not stay in the memory lent to another.
  it('zeroes a buffer lent by another pool than the one that gave it back, and only then', () => {
    const idle = new IdleBufferList(BUFFER_BYTES, 4);
    const pool = new ReplyBufferPool(idle, 4);
    const lent = pool.take() as Buffer;
    lent.fill(0x61);
    pool.give(lent);
    const again = pool.take() as Buffer;
    expect(again === lent && again.every((byte) => byte === 0x61)).toBe(true);
    pool.give(again);
    const other = new ReplyBufferPool(idle, 4).take() as Buffer;
    expect(other === lent && other.every((byte) => byte === 0)).toBe(true);
  });

  it('drops its waiters when closed, and keeps no buffer given back after', () => {
    const idle = new IdleBufferList(BUFFER_BYTES, 4);
    const pool = new ReplyBufferPool(idle, 1);
    const lent = pool.take() as Buffer;
    let called = false;
    pool.waitFor(() => {
      called = true;
    });
    pool.close();
    pool.give(lent);
    expect(called).toBe(false);
    expect(idle.size).toBe(0);
  });
});
