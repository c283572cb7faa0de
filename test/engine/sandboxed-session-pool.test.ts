import { readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  bubblewrapUsable,
  eventually,
  PRINT_PID_NAMESPACE,
  printedPidNamespace,
  processesInPidNamespace,
  useSandboxedCodecalls,
} from '../sandbox/support/sandbox-fixture.js';
import { sleep } from '../support/sample-tools.js';

const codecallWith = useSandboxedCodecalls();
const hostPidNamespace = readlinkSync('/proc/self/ns/pid');

describe.skipIf(!bubblewrapUsable)('sessions and the warm pool under bubblewrap', () => {
  it('runs session cells in the sandbox, keeping state and interrupting at the timeout', async () => {
    const codecall = codecallWith();
    const session = codecall.session();
    const first = await session.execute(`${PRINT_PID_NAMESPACE}x = 5`);
    expect(first).toMatchObject({ status: 'success', isolation: 'bubblewrap' });
    const namespace = printedPidNamespace(first.stdout);
    expect(namespace).not.toBe(hostPidNamespace);
    const timedOut = await session.execute('import time\ntime.sleep(60)', { timeoutMs: 300 });
    expect(timedOut).toMatchObject({ status: 'timeout', reason: 'timeout' });
    expect(timedOut.stateLost).toBeUndefined();
    expect((await session.execute('print(x)')).stdout).toBe('5\n');
    await session.close();
    expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
  });

  it('runs pooled scripts in their own sandbox, like cold runs, and leaves nothing behind on close', async () => {
    const codecall = codecallWith({ pool: { size: 2 } });
    const namespaces = new Set<string>();
    await codecall.execute('pass');
    for (let run = 0; run < 3; run += 1) {
      await sleep(300);
      const result = await codecall.execute(`${PRINT_PID_NAMESPACE}import os\nprint(os.getuid() != 0)`);
      expect(result).toMatchObject({ status: 'success', isolation: 'bubblewrap' });
      expect(result.stdout.endsWith('True\n')).toBe(true);
      namespaces.add(printedPidNamespace(result.stdout));
    }
    expect(namespaces.size).toBe(3);
    await codecall.close();
    for (const namespace of namespaces) {
      expect(await eventually(() => processesInPidNamespace(namespace).length === 0)).toBe(true);
    }
  });
});
