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

// An event loop that cannot watch a descriptor (as some loops cannot), and a runner for a coroutine in one.
const LOOP_WITHOUT_READERS = `
import asyncio
class LoopWithoutReaders(asyncio.SelectorEventLoop):
    def add_reader(self, *arguments):
        raise NotImplementedError("no readers")
def run_without_readers(coroutine):
    loop = LoopWithoutReaders()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()
`;

describe('asynchronous calls (tools.aio)', () => {
  // The reply to an awaited call is read in the coroutine's own event loop, which watches the channel: a reader thread
  // between the reply and the coroutine cost each call two thread hand-offs (the thread ended with each reply before
  // that, so a coroutine awaiting calls one after another started a thread per call).
  it('awaited one after another, they are read by their event loop, with no reader thread', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`${COUNT_THREAD_STARTS}
import asyncio
import tools.aio as aio
async def main():
    total = 0
    for index in range(${AWAITED_CALLS}):
        total += await aio.add(a=index, b=1)
    total += sum(await asyncio.gather(*(aio.add(a=index, b=0) for index in range(50))))
    return total
print(asyncio.run(main()), started[0])
`);
    expect(result.error).toBeUndefined();
    const [total, threadStarts] = result.stdout.trim().split(' ').map(Number);
    expect(total).toBe((AWAITED_CALLS * (AWAITED_CALLS - 1)) / 2 + AWAITED_CALLS + (50 * 49) / 2);
    expect(threadStarts).toBe(0);
  });

  // Where the event loop cannot watch the channel (a loop without readers), a reader thread reads for it; it waits a
  // while for the next call rather than end with each reply (a thread per call before).
  it('awaited one after another in a loop without readers, they are all read by one reader thread', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`${COUNT_THREAD_STARTS}${LOOP_WITHOUT_READERS}
import tools.aio as aio
async def main():
    total = 0
    for index in range(${AWAITED_CALLS}):
        total += await aio.add(a=index, b=1)
    return total
print(run_without_readers(main()), started[0])
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
    const result = await codecall.execute(`${THREADS_NOW}${LOOP_WITHOUT_READERS}
import time
from tools import add
import tools.aio as aio
before = threads_now()
async def main():
    return [await aio.add(a=index, b=0) for index in range(20)]
assert run_without_readers(main()) == list(range(20))
deadline = time.monotonic() + 5
while threads_now() > before and time.monotonic() < deadline:
    time.sleep(0.01)
print(threads_now() - before, sum(add(a=index, b=0) for index in range(20)))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('0 190');
  });

  // Each way the replies are read: by the coroutines' event loop, and by the reader thread (a loop without readers),
  // whose waiting time for the next call the plain calls fall into.
  it.each([
    ['their event loop', 'asyncio.run'],
    ['the waiting reader thread', 'run_without_readers'],
  ])(
    'answers calls made while %s reads: right after awaited calls, from threads and coroutines at once',
    async (_reader, run) => {
      const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 10_000 } });
      const result = await codecall.execute(`${LOOP_WITHOUT_READERS}
from concurrent.futures import ThreadPoolExecutor
from tools import add
import tools.aio as aio
async def awaited(count):
    return [await aio.add(a=index, b=1) for index in range(count)]
checks = []
for round in range(20):
    checks.append(${run}(awaited(5)) == [index + 1 for index in range(5)])
    # Right after the awaited calls (within the reader thread's waiting time, for that reader).
    checks.append(add(a=round, b=2) == round + 2)
with ThreadPoolExecutor(4) as pool:
    threaded = pool.map(lambda index: add(a=index, b=3), range(200))
    mixed = ${run}(awaited(100))
    checks.append(list(threaded) == [index + 3 for index in range(200)])
    checks.append(mixed == [index + 1 for index in range(100)])
print(all(checks), len(checks))
`);
      expect(result.error).toBeUndefined();
      expect(result.stdout.trim()).toBe('True 42');
    },
  );

  // A closed channel is readable at once (at its end): the reader thread waiting for the next awaited call read that
  // end over and over, taking a processor for as long as the process lived.
  it('the reader thread waiting for the next awaited call ends when the channel closes', async () => {
    const codecall = codecallWith({ tools: [add] });
    const result = await codecall.execute(`${THREADS_NOW}${LOOP_WITHOUT_READERS}
import os, socket, time
import tools.aio as aio
before = threads_now()
async def main():
    return await aio.add(a=1, b=1)
answer = run_without_readers(main())
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

/**
 * The event loop of awaited calls watches the channel and reads their replies itself. It reads only when nobody else
 * does, and never makes another reader wait for it: a thread (or the loop's own thread, calling without `await`) that
 * needs the channel reads it; calls of another loop get a reader thread.
 */
describe('asynchronous calls read by their event loop', () => {
  it('a plain call made in the loop while its awaited calls wait is answered, and so are they', async () => {
    const codecall = codecallWith({ tools: [add, later], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`
import asyncio
from tools import add
import tools.aio as aio
async def main():
    waiting = asyncio.ensure_future(aio.later())
    awaited = [asyncio.ensure_future(aio.add(a=index, b=1)) for index in range(20)]
    await asyncio.sleep(0)
    # Without await, in the loop's own thread, while the loop watches the channel for the others.
    plain = [add(a=index, b=2) for index in range(20)]
    return plain == [index + 2 for index in range(20)], await asyncio.gather(*awaited) == [index + 1 for index in range(20)], await waiting
print(asyncio.run(main()))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe("(True, True, 'late')");
  });

  it("a thread's plain calls are answered while the loop that watches the channel is busy", async () => {
    const codecall = codecallWith({ tools: [add, later], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`
import asyncio, threading, time
from tools import add
import tools.aio as aio
busy_over = threading.Event()
answered_while_busy = []
def calls():
    answers = [add(a=index, b=3) for index in range(50)]
    answered_while_busy.append(not busy_over.is_set() and answers == [index + 3 for index in range(50)])
async def main():
    waiting = asyncio.ensure_future(aio.later())
    await asyncio.sleep(0)
    thread = threading.Thread(target=calls)
    thread.start()
    # The loop computes without coming round (its call still waiting) while the thread calls.
    deadline = time.monotonic() + ${UNREAD_AFTER_SECONDS}
    while thread.is_alive() and time.monotonic() < deadline:
        pass
    busy_over.set()
    thread.join()
    return await waiting
print(asyncio.run(main()), answered_while_busy)
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('late [True]');
  });

  it('two event loops in two threads calling at once all get their answers', async () => {
    const codecall = codecallWith({ tools: [add], limits: { maxToolCalls: 10_000 } });
    const result = await codecall.execute(`
import asyncio, threading
import tools.aio as aio
results = {}
async def calls(offset):
    sequential = [await aio.add(a=index, b=offset) for index in range(100)]
    gathered = await asyncio.gather(*(aio.add(a=index, b=offset) for index in range(100)))
    return sequential == gathered == [index + offset for index in range(100)]
def in_thread(offset):
    results[offset] = all(asyncio.run(calls(offset)) for _ in range(5))
threads = [threading.Thread(target=in_thread, args=(offset,)) for offset in (1, 2, 3)]
for thread in threads:
    thread.start()
results[0] = all(asyncio.run(calls(0)) for _ in range(5))
for thread in threads:
    thread.join()
print(sorted(results.items()))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe('[(0, True), (1, True), (2, True), (3, True)]');
  });

  it('a loop that ends with a call in flight leaves the channel to the calls after it', async () => {
    const codecall = codecallWith({ tools: [add, later], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`
import asyncio
from tools import add
import tools.aio as aio
async def gives_up():
    try:
        await asyncio.wait_for(aio.later(), 0.05)
    except asyncio.TimeoutError:
        return "gave up"
first = asyncio.run(gives_up())
plain = add(a=1, b=1)
async def after():
    return await aio.later(), await asyncio.gather(*(aio.add(a=index, b=0) for index in range(10)))
print(first, plain, asyncio.run(after()))
# A loop closed without ending its coroutines (their call still waiting): plain and awaited calls go on.
loop = asyncio.new_event_loop()
loop.run_until_complete(asyncio.sleep(0))
abandoned = loop.create_task(aio.later())
loop.run_until_complete(asyncio.sleep(0.01))
loop.close()
print(add(a=2, b=2), asyncio.run(after())[0])
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim().split('\n')).toEqual(["gave up 2 ('late', [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])", '4 late']);
  });

  // A closed channel is readable at once (at its end): a loop still watching it would be called back on every turn.
  it('a loop watching the channel stops when the channel closes, and its calls fail', async () => {
    const codecall = codecallWith({ tools: [later] });
    const result = await codecall.execute(`
import asyncio, os, socket, time
from tools import ToolError
import tools.aio as aio
async def main():
    waiting = asyncio.ensure_future(aio.later())
    await asyncio.sleep(0)
    channel = socket.socket(fileno=int(os.environ["CODECALL_CHANNEL_FD"]))
    channel.shutdown(socket.SHUT_RD)
    channel.detach()
    try:
        await waiting
        outcome = "answered"
    except ToolError:
        outcome = "failed"
    # The loop idles: one that kept being called back for the closed channel would take a processor meanwhile.
    started = time.process_time()
    await asyncio.sleep(0.5)
    return outcome, time.process_time() - started < 0.25
print(asyncio.run(main()))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout.trim()).toBe("('failed', True)");
  });
});
