import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_PROCESSES } from '../../src/core/limits.js';
import { bubblewrapUsable, useSandboxedCodecalls } from './support/sandbox-fixture.js';

const codecallWith = useSandboxedCodecalls();

/** Patterns models write often must fit the default limits (the pids cgroup, not a low default, stops bombs). */
describe.skipIf(!bubblewrapUsable)('default limits under bubblewrap', () => {
  it('runs a 100-worker thread pool with every worker alive at once', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute(
      [
        'import threading',
        'from concurrent.futures import ThreadPoolExecutor',
        'barrier = threading.Barrier(100, timeout=30)',
        'def work(index):',
        '    barrier.wait()',
        '    return index * 2',
        'with ThreadPoolExecutor(max_workers=100) as pool:',
        '    results = list(pool.map(work, range(100)))',
        'print(sum(results), threading.active_count())',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: 'success', stdout: '9900 1\n', isolation: 'bubblewrap' });
    expect(DEFAULT_MAX_PROCESSES).toBeGreaterThanOrEqual(128);
  }, 60_000);
});
