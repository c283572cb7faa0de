import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add, createBarrierTool, sleep } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

/** Calls a coroutine awaits one after another. */
const AWAITED_CALLS = 200;
/** Reader threads those calls may start: one, and a few more if the machine stalls past the reader's waiting time. */
const MAX_READER_THREAD_STARTS = 10;

/** How long the `later` tool takes: its reply comes long after the `meet` replies were read. */
const LATER_MILLISECONDS = 300;
/** How long the script waits for the `later` reply before it reports it unread (a hang, shown quickly). */
const UNREAD_AFTER_SECONDS = 5;

/** A tool that answers "late" after LATER_MILLISECONDS. */
const later = defineTool({
  name: 'later',
  description: `Answers "late" after ${LATER_MILLISECONDS} ms.`,
  inputSchema: { type: 'object', properties: {} },
  execute: async () => {
    await sleep(LATER_MILLISECONDS);
    return 'late';
  },
});

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
    // One thread serves them all; a pause of the machine longer than its waiting time (a loaded test run) starts
    // another. Without the waiting, a thread ended with each reply: 142 thread starts for the 200 calls.
    expect(threadStarts).toBeLessThanOrEqual(MAX_READER_THREAD_STARTS);
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

  // A closed channel is readable at once (at its end): the reader thread waiting for the next awaited call read that
  // end over and over, taking a processor for as long as the process lived.
  it('the reader thread waiting for the next awaited call ends when the channel closes', async () => {
    const codecall = codecallWith({ tools: [add] });
    const result = await codecall.execute(`${THREADS_NOW}
import asyncio, os, socket, time
import tools.aio as aio
before = threads_now()
async def main():
    return await aio.add(a=1, b=1)
answer = asyncio.run(main())
# The script's end of the channel reads no more: the waiting reader thread finds the channel's end.
channel = socket.socket(fileno=int(os.environ["CODECALL_CHANNEL_FD"]))
channel.shutdown(socket.SHUT_RD)
channel.detach()
deadline = time.monotonic() + 5
while threads_now() > before and time.monotonic() < deadline:
    time.sleep(0.01)
print(answer, threads_now() - before)
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('2 0');
  });

  // A thread reading for its own reply hands other threads theirs. When it read its reply and a sleeping thread's at
  // once, it left before that thread had run: still counted as waiting, that thread was taken for one that would read
  // next, so no reader thread was started for an awaited call made meanwhile, whose reply then lay unread for good (a
  // run mixing threads and coroutines hung).
  it('an awaited call sent while a thread reads gets its reply after that thread leaves, having answered another', async () => {
    const barrier = createBarrierTool(3);
    const codecall = codecallWith({ tools: [barrier.tool, later] });
    const result = await codecall.execute(`
import asyncio, threading, time
from tools import meet
import tools.aio as aio
answers = []
def call_meet():
    answers.append(meet())
reader = threading.Thread(target=call_meet)
reader.start()
# That thread reads the channel for its \`meet\`, answered once three are in flight.
time.sleep(0.2)
async def main():
    # Sent while the thread reads: no reader thread is started for it.
    awaited = asyncio.ensure_future(aio.later())
    sleeper = threading.Thread(target=call_meet)
    sleeper.start()
    # The second thread sleeps until the reading one hands it its reply.
    await asyncio.sleep(0.1)
    third = asyncio.ensure_future(aio.meet())
    await asyncio.sleep(0)
    # The three \`meet\` replies come now; holding the interpreter meanwhile (but for its switch interval), the
    # reading thread reads them at once and leaves before the sleeping one has run.
    deadline = time.perf_counter() + 0.05
    while time.perf_counter() < deadline:
        pass
    answers.append(await third)
    sleeper.join()
    try:
        return await asyncio.wait_for(awaited, ${UNREAD_AFTER_SECONDS})
    except asyncio.TimeoutError:
        return "unread"
late = asyncio.run(main())
reader.join()
print(late, answers)
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe("late ['done', 'done', 'done']");
  });
});
