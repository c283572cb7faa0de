import { describe, expect, it } from 'vitest';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

/** Calls a coroutine awaits one after another. */
const AWAITED_CALLS = 200;

// Counts the threads the script starts from here on (the runtime starts its reader with _thread.start_new_thread).
const COUNT_THREAD_STARTS = `
import _thread
started = [0]
start_new_thread = _thread.start_new_thread
def counting_start(*arguments, **keywords):
    started[0] += 1
    return start_new_thread(*arguments, **keywords)
_thread.start_new_thread = counting_start
`;

// Threads of the script's process now, from the kernel.
const THREADS_NOW = `
def threads_now():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
`;

describe('asynchronous calls (tools.aio)', () => {
  // The reply to an awaited call is read by a thread of the runtime; it used to end with each reply, so a coroutine
  // awaiting calls one after another started a thread per call (hundreds of µs each on a VM).
  it('awaited one after another, they are all read by one reader thread', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`${COUNT_THREAD_STARTS}
import asyncio
import tools.aio as aio
async def main():
    total = 0
    for index in range(${AWAITED_CALLS}):
        total += await aio.add(a=index, b=1)
    return total
print(asyncio.run(main()), started[0])
`);
    expect(result.error).toBeUndefined();
    const [total, threadStarts] = result.stdout.trim().split(' ').map(Number);
    expect(total).toBe((AWAITED_CALLS * (AWAITED_CALLS - 1)) / 2 + AWAITED_CALLS);
    expect(threadStarts).toBeGreaterThanOrEqual(1);
    expect(threadStarts).toBeLessThanOrEqual(2);
  });

  it('the reader thread ends soon after the last awaited call, and later calls read for themselves', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`${THREADS_NOW}
import asyncio, time
from tools import add
import tools.aio as aio
before = threads_now()
async def main():
    return [await aio.add(a=index, b=0) for index in range(20)]
assert asyncio.run(main()) == list(range(20))
deadline = time.monotonic() + 5
while threads_now() > before and time.monotonic() < deadline:
    time.sleep(0.01)
print(threads_now() - before, sum(add(a=index, b=0) for index in range(20)))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('0 190');
  });

  it('answers calls made while the reader thread waits: right after awaited calls, from threads and coroutines at once', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 10_000 } });
    const result = await codecall.execute(`
import asyncio
from concurrent.futures import ThreadPoolExecutor
from tools import add
import tools.aio as aio
async def awaited(count):
    return [await aio.add(a=index, b=1) for index in range(count)]
checks = []
for round in range(20):
    checks.append(asyncio.run(awaited(5)) == [index + 1 for index in range(5)])
    # Within the reader's waiting time: the lingering reader answers this one.
    checks.append(add(a=round, b=2) == round + 2)
with ThreadPoolExecutor(4) as pool:
    threaded = pool.map(lambda index: add(a=index, b=3), range(200))
    mixed = asyncio.run(awaited(100))
    checks.append(list(threaded) == [index + 3 for index in range(200)])
    checks.append(mixed == [index + 1 for index in range(100)])
print(all(checks), len(checks))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('True 42');
  });
});
