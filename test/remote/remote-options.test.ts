import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { createLocalCodecall } from '../../src/engine/codecall.js';
import { createCodecall } from '../../src/index.js';
import { checkFleetAddress, DEFAULT_QUEUE_NAME } from '../../src/remote/fleet-protocol.js';
import { captureError } from '../support/capture-error.js';

describe('the remote option', () => {
  it('is checked when the codecall is created, naming the bad value', () => {
    expect(captureError(() => createCodecall({ remote: { redis: 'http://x' } })).message).toMatch(
      /remote.redis must be a redis:\/\/ or rediss:\/\/ URL \(got "http:\/\/x"\)/,
    );
    expect(captureError(() => createCodecall({ remote: { redis: 'redis://h', queue: 'a b' } })).message).toMatch(
      /remote.queue must be 1 to 64 letters/,
    );
    expect(captureError(() => createCodecall({ remote: { redis: 'redis://h', extra: 1 } as never })).details).toEqual({
      key: 'extra',
    });
    expect(checkFleetAddress({ redis: 'valkey://h:6379' })).toEqual({
      redis: 'redis://h:6379',
      queue: DEFAULT_QUEUE_NAME,
    });
  });

  it('returns synchronously and connects on the first run: an unreachable Redis is a REMOTE_UNAVAILABLE error', async () => {
    const codecall = createCodecall({ sandbox: 'none', remote: { redis: 'redis://127.0.0.1:1' } });
    try {
      const error = await codecall.execute('print(1)').catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(CodecallError);
      expect((error as CodecallError).code).toBe('REMOTE_UNAVAILABLE');
      expect((error as CodecallError).message).toMatch(/cannot reach Redis for the fleet queue "codecall"/);
      // What stays local still works without Redis: the description and the generated module.
      expect((await codecall.generateModule()).files.length).toBeGreaterThan(0);
    } finally {
      await codecall.close();
    }
  }, 30_000);

  it('is refused by the engine itself: only the package entry sends runs away', () => {
    expect(captureError(() => createLocalCodecall({ remote: { redis: 'redis://h' } })).message).toMatch(
      /the remote option is handled by createCodecall of the package entry/,
    );
  });
});
