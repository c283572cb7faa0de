import { beforeAll, describe, expect, it } from 'vitest';
import type { Codecall } from '../../src/engine/codecall.js';
import type { RunEvent } from '../../src/engine/supervise/run-events.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { codecallModes, useCodecallsIn } from '../support/codecall-modes.js';
import { add } from '../support/sample-tools.js';

const failing = defineTool({
  name: 'fail',
  description: 'Always fails.',
  inputSchema: { type: 'object', properties: {} },
  execute: () => {
    throw new Error('broken on purpose');
  },
});

function recorder(): { readonly events: RunEvent[]; readonly listener: (event: RunEvent) => void } {
  const events: RunEvent[] = [];
  return { events, listener: (event) => events.push(event) };
}

function ofType<T extends RunEvent['type']>(events: readonly RunEvent[], type: T): Extract<RunEvent, { type: T }>[] {
  return events.filter((event): event is Extract<RunEvent, { type: T }> => event.type === type);
}

describe.each(codecallModes)('run events (%s runs)', (mode) => {
  const codecallWith = useCodecallsIn(mode);
  let codecall: Codecall;
  beforeAll(() => {
    codecall = codecallWith({ tools: [add, failing] });
  });

  it('are ordered and complete under 100 parallel calls from threads', async () => {
    const { events, listener } = recorder();
    const result = await codecall.execute(
      [
        'from concurrent.futures import ThreadPoolExecutor',
        'from tools import add',
        'print("before", flush=True)',
        'with ThreadPoolExecutor(100) as pool:',
        '    total = sum(pool.map(lambda n: add(a=n, b=1), range(100)))',
        'print("total", total)',
      ].join('\n'),
      { onEvent: listener },
    );
    expect(result).toMatchObject({ status: 'success', toolCalls: 100 });
    expect(events[0]).toMatchObject({ type: 'run-start' });
    expect(events.at(-1)).toEqual({ type: 'run-end', result });
    const starts = ofType(events, 'tool-call-start');
    const ends = ofType(events, 'tool-call-end');
    expect(starts).toHaveLength(100);
    expect(ends).toHaveLength(100);
    for (const start of starts) {
      expect(start.tool).toBe('add');
      const startIndex = events.indexOf(start);
      const end = ends.find((candidate) => candidate.callId === start.callId && events.indexOf(candidate) > startIndex);
      expect(end).toMatchObject({ tool: 'add' });
      expect(end?.error).toBeUndefined();
      expect(end?.durationMs).toBeGreaterThanOrEqual(0);
    }
    const argumentsSeen = starts.map((start) => (start.arguments as { a: number }).a).sort((x, y) => x - y);
    expect(argumentsSeen).toEqual(Array.from({ length: 100 }, (_, index) => index));
    expect(
      ofType(events, 'stdout')
        .map((event) => event.text)
        .join(''),
    ).toBe(result.stdout);
    // Output printed before the calls arrives before the first of them.
    const before = events.findIndex((event) => event.type === 'stdout' && event.text.includes('before'));
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(events.indexOf(starts[0] as RunEvent));
  });

  it('report a failed call with its error, and stderr', async () => {
    const { events, listener } = recorder();
    const result = await codecall.execute(
      [
        'import sys',
        'from tools import fail, ToolError',
        'try:',
        '    fail()',
        'except ToolError as error:',
        '    print("caught", error, file=sys.stderr)',
      ].join('\n'),
      { onEvent: listener },
    );
    expect(result.status).toBe('success');
    expect(ofType(events, 'tool-call-end')[0]).toMatchObject({ tool: 'fail', error: 'broken on purpose' });
    expect(
      ofType(events, 'stderr')
        .map((event) => event.text)
        .join(''),
    ).toBe('caught broken on purpose\n');
  });

  it('carry output sanitised like the result (escape sequences removed)', async () => {
    const { events, listener } = recorder();
    const result = await codecall.execute('print("\\x1b[31mred\\x1b[0m")', { onEvent: listener });
    expect(result.stdout).toBe('red\n');
    expect(ofType(events, 'stdout')).toEqual([{ type: 'stdout', text: 'red\n' }]);
  });

  it('announce artifacts before the end', async () => {
    const { events, listener } = recorder();
    const result = await codecall.execute(
      'import os\nopen(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "chart.txt"), "w").write("x")',
      { onEvent: listener },
    );
    const artifacts = ofType(events, 'artifact');
    expect(artifacts.map((event) => event.artifact)).toEqual(result.artifacts);
    expect(artifacts).toHaveLength(1);
    expect(events.indexOf(artifacts[0] as RunEvent)).toBe(events.length - 2);
  });

  it('do not break the run when the listener throws or rejects', async () => {
    let calls = 0;
    const result = await codecall.execute('from tools import add\nprint(add(a=1, b=2))', {
      onEvent: (event) => {
        calls += 1;
        if (event.type === 'tool-call-start') throw new Error('listener bug');
        return Promise.reject(new Error('async listener bug'));
      },
    });
    expect(result).toMatchObject({ status: 'success', stdout: '3\n', toolCalls: 1 });
    expect(calls).toBeGreaterThanOrEqual(4);
  });

  it('reach the listener of each session cell, and only that cell', async () => {
    const session = codecall.session();
    try {
      const first = recorder();
      const second = recorder();
      await session.execute('from tools import add\nx = add(a=1, b=1)\nprint(x)', { onEvent: first.listener });
      const result = await session.execute('print(add(a=x, b=1))', { onEvent: second.listener });
      expect(result.stdout).toBe('3\n');
      expect(first.events[0]).toMatchObject({ type: 'run-start', cell: 1 });
      expect(second.events[0]).toMatchObject({ type: 'run-start', cell: 2 });
      expect(ofType(first.events, 'tool-call-start').map((event) => event.arguments)).toEqual([{ a: 1, b: 1 }]);
      expect(ofType(second.events, 'tool-call-start').map((event) => event.arguments)).toEqual([{ a: 2, b: 1 }]);
      expect(second.events.at(-1)).toEqual({ type: 'run-end', result });
    } finally {
      await session.close();
    }
  });
});
