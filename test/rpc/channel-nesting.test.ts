import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { MAX_JSON_NESTING_DEPTH } from '../../src/core/json-nesting.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const rawChannel = readFileSync(new URL('../fixtures/raw_channel.py', import.meta.url), 'utf8');
const codecallWith = useCodecalls();

function script(...lines: string[]): string {
  return `${rawChannel}\n${lines.join('\n')}\n`;
}

const DEPTH_MESSAGE = `parse error: the frame nests arrays and objects deeper than ${MAX_JSON_NESTING_DEPTH} levels`;

/** Python: a frame calling echo whose value is `prefix` followed by `depth` nested lists. */
const NESTED_CALL = [
  'def nested_call(call_id, depth, prefix=""):',
  '    value = b"[" * depth + b"1" + b"]" * depth',
  '    return (f\'{{"id":{call_id},"method":"echo","params":{{"value":[{prefix}\'.encode() + value + b"]}}\\n")',
  'def depth_of(value):',
  '    level = 0',
  '    while isinstance(value, list):',
  '        value, level = value[-1], level + 1',
  '    return level',
].join('\n');

describe('the channel refuses frames nested too deep before parsing them (issue item 6)', () => {
  const echo = vi.fn(async (args: { value?: unknown }) => args.value ?? null);
  const codecall = codecallWith({
    tools: [
      defineTool({
        name: 'echo',
        description: 'Returns its value.',
        inputSchema: { type: 'object', properties: { value: {} } },
        execute: echo,
      }),
    ],
  });

  it('passes nesting up to the limit to the tool and refuses one level more with -32700', async () => {
    echo.mockClear();
    // The value's own depth plus the frame's two levels ({...} and "params": {...}) and the outer list.
    const allowed = MAX_JSON_NESTING_DEPTH - 3;
    const result = await codecall.execute(
      script(
        NESTED_CALL,
        `send(nested_call(1, ${allowed}))`,
        'print(depth_of(receive()["result"]))',
        `send(nested_call(2, ${allowed + 1}))`,
        'print(receive())',
      ),
    );
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(
      `${allowed + 1}\n{'id': None, 'error': {'code': -32700, 'message': '${DEPTH_MESSAGE}'}}\n`,
    );
    expect(echo).toHaveBeenCalledTimes(1);
  });

  it('refuses deep objects, deep nesting after strings full of brackets, and frames of many chunks', async () => {
    echo.mockClear();
    const result = await codecall.execute(
      script(
        NESTED_CALL,
        'codes = []',
        'def refused(frame):',
        '    send(frame)',
        '    reply = receive()',
        '    codes.append(reply["error"]["code"] if reply.get("id") is None else "answered")',
        // Objects inside objects.
        `refused(b'{"id":1,"method":"echo","params":{"value":' + b'{"a":' * ${MAX_JSON_NESTING_DEPTH} + b'1' + b'}' * ${MAX_JSON_NESTING_DEPTH} + b'}}\\n')`,
        // Brackets inside a string (escaped quotes too) do not count, and do not hide the nesting after it.
        `refused(nested_call(2, ${MAX_JSON_NESTING_DEPTH}, prefix=json.dumps("[\\"[" * 100_000) + ","))`,
        // A frame of several megabytes: it arrives in many chunks, the nesting at its end.
        `refused(nested_call(3, ${MAX_JSON_NESTING_DEPTH}, prefix=json.dumps("x" * (4 << 20)) + ","))`,
        // Nothing but opening brackets, just under the frame limit.
        'refused(b"[" * ((16 << 20) - 2) + b"\\n")',
        'print(codes)',
        'print(call({"id": 9, "method": "echo", "params": {"value": "still here"}})["result"])',
      ),
    );
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('[-32700, -32700, -32700, -32700]\nstill here\n');
    expect(echo).toHaveBeenCalledTimes(1);
  });

  it("answers another run's calls while one run floods its channel with deep frames", async () => {
    const CALLS = 300;
    const FRAMES_DURING = 3;
    const shared = { frames: 0, measuring: false, framesDuring: 0, done: false };
    const coordinated = codecallWith({
      tools: [
        defineTool({
          name: 'echo',
          description: 'Returns its value.',
          inputSchema: { type: 'object', properties: { value: {} } },
          execute: async (args: { value?: unknown }) => args.value ?? null,
        }),
        defineTool({
          name: 'state',
          description: 'Records an event of the two runs and returns their shared state.',
          inputSchema: { type: 'object', properties: { event: { enum: ['frame', 'measuring', 'done'] } } },
          execute: async (args: { event?: 'frame' | 'measuring' | 'done' }) => {
            if (args.event === 'frame') {
              shared.frames += 1;
              if (shared.measuring) shared.framesDuring += 1;
            }
            if (args.event === 'measuring') shared.measuring = true;
            if (args.event === 'done') shared.done = true;
            return shared;
          },
        }),
      ],
      limits: { maxToolCalls: 1_000_000, timeoutMs: 120_000 },
    });
    const flood = coordinated.execute(
      script(
        'frame = b"[" * (8 << 20) + b"\\n"',
        'codes = set()',
        'while True:',
        '    send(frame)',
        '    codes.add(receive()["error"]["code"])',
        '    if call({"id": 1, "method": "state", "params": {"event": "frame"}})["result"]["done"]:',
        '        break',
        'print(codes)',
      ),
    );
    // Starts once the flood is on, and goes on until it has made its calls and the flood has sent frames meanwhile.
    const measured = await coordinated.execute(
      [
        'from tools import echo, state',
        'calls = 0',
        'while state()["frames"] == 0:',
        '    pass',
        'state(event="measuring")',
        `while calls < ${CALLS} or state()["framesDuring"] < ${FRAMES_DURING}:`,
        '    assert echo(value=calls) == calls',
        '    calls += 1',
        'state(event="done")',
        'print(calls)',
      ].join('\n'),
    );
    const flooded = await flood;
    expect(measured.stderr).toBe('');
    expect(measured.status).toBe('success');
    expect(Number(measured.stdout)).toBeGreaterThanOrEqual(CALLS);
    expect(shared.framesDuring).toBeGreaterThanOrEqual(FRAMES_DURING);
    expect(flooded.stderr).toBe('');
    expect(flooded.stdout).toBe('{-32700}\n');
  });
});
