import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCodecall } from '../../src/engine/codecall.js';
import type { RunEvent } from '../../src/engine/supervise/run-events.js';
import { OUTPUT_DRAIN_MS } from '../../src/engine/supervise/supervisor.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { processesIn } from '../support/processes-in.js';

const codecallWith = useCodecalls();
const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function temporaryFolder(prefix: string): string {
  const folder = mkdtempSync(join(tmpdir(), prefix));
  folders.push(folder);
  return folder;
}

/** Keeps the host's thread busy, as the callbacks of hundreds of other runs would: longer than the output drain. */
const BUSY_HOST_MS = OUTPUT_DRAIN_MS * 4;

const note = defineTool({
  name: 'note',
  description: 'Take note of nothing.',
  inputSchema: { type: 'object', properties: {} },
  execute: async () => 'noted',
});

/** Python helpers of both scripts: flags are empty files in a folder both runs and the host write. */
function flagHelpers(flags: string): string[] {
  return [
    'import os, sys, threading, time',
    `flags = ${JSON.stringify(flags)}`,
    'def wait_for(name):',
    '    while not os.path.exists(os.path.join(flags, name)):',
    '        time.sleep(0.001)',
    'def flag(name):',
    '    open(os.path.join(flags, name), "w").close()',
  ];
}

/**
 * Two runs that meet a busy host in the order a saturated one meets hundreds: in one turn of its event loop it reads
 * run A's stderr (and is busy), then A's channel, where `$done` came meanwhile, then run B's stderr (and is busy past
 * the drain time); A's stdout, written before its `$done` but after that turn began, waits for the next turn. Flag
 * files, raised by the host as it starts being busy, order the scripts: no clock decides.
 */
function scriptsOnBusyHost(flags: string, token: string): { readonly first: string; readonly second: string } {
  const first = [
    ...flagHelpers(flags),
    'from tools import note',
    'wait_for("second started")',
    // The host reads this line and is busy with it: what follows is read in its next turn, in this order.
    'sys.stderr.write("busy 1\\n")',
    'wait_for("1")',
    'sys.stderr.write("busy 2\\n")',
    // A frame on the channel (a call in a background thread, never waited for), then run B's line.
    'threading.Thread(target=note, daemon=True).start()',
    'time.sleep(0.05)',
    'flag("go")',
    // The host is busy with "busy 2": the output, the end markers and `$done` are written before it reads on.
    'wait_for("2")',
    `print(${JSON.stringify(token)})`,
  ].join('\n');
  const second = [
    ...flagHelpers(flags),
    'flag("second started")',
    'wait_for("go")',
    'sys.stderr.write("busy 3\\n")',
  ].join('\n');
  return { first, second };
}

/** An `onEvent` listener that raises flag N and keeps the host busy on each `busy N` line of stderr. */
function busyOnStderr(flags: string): (event: RunEvent) => void {
  return (event) => {
    if (event.type !== 'stderr') return;
    for (const line of event.text.split('\n')) {
      const match = /^busy (\d)$/.exec(line);
      if (match === null) continue;
      writeFileSync(join(flags, match[1] ?? ''), '');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, BUSY_HOST_MS);
    }
  };
}

describe('the output of a run on a busy host', () => {
  for (const kind of ['run', 'session cell'] as const) {
    it(`is complete when the host read the end a whole drain time before the pipe that holds the output (${kind})`, async () => {
      const codecall = codecallWith({ tools: [note] });
      // Both scripts write flags: they run as uids of their own when the host is root.
      const flags = temporaryFolder('codecall-busy-host-');
      chmodSync(flags, 0o777);
      const token = `token-${process.pid}`;
      const { first, second } = scriptsOnBusyHost(flags, token);
      const onEvent = busyOnStderr(flags);
      const execute =
        kind === 'run'
          ? (code: string) => codecall.execute(code, { onEvent })
          : async (code: string) => {
              const session = codecall.session();
              try {
                return await session.execute(code, { onEvent });
              } finally {
                await session.close();
              }
            };
      const [firstResult, secondResult] = await Promise.all([execute(first), execute(second)]);
      expect(secondResult.stderr).toBe('busy 3\n');
      expect(firstResult.stderr).toBe('busy 1\nbusy 2\n');
      expect(firstResult.status).toBe('success');
      expect(firstResult.stdout).toBe(`${token}\n`);
    });
  }

  it('keeps each of 200 concurrent runs to its own output and tool calls, and leaves nothing running', async () => {
    const runs = 200;
    let calls = 0;
    const count = defineTool({
      name: 'count',
      description: 'Count a call.',
      inputSchema: { type: 'object', properties: { run: { type: 'number' } }, required: ['run'] },
      execute: async ({ run }: { run: number }) => {
        calls += 1;
        return run;
      },
    });
    const stateDir = temporaryFolder('codecall-busy-host-state-');
    const codecall = createCodecall({
      sandbox: 'none',
      workspaceMount: 'none',
      stateDir,
      tools: [count],
      pool: { size: 2 },
    });
    try {
      const results = await Promise.all(
        Array.from({ length: runs }, (_, run) =>
          codecall.execute(
            [
              'from tools import count',
              `print("run ${run} starts")`,
              `for _ in range(${(run % 3) + 1}): print("run", count(run=${run}))`,
            ].join('\n'),
          ),
        ),
      );
      results.forEach((result, run) => {
        expect({ run, status: result.status }).toEqual({ run, status: 'success' });
        const lines = Array.from({ length: (run % 3) + 1 }, () => `run ${run}\n`).join('');
        expect({ run, stdout: result.stdout }).toEqual({ run, stdout: `run ${run} starts\n${lines}` });
        expect({ run, toolCalls: result.toolCalls }).toEqual({ run, toolCalls: (run % 3) + 1 });
      });
      expect(calls).toBe(results.reduce((sum, result) => sum + result.toolCalls, 0));
    } finally {
      await codecall.close();
    }
    expect(processesIn(join(stateDir, 'runs'))).toEqual([]);
    expect(readdirSync(join(stateDir, 'runs'))).toEqual([]);
  }, 60_000);
});
