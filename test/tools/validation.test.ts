import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { ArgumentCheck } from '../../src/tools/registered-tool.js';
import { registerTool } from '../../src/tools/registry.js';
import type { JsonSchema, StandardSchema, Tool } from '../../src/tools/types.js';
import { MAX_ARGUMENT_DEPTH, prepareArgumentValidator } from '../../src/tools/validation.js';
import { createTestContext } from './test-context.js';

const addSchema: JsonSchema = {
  type: 'object',
  properties: { a: { type: 'number' }, b: { type: 'number' } },
  required: ['a', 'b'],
  additionalProperties: false,
};

function jsonTool(name: string, inputSchema: JsonSchema, execute: Tool['execute'] = () => null): Tool {
  return { name, description: name, inputSchema, execute };
}

async function messageOf(check: ArgumentCheck | Promise<ArgumentCheck>): Promise<string> {
  const result = await check;
  if (result.ok) throw new Error(`expected a failed check, got ${JSON.stringify(result.value)}`);
  return result.message;
}

describe('JSON Schema argument checks', () => {
  const add = registerTool(jsonTool('add', addSchema));
  const readFile = registerTool(
    jsonTool('read_file', {
      type: 'object',
      properties: {
        path: { type: 'string' },
        mode: { enum: ['r', 'w'] },
        kind: { const: 'text' },
        encoding: { anyOf: [{ type: 'string' }, { type: 'null' }] },
        count: { type: 'integer', minimum: 1 },
        options: {
          type: 'object',
          properties: { depth: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } },
          required: ['depth'],
          additionalProperties: false,
        },
      },
      required: ['path'],
    }),
  );

  it('accepts valid arguments and passes them on', async () => {
    expect(await add.checkArguments({ a: 1, b: 2 })).toEqual({ ok: true, value: { a: 1, b: 2 } });
  });

  it('checks synchronously once prepared, so the hot path of a call allocates no promise', async () => {
    const tool = registerTool(jsonTool('prepared', { type: 'object', properties: { n: { type: 'integer' } } }));
    await prepareArgumentValidator(tool.checkArguments);
    expect(tool.checkArguments({ n: 1 })).toEqual({ ok: true, value: { n: 1 } });
    expect(tool.checkArguments({ n: 'x' })).toEqual({
      ok: false,
      message: `prepared: argument 'n' must be integer (got string "x")`,
    });
  });

  it.each([
    [{ a: 'x', b: 2 }, `add: argument 'a' must be number (got string "x")`],
    [{ a: 1 }, `add: missing required argument 'b'`],
    [{ a: 1, b: 2, c: 3 }, `add: unexpected argument 'c'`],
    [{ a: true, b: 2 }, `add: argument 'a' must be number (got boolean true)`],
    [{ a: null, b: 2 }, `add: argument 'a' must be number (got null)`],
    [{ a: [1], b: 2 }, `add: argument 'a' must be number (got array)`],
    [{ a: 'y'.repeat(100), b: 2 }, `add: argument 'a' must be number (got string "${'y'.repeat(40)}…")`],
  ])('add(%j) → %s', async (args, expected) => {
    expect(await messageOf(add.checkArguments(args))).toBe(expected);
  });

  it.each([
    [{}, `read_file: missing required argument 'path'`],
    [{ path: 1 }, `read_file: argument 'path' must be string (got number 1)`],
    [{ path: 'p', mode: 'x' }, `read_file: argument 'mode' must be one of "r", "w" (got string "x")`],
    [{ path: 'p', kind: 'binary' }, `read_file: argument 'kind' must be "text" (got string "binary")`],
    [{ path: 'p', encoding: 5 }, `read_file: argument 'encoding' must be string or null (got number 5)`],
    [{ path: 'p', count: 1.5 }, `read_file: argument 'count' must be integer (got number 1.5)`],
    [{ path: 'p', count: 0 }, `read_file: argument 'count' must be >= 1 (got number 0)`],
    [{ path: 'p', options: {} }, `read_file: argument 'options' is missing required field 'depth'`],
    [{ path: 'p', options: { depth: 1, x: 1 } }, `read_file: argument 'options' has unexpected field 'x'`],
    [
      { path: 'p', options: { depth: 1, tags: ['a', 2] } },
      `read_file: argument 'options.tags[1]' must be string (got number 2)`,
    ],
  ])('read_file(%j) → %s', async (args, expected) => {
    expect(await messageOf(readFile.checkArguments(args))).toBe(expected);
  });

  it.each([
    [null, 'null'],
    [[1, 2], 'array'],
    ['path', 'string "path"'],
    [7, 'number 7'],
    [undefined, 'undefined'],
  ])('refuses non-object arguments %j', async (args, got) => {
    expect(await messageOf(add.checkArguments(args))).toBe(
      `add: arguments must be an object of named arguments (got ${got})`,
    );
  });

  it('applies JSON Schema defaults to the value passed on', async () => {
    const tool = registerTool(
      jsonTool('page', { type: 'object', properties: { size: { type: 'integer', default: 10 } } }),
    );
    expect(await tool.checkArguments({})).toEqual({ ok: true, value: { size: 10 } });
  });

  it('validates draft-07 schemas with the draft-07 validator', async () => {
    const tool = registerTool(
      jsonTool('legacy', {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { items: { type: 'array', items: [{ type: 'string' }, { type: 'number' }] } },
        definitions: { unused: { type: 'string' } },
      }),
    );
    expect(await tool.checkArguments({ items: ['a', 1] })).toEqual({ ok: true, value: { items: ['a', 1] } });
    expect(await messageOf(tool.checkArguments({ items: [1, 1] }))).toBe(
      `legacy: argument 'items[0]' must be string (got number 1)`,
    );
  });

  it('lets two tools use the same $id (schemas are not added to the shared validator)', async () => {
    const schema: JsonSchema = {
      $id: 'https://example.com/args',
      type: 'object',
      properties: { a: { type: 'string' } },
    };
    const first = registerTool(jsonTool('first', schema));
    const second = registerTool(jsonTool('second', { ...schema, properties: { a: { type: 'number' } } }));
    expect((await first.checkArguments({ a: 'x' })).ok).toBe(true);
    expect((await second.checkArguments({ a: 1 })).ok).toBe(true);
  });

  it('ignores formats rather than failing on unknown ones', async () => {
    const tool = registerTool(
      jsonTool('mail', { type: 'object', properties: { to: { type: 'string', format: 'email' } } }),
    );
    expect((await tool.checkArguments({ to: 'not-an-email' })).ok).toBe(true);
  });

  it('reports a keyword of the wrong type in the schema on each call, without a meta-schema check', async () => {
    const tool = registerTool(
      jsonTool('malformed', { type: 'object', properties: { a: { type: 'number', minimum: 'zero' } } }),
    );
    const message = await messageOf(tool.checkArguments({ a: 1 }));
    expect(message).toBe(
      'malformed: the tool\'s input schema is invalid, so its arguments cannot be checked (minimum value must be ["number"]); this is a problem of the host\'s tool definition',
    );
  });

  it('reports a schema Ajv cannot compile on each call instead of crashing', async () => {
    const tool = registerTool(jsonTool('broken', { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }));
    const message = await messageOf(tool.checkArguments({ a: 1 }));
    expect(message).toMatch(/^broken: the tool's input schema is invalid, so its arguments cannot be checked \(/);
    expect(await messageOf(tool.checkArguments({ a: 1 }))).toBe(message);
  });
});

