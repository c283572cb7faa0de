import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const rawChannel = readFileSync(new URL('../fixtures/raw_channel.py', import.meta.url), 'utf8');
const codecallWith = useCodecalls();

function script(...lines: string[]): string {
  return `${rawChannel}\n${lines.join('\n')}\n`;
}

describe('the host survives a hostile channel (P items)', () => {
  const echo = vi.fn(async (args: { path: string }) => ({ path: args.path }));
  const codecall = codecallWith({
    tools: [
      defineTool({
        name: 'read_file',
        description: 'Echo a path.',
        inputSchema: {
          type: 'object',
          properties: { path: { type: 'string' } },
          required: ['path'],
          additionalProperties: false,
        },
        execute: echo,
      }),
    ],
    limits: { maxFrameBytes: 1 << 20 },
  });

  it('answers a broken frame with -32700 and goes on (P2)', async () => {
    const result = await codecall.execute(
      script(
        'send(b\'{"id":1,\\n\')',
        'print(receive()["error"]["code"])',
        'print(call({"id": 2, "method": "read_file", "params": {"path": "a"}})["result"])',
      ),
    );
    expect(result.stdout).toBe("-32700\n{'path': 'a'}\n");
  });

  it('rejects an oversized frame before buffering it whole, then goes on (P3)', async () => {
    const result = await codecall.execute(
      script(
        'send(b\'{"a":"\' + b"x" * (8 << 20) + b\'"}\\n\')',
        'reply = receive()',
        'print(reply["id"], reply["error"]["code"])',
        'print(call({"id": 3, "method": "read_file", "params": {"path": "b"}})["result"]["path"])',
      ),
    );
    expect(result.stdout).toBe('None -32003\nb\n');
  });

  it('answers an unknown tool with -32601 (P4)', async () => {
    const result = await codecall.execute(
      script('print(call({"id": 1, "method": "rm_rf_host", "params": {}})["error"])'),
    );
    expect(result.stdout).toBe("{'code': -32601, 'message': 'unknown tool \"rm_rf_host\"'}\n");
  });

  it('answers invalid arguments with -32602 without calling the handler (P5)', async () => {
    echo.mockClear();
    const result = await codecall.execute(
      script('print(call({"id": 1, "method": "read_file", "params": {"path": 123}})["error"]["code"])'),
    );
    expect(result.stdout).toBe('-32602\n');
    expect(echo).not.toHaveBeenCalled();
  });

  it('answers random bytes with protocol errors and survives (P9)', async () => {
    const result = await codecall.execute(
      script(
        'import random',
        'random.seed(7)',
        'send(bytes(random.getrandbits(8) for _ in range(4096)) + b"\\n")',
        'send(json.dumps({"id": 99, "method": "read_file", "params": {"path": "after"}}).encode() + b"\\n")',
        'errors = 0',
        'while True:',
        '    reply = receive()',
        '    if reply.get("id") == 99:',
        '        break',
        '    errors += 1',
        'print(reply["result"]["path"], errors > 0)',
      ),
    );
    expect(result.stdout).toBe('after True\n');
  });

  it('refuses __proto__ keys without polluting any prototype (P11)', async () => {
    const seen: unknown[] = [];
    const permissive = codecallWith({
      tools: [
        defineTool({
          name: 'inspect',
          description: 'Reports what it got.',
          inputSchema: { type: 'object' },
          execute: async (args) => {
            seen.push(args);
            return { admin: ({} as Record<string, unknown>).admin ?? null };
          },
        }),
      ],
    });
    const result = await permissive.execute(
      script('print(call({"id": 1, "method": "inspect", "params": {"__proto__": {"admin": True}}}))'),
    );
    expect(result.stdout).toMatch(/^\{'id': 1, 'error': \{'code': -32602, 'message': .*__proto__/);
    expect(seen).toEqual([]);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('copes with 200,000 nested brackets (P12)', async () => {
    const result = await codecall.execute(
      script(
        'send(b\'{"id":1,"method":"read_file","params":{"path":\' + b"[" * 200000 + b"]" * 200000 + b"}}\\n")',
        'print(receive()["error"]["code"])',
      ),
    );
    expect(result.status).toBe('success');
    expect(result.stdout).toMatch(/^-32\d{3}\n$/);
  });

  it('rejects duplicate, huge and non-numeric ids safely (P15)', async () => {
    const result = await codecall.execute(
      script(
        'send(b\'{"id":1e309,"method":"read_file","params":{"path":"x"}}\\n\')',
        'print(receive()["error"]["code"])',
        'send(b\'{"id":{},"method":"read_file","params":{"path":"x"}}\\n\')',
        'print(receive()["error"]["code"])',
      ),
    );
    expect(result.stdout).toBe('-32600\n-32600\n');
  });

  it('stops a flood far past the tool call limit with reason tool_calls (P6)', async () => {
    const limited = codecallWith({
      tools: [
        defineTool({ name: 'noop', description: 'Nothing.', inputSchema: { type: 'object' }, execute: () => null }),
      ],
      limits: { maxToolCalls: 10 },
    });
    const result = await limited.execute(
      script('i = 0', 'while True:', '    i += 1', '    call({"id": i, "method": "noop", "params": {}})'),
    );
    expect(result).toMatchObject({ status: 'limit', reason: 'tool_calls', toolCalls: 10 });
  });

  it('matches replies by id across 8 concurrent threads (P10)', async () => {
    const result = await codecall.execute(
      [
        'import threading',
        'from tools import read_file',
        'failures = []',
        'def worker(n):',
        '    for i in range(50):',
        '        path = f"{n}-{i}"',
        '        if read_file(path)["path"] != path:',
        '            failures.append(path)',
        'threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]',
        '[t.start() for t in threads]',
        '[t.join() for t in threads]',
        'print(len(failures))',
      ].join('\n'),
    );
    expect(result.stdout).toBe('0\n');
    expect(result.toolCalls).toBe(400);
  });

  it('refuses calls from a forked child process with a clear ToolError', async () => {
    const result = await codecall.execute(
      [
        'import os',
        'from tools import read_file, ToolError',
        'read_file("parent")',
        'pid = os.fork()',
        'if pid == 0:',
        '    try:',
        '        read_file("child")',
        '    except ToolError as error:',
        '        print("child:", error, flush=True)',
        '    os._exit(0)',
        'os.waitpid(pid, 0)',
        'print(read_file("parent again")["path"])',
      ].join('\n'),
    );
    expect(result.stdout).toContain('child: read_file: tools cannot be called from a forked child process');
    expect(result.stdout).toContain('parent again');
  });
});
