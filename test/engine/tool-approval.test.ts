import { describe, expect, it, vi } from 'vitest';
import { createCodecall } from '../../src/engine/codecall.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { NO_APPROVAL_HOOK_REASON, type ToolApprovalRequest } from '../../src/tools/tool-approval.js';
import { captureError } from '../support/capture-error.js';
import { codecallModes, useCodecallsIn } from '../support/codecall-modes.js';

/** `delete_file(path)`, which always needs approval; `calls` records the paths it really deleted. */
function deleteTool() {
  const calls: string[] = [];
  const tool = defineTool({
    name: 'delete_file',
    description: 'Delete a file.',
    inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    needsApproval: true,
    execute: ({ path }) => {
      calls.push(String(path));
      return `deleted ${String(path)}`;
    },
  });
  return { tool, calls };
}

/** Each call prints the result or the ToolError it raised. */
const callAndReport = (call: string) =>
  [
    'from tools import delete_file, ToolError',
    'try:',
    `    print(${call})`,
    'except ToolError as error:',
    '    print("denied:", error)',
  ].join('\n');

describe.each(codecallModes)('approval of tool calls (%s runs)', (mode) => {
  const codecallWith = useCodecallsIn(mode);

  it('runs an approved call; the hook sees the tool, the validated arguments and the run id', async () => {
    const { tool, calls } = deleteTool();
    const requests: ToolApprovalRequest[] = [];
    const codecall = codecallWith({
      tools: [tool],
      approveToolCall: (request) => {
        requests.push(request);
        return true;
      },
    });
    const result = await codecall.execute(callAndReport('delete_file("a.txt")'));
    expect(result).toMatchObject({ status: 'success', stdout: 'deleted a.txt\n', toolCalls: 1 });
    expect(result.deniedToolCalls).toBeUndefined();
    expect(calls).toEqual(['a.txt']);
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ tool: 'delete_file', arguments: { path: 'a.txt' } });
    expect(requests[0]?.runId).toMatch(/\S/);
  });

  it('raises ToolError with the reason when denied, counts it, and never calls the tool', async () => {
    const { tool, calls } = deleteTool();
    const codecall = codecallWith({
      tools: [tool],
      approveToolCall: async () => ({ allow: false, reason: 'not on a Friday' }),
    });
    const result = await codecall.execute(callAndReport('delete_file("a.txt")'));
    expect(result.stdout).toBe('denied: delete_file: the call was denied: not on a Friday\n');
    expect(result).toMatchObject({ toolCalls: 1, deniedToolCalls: 1 });
    expect(calls).toEqual([]);
  });

  it('denies every call that needs approval when no hook is configured, saying so', async () => {
    const { tool, calls } = deleteTool();
    const codecall = codecallWith({ tools: [tool] });
    const result = await codecall.execute(callAndReport('delete_file("a.txt")'));
    expect(result.stdout).toBe(`denied: delete_file: the call was denied: ${NO_APPROVAL_HOOK_REASON}\n`);
    expect(calls).toEqual([]);
  });

  it('denies when the hook throws, rejects or answers nonsense', async () => {
    const { tool, calls } = deleteTool();
    let attempt = 0;
    const codecall = codecallWith({
      tools: [tool],
      approveToolCall: async () => {
        attempt += 1;
        if (attempt === 1) throw new Error('policy service down');
        if (attempt === 2) return Promise.reject(new Error('rejected'));
        return 'yes' as never;
      },
    });
    const result = await codecall.execute(
      [
        'from tools import delete_file, ToolError',
        'for name in ["a", "b", "c"]:',
        '    try:',
        '        delete_file(name)',
        '    except ToolError as error:',
        '        print(error)',
      ].join('\n'),
    );
    expect(result.stdout.split('\n')).toEqual([
      'delete_file: the call was denied: the approval hook failed: policy service down',
      'delete_file: the call was denied: the approval hook failed: rejected',
      'delete_file: the call was denied: the approval hook gave no valid answer (expected true, false or { allow, reason })',
      '',
    ]);
    expect(result).toMatchObject({ toolCalls: 3, deniedToolCalls: 3 });
    expect(calls).toEqual([]);
  });

  it('asks only for the calls whose arguments need it when needsApproval is a function', async () => {
    const hook = vi.fn((_request: ToolApprovalRequest) => false);
    const remove = defineTool({
      name: 'remove',
      description: 'Remove a path.',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      needsApproval: ({ path }) => String(path).startsWith('/'),
      execute: ({ path }) => `removed ${String(path)}`,
    });
    const codecall = codecallWith({ tools: [remove], approveToolCall: hook });
    const result = await codecall.execute(
      [
        'from tools import remove, ToolError',
        'print(remove("tmp/x"))',
        'try:',
        '    remove("/etc")',
        'except ToolError as error:',
        '    print(error)',
      ].join('\n'),
    );
    expect(result.stdout).toBe('removed tmp/x\nremove: the call was denied: the call was denied\n');
    expect(hook).toHaveBeenCalledTimes(1);
    expect(hook.mock.calls[0]?.[0]).toMatchObject({ arguments: { path: '/etc' } });
  });

  for (const [style, script] of [
    [
      'threads',
      [
        'from concurrent.futures import ThreadPoolExecutor',
        'from tools import delete_file, ToolError',
        'def attempt(n):',
        '    try:',
        '        return delete_file(f"f{n}")',
        '    except ToolError as error:',
        '        return f"no {n}"',
        'with ThreadPoolExecutor(8) as pool:',
        '    print(sorted(pool.map(attempt, range(8))))',
      ].join('\n'),
    ],
    [
      'asyncio',
      [
        'import asyncio',
        'from tools import aio, ToolError',
        'async def attempt(n):',
        '    try:',
        '        return await aio.delete_file(f"f{n}")',
        '    except ToolError as error:',
        '        return f"no {n}"',
        'async def main():',
        '    print(sorted(await asyncio.gather(*(attempt(n) for n in range(8)))))',
        'asyncio.run(main())',
      ].join('\n'),
    ],
  ] as const) {
    it(`keeps concurrent calls (${style}) waiting on their approvals together, each decided on its own`, async () => {
      const { tool, calls } = deleteTool();
      // The hook answers only once all eight calls wait on it: proof they wait at the same time.
      const waiting: { request: ToolApprovalRequest; answer: (allow: boolean) => void }[] = [];
      const codecall = codecallWith({
        tools: [tool],
        approveToolCall: (request) =>
          new Promise<boolean>((resolve) => {
            waiting.push({ request, answer: resolve });
            if (waiting.length === 8) {
              for (const entry of waiting) {
                const n = Number(String(entry.request.arguments.path).slice(1));
                entry.answer(n % 2 === 0);
              }
            }
          }),
      });
      const result = await codecall.execute(script);
      expect(result.status).toBe('success');
      expect(result.stdout).toBe(
        `${JSON.stringify(['deleted f0', 'deleted f2', 'deleted f4', 'deleted f6', 'no 1', 'no 3', 'no 5', 'no 7']).replaceAll('"', "'").replaceAll(',', ', ')}\n`,
      );
      expect(result).toMatchObject({ toolCalls: 8, deniedToolCalls: 4 });
      expect(calls.sort()).toEqual(['f0', 'f2', 'f4', 'f6']);
    });
  }

  it('counts the wait toward the call timeout, and aborts the hook signal when it runs out', async () => {
    const { tool, calls } = deleteTool();
    let hookSignal: AbortSignal | undefined;
    const codecall = codecallWith({
      tools: [tool],
      limits: { toolCallTimeoutMs: 300 },
      approveToolCall: ({ signal }) => {
        hookSignal = signal;
        return new Promise<boolean>(() => {});
      },
    });
    const result = await codecall.execute(callAndReport('delete_file("a.txt")'));
    expect(result.stdout).toMatch(/^denied: delete_file: the tool call timed out after /);
    expect(hookSignal?.aborted).toBe(true);
    expect(calls).toEqual([]);
  });

  it('takes a per-run or per-cell hook in place of the codecall one', async () => {
    const { tool, calls } = deleteTool();
    const codecall = codecallWith({ tools: [tool], approveToolCall: () => false });
    const run = await codecall.execute(callAndReport('delete_file("run.txt")'), { approveToolCall: () => true });
    expect(run.stdout).toBe('deleted run.txt\n');
    const session = codecall.session();
    try {
      const allowed = await session.execute(callAndReport('delete_file("cell.txt")'), { approveToolCall: () => true });
      expect(allowed.stdout).toBe('deleted cell.txt\n');
      const fallback = await session.execute(callAndReport('delete_file("other.txt")'));
      expect(fallback.stdout).toBe('denied: delete_file: the call was denied: the call was denied\n');
    } finally {
      await session.close();
    }
    expect(calls).toEqual(['run.txt', 'cell.txt']);
  });

  it('rejects a bad needsApproval and a bad approveToolCall at definition', () => {
    expect(
      captureError(() =>
        defineTool({
          name: 'x',
          description: 'x',
          inputSchema: { type: 'object' },
          needsApproval: 'yes' as never,
          execute: () => 1,
        }),
      ),
    ).toMatchObject({ code: 'INVALID_TOOL', details: { field: 'needsApproval' } });
    expect(captureError(() => createCodecall({ approveToolCall: 5 as never }))).toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });
});