describe('Standard Schema (zod) argument checks', () => {
  const add = registerTool({
    name: 'add',
    description: 'Add',
    inputSchema: z.strictObject({ a: z.number(), b: z.number().default(2), n: z.int().optional() }),
    execute: () => null,
  });

  it('passes on the schema output value, with defaults applied', async () => {
    expect(await add.checkArguments({ a: 1 })).toEqual({ ok: true, value: { a: 1, b: 2 } });
  });

  it.each([
    [{ a: 'x' }, `add: argument 'a' must be number (got string "x")`],
    [{}, `add: missing required argument 'a'`],
    [{ a: 1, c: 3 }, `add: unexpected argument 'c'`],
    [{ a: 1, n: 1.5 }, `add: argument 'n' must be integer (got number 1.5)`],
    [[1], `add: arguments must be an object of named arguments (got array)`],
  ])('add(%j) → %s', async (args, expected) => {
    expect(await messageOf(add.checkArguments(args))).toBe(expected);
  });

  it('words unions and nullable fields like JSON Schema tools', async () => {
    const tool = registerTool({
      name: 'pick',
      description: '',
      inputSchema: z.object({ value: z.union([z.string(), z.number()]), label: z.string().nullable().optional() }),
      execute: () => null,
    });
    expect(await messageOf(tool.checkArguments({ value: true }))).toBe(
      `pick: argument 'value' must be string or number (got boolean true)`,
    );
    expect(await messageOf(tool.checkArguments({ value: 1, label: 5 }))).toBe(
      `pick: argument 'label' must be string or null (got number 5)`,
    );
  });

  it('words enum, nested and refinement failures', async () => {
    const tool = registerTool({
      name: 'search',
      description: 'Search',
      inputSchema: z.object({
        mode: z.enum(['fast', 'full']).optional(),
        options: z.object({ depth: z.number() }).optional(),
        query: z
          .string()
          .refine((value) => value.trim() !== '', 'must not be blank')
          .optional(),
      }),
      execute: () => null,
    });
    expect(await messageOf(tool.checkArguments({ mode: 'x' }))).toBe(
      `search: argument 'mode' must be one of "fast", "full" (got string "x")`,
    );
    expect(await messageOf(tool.checkArguments({ options: {} }))).toBe(
      `search: argument 'options' is missing required field 'depth'`,
    );
    expect(await messageOf(tool.checkArguments({ query: '  ' }))).toBe(
      `search: argument 'query' is invalid: must not be blank`,
    );
  });

  it('supports asynchronous Standard Schemas and reports a throwing validator', async () => {
    const asyncSchema = z.object({ a: z.string().refine(async (value) => value === 'ok', 'is not ok') });
    const asyncTool = registerTool({ name: 'later', description: '', inputSchema: asyncSchema, execute: () => null });
    expect(await asyncTool.checkArguments({ a: 'ok' })).toEqual({ ok: true, value: { a: 'ok' } });
    expect(await messageOf(asyncTool.checkArguments({ a: 'no' }))).toBe(`later: argument 'a' is invalid: is not ok`);

    const throwing: StandardSchema<unknown, Record<string, unknown>> = {
      '~standard': {
        version: 1,
        vendor: 'custom',
        validate: () => {
          throw new Error('boom');
        },
        jsonSchema: { input: () => ({ type: 'object' }) },
      },
    };
    const tool = registerTool({ name: 'odd', description: '', inputSchema: throwing, execute: () => null });
    expect(await messageOf(tool.checkArguments({}))).toBe(
      "odd: checking the arguments failed (boom); this is a problem of the host's tool definition",
    );
  });
});

