import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { bubblewrapUsable, useSandboxedCodecalls } from '../sandbox/support/sandbox-fixture.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { sleep } from '../support/sample-tools.js';

const plainCodecallWith = useCodecalls();
const sandboxedCodecallWith = useSandboxedCodecalls();

/** Calls of the slow tool the script makes and counts its sleeps over. */
const SLOW_CALLS = 200;
/** How long the slow tool takes: far past the runtime's polling window, so every reply is slept on. */
const SLOW_TOOL_MILLISECONDS = 2;

const slowTool = defineTool({
  name: 'slow',
  description: 'Answers after a few milliseconds.',
  inputSchema: { type: 'object', properties: {} },
  execute: async () => {
    await sleep(SLOW_TOOL_MILLISECONDS);
    return 1;
  },
});

// Under bubblewrap the runtime imports `select` inside the sandbox (seccomp on): without it the read would sleep
// itself, twice per call, and the count would show it.
describe.each([
  { isolation: 'none', codecallWith: plainCodecallWith, skip: false },
  { isolation: 'bubblewrap', codecallWith: sandboxedCodecallWith, skip: !bubblewrapUsable },
])('a script waiting for a reply ($isolation)', ({ codecallWith, skip }) => {
  // A read sleeping on the socket was also woken when the host read the call (the socket signals room to write on the
  // queue a read waits on): two sleeps per call. Waiting for input alone, the caller sleeps at most once per call.
  it.skipIf(skip)('sleeps once per call, not woken when the host reads its call', async () => {
    const codecall = codecallWith({ tools: [slowTool], limits: { maxToolCalls: 1_000 } });
    const result = await codecall.execute(`
from tools import slow
def sleeps():
    with open("/proc/thread-self/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
for _ in range(10):
    slow()
before = sleeps()
for _ in range(${SLOW_CALLS}):
    slow()
print(sleeps() - before)
`);
    expect(result.error).toBeUndefined();
    const sleeps = Number(result.stdout.trim());
    expect(sleeps).toBeGreaterThan(0);
    // A little room for a sleep that is no wait for a reply (a page read from disk, say).
    expect(sleeps).toBeLessThanOrEqual(SLOW_CALLS * 1.25);
  });
});
