import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { CodecallError } from '../../src/core/errors.js';
import { LENT_BUFFER_BYTES } from '../../src/tools/buffered-read.js';
import { createFileTools } from '../../src/tools/builtin-files.js';
import { defineTool } from '../../src/tools/define-tool.js';
import type { RegisteredTool } from '../../src/tools/registered-tool.js';
import { createToolRegistry, registerTool } from '../../src/tools/registry.js';
import type { Tool } from '../../src/tools/types.js';
import { createTestContext } from './test-context.js';

const add = defineTool({
  name: 'add',
  description: 'Add two numbers',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  outputSchema: z.number(),
  execute: async ({ a, b }) => a + b,
});

describe('registerTool', () => {
  it('builds the descriptor codegen reads (JSON Schema only, no $schema)', () => {
    const registered = registerTool(add);
    expect(registered.module).toBeUndefined();
    expect(registered.descriptor).toEqual({
      name: 'add',
      description: 'Add two numbers',
      inputSchema: {
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b'],
      },
      outputSchema: { type: 'number' },
    });
    expect(Object.isFrozen(registered.descriptor)).toBe(true);
  });

  it('passes the checked arguments and the context to execute and awaits it', async () => {
    const execute = vi.fn(async (args: Record<string, unknown>) => ({ got: args }));
    const registered = registerTool({ name: 'echo', description: '', inputSchema: { type: 'object' }, execute });
    const context = createTestContext('echo');
    await expect(registered.invoke({ x: 1 }, context)).resolves.toEqual({ got: { x: 1 } });
    expect(execute).toHaveBeenCalledWith({ x: 1 }, context);
  });

  it('turns a synchronous throw into a rejection', async () => {
    const registered = registerTool({
      name: 'fail',
      description: '',
      inputSchema: { type: 'object' },
      execute: () => {
        throw new Error('broken');
      },
    });
    await expect(registered.invoke({}, createTestContext('fail'))).rejects.toThrow('broken');
  });

  it('checks definitions that did not go through defineTool', () => {
    expect(() => registerTool({ name: 'bad name' } as never)).toThrow(CodecallError);
  });

  it('runs the zod schema end to end: check, then invoke with the output value', async () => {
    const registered = registerTool(add);
    const check = await registered.checkArguments({ a: 1, b: 2 });
    expect(check.ok).toBe(true);
    if (check.ok) await expect(registered.invoke(check.value, createTestContext('add'))).resolves.toBe(3);
  });
});

describe("the built-in read_file's buffered read (the tool-call server's private path)", () => {
  const workspace = mkdtempSync(join(tmpdir(), 'codecall-registry-'));
  afterAll(() => rmSync(workspace, { recursive: true, force: true }));
  writeFileSync(join(workspace, 'a.txt'), 'x'.repeat(10_000));
  const readFile = () => createFileTools({ workspace }).find((tool) => tool.name === 'read_file') as Tool;

  it('is registered with the tool as made, and does what its execute does', async () => {
    const tool = readFile();
    const registered = registerTool(tool);
    expect(registered.bufferedRead).toBeTypeOf('function');
    const lent = Buffer.alloc(LENT_BUFFER_BYTES, 0x2a);
    const read = await registered.bufferedRead?.({ path: 'a.txt' }, createTestContext('read_file'), lent);
    const plain = (await registered.invoke({ path: 'a.txt' }, createTestContext('read_file'))) as Record<
      string,
      unknown
    >;
    expect(read?.value.content).toBe('');
    expect(read?.bytes?.buffer).toBe(lent.buffer);
    expect({ ...read?.value, content: read?.bytes?.toString() }).toEqual({ ...plain });
  });

  it('is left out for a copy of the tool or one whose execute was replaced: their execute runs', () => {
    const tool = readFile();
    expect(registerTool({ ...tool, execute: async () => 'replaced' }).bufferedRead).toBeUndefined();
    (tool as { execute: Tool['execute'] }).execute = async () => 'replaced';
    expect(registerTool(tool).bufferedRead).toBeUndefined();
    expect(registerTool(add).bufferedRead).toBeUndefined();
  });
});

describe('createToolRegistry', () => {
  const echo = registerTool({ name: 'echo', description: '', inputSchema: { type: 'object' }, execute: () => 1 });
  const sum = registerTool(add);

  it('looks tools up by wire name and lists them in order', () => {
    const registry = createToolRegistry([echo, sum]);
    expect(registry.get('add')).toBe(sum);
    expect(registry.get('echo')).toBe(echo);
    expect(registry.get('missing')).toBeUndefined();
    expect(registry.list()).toEqual([echo, sum]);
    expect(registry.size).toBe(2);
  });

  it('is not fooled by names of Object.prototype members', () => {
    const registry = createToolRegistry([echo]);
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expect(registry.get(name)).toBeUndefined();
    }
  });

  it('refuses duplicate wire names', () => {
    let thrown: unknown;
    try {
      createToolRegistry([echo, sum, echo]);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CodecallError);
    expect((thrown as CodecallError).code).toBe('DUPLICATE_TOOL');
    expect((thrown as CodecallError).message).toBe(
      "two tools are named 'echo'; wire names must be unique, so rename one of them",
    );
  });

  it('names the modules of duplicates', () => {
    const upstream: RegisteredTool = { ...echo, module: 'github' };
    expect(() => createToolRegistry([echo, upstream])).toThrow(
      "two tools are named 'echo' (in the root module and 'github'); wire names must be unique, so rename one of them",
    );
  });
});