describe('hostile arguments', () => {
  it('does not call the handler when the arguments are invalid (checked by the caller)', async () => {
    const execute = vi.fn(() => 3);
    const tool = registerTool(jsonTool('add', addSchema, execute));
    const check = await tool.checkArguments({ a: 'x', b: 1 });
    expect(check.ok).toBe(false);
    if (check.ok) await tool.invoke(check.value, createTestContext('add'));
    expect(execute).not.toHaveBeenCalled();
  });

  it('refuses __proto__ keys anywhere (P11) and pollutes nothing', async () => {
    const execute = vi.fn((args: Record<string, unknown>) => Object.assign({}, args));
    const tool = registerTool(jsonTool('config', { type: 'object' }, execute));
    const top = JSON.parse('{"__proto__":{"admin":true}}') as unknown;
    const nested = JSON.parse('{"settings":[{"ok":1},{"__proto__":{"admin":true}}]}') as unknown;
    expect(await messageOf(tool.checkArguments(top))).toBe(
      "config: arguments contain the key '__proto__', which is not allowed",
    );
    expect(await messageOf(tool.checkArguments(nested))).toBe(
      "config: argument 'settings[1]' contains the key '__proto__', which is not allowed",
    );
    const zodTool = registerTool({
      name: 'zod_config',
      description: '',
      inputSchema: z.object({}).loose(),
      execute: () => null,
    });
    expect(await messageOf(zodTool.checkArguments(top))).toBe(
      "zod_config: arguments contain the key '__proto__', which is not allowed",
    );
    expect(execute).not.toHaveBeenCalled();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('admin');
  });

  it('allows constructor and prototype as ordinary keys', async () => {
    const tool = registerTool(jsonTool('keys', { type: 'object' }));
    expect((await tool.checkArguments({ constructor: 'x', prototype: { a: 1 } })).ok).toBe(true);
  });

  it('refuses a 200,000-deep array without overflowing the stack (P12)', async () => {
    const text = `{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    const args = JSON.parse(text) as unknown;
    const execute = vi.fn();
    for (const inputSchema of [
      { type: 'object', properties: { a: { type: 'array' } } } satisfies JsonSchema,
      z.object({ a: z.array(z.unknown()) }),
    ]) {
      const tool = registerTool({ name: 'deep', description: '', inputSchema, execute });
      const message = await messageOf(tool.checkArguments(args));
      expect(message).toBe(
        `deep: arguments are nested more than ${MAX_ARGUMENT_DEPTH} levels deep (at a[0][0]…); send flatter data`,
      );
    }
    expect(execute).not.toHaveBeenCalled();
  });

  it('accepts nesting up to the limit', async () => {
    let value: unknown = 1;
    for (let level = 0; level < MAX_ARGUMENT_DEPTH - 1; level += 1) value = [value];
    const tool = registerTool(jsonTool('deep', { type: 'object' }));
    expect((await tool.checkArguments({ a: value })).ok).toBe(true);
    expect((await tool.checkArguments({ a: [value] })).ok).toBe(false);
  });
});
