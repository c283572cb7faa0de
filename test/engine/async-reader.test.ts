import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { createBarrierTool, sleep } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

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

describe('asynchronous calls (tools.aio)', () => {
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
