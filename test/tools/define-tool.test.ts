import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define-tool.js';
import type { Tool } from '../../src/tools/types.js';
import { captureError } from '../support/capture-error.js';

const objectSchema = { type: 'object', properties: { a: { type: 'number' } } } as const;

describe('defineTool', () => {
  it('returns the very definition it was given', () => {
    const definition = { name: 'add', description: 'Add', inputSchema: objectSchema, execute: () => 1 };
    expect(defineTool(definition)).toBe(definition);
  });

  it('accepts names of letters, digits, _, - and . up to 128 characters', () => {
    for (const name of ['a', 'read_file', 'github.create-issue', 'x'.repeat(128)]) {
      expect(() => defineTool({ name, description: '', inputSchema: objectSchema, execute: () => 1 })).not.toThrow();
    }
  });

  it.each([
    ['', 'invalid tool name ""'],
    ['has space', 'invalid tool name "has space"'],
    ['x'.repeat(129), 'invalid tool name'],
    ['a/b', 'invalid tool name "a/b"'],
    ['$exception', 'invalid tool name "$exception"'],
  ])('refuses the name %j', (name, expected) => {
    const error = captureError(() =>
      defineTool({ name, description: '', inputSchema: objectSchema, execute: () => 1 }),
    );
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toContain(expected);
    expect(error.message).toContain("use 1 to 128 letters, digits, '_', '-' or '.'");
  });

  it('refuses a non-string name and a non-object definition', () => {
    expect(captureError(() => defineTool({ name: 3 } as never)).message).toBe(
      'invalid tool: name must be a string (got number)',
    );
    expect(captureError(() => defineTool(null as never)).message).toBe(
      'invalid tool: expected an object with name, description, inputSchema and execute (got null)',
    );
  });

  it('names the tool and the problem for each bad field', () => {
    const base = { name: 'add', description: 'Add', inputSchema: objectSchema, execute: () => 1 };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ description: 5 }, "invalid tool 'add': description must be a string (got number)"],
      [
        { inputSchema: [] },
        'invalid tool \'add\': inputSchema must be a JSON Schema object with "type": "object" or a Standard Schema such as a zod object (got an array)',
      ],
      [
        { inputSchema: { type: 'string' } },
        'invalid tool \'add\': inputSchema must describe an object of named arguments ("type": "object"), but its type is "string"',
      ],
      [
        { inputSchema: { properties: {} } },
        'invalid tool \'add\': inputSchema must describe an object of named arguments ("type": "object"), but its type is missing',
      ],
      [{ execute: 'run' }, 'invalid tool \'add\': execute must be a function (got string "run")'],
      [
        { outputSchema: 42 },
        "invalid tool 'add': outputSchema must be a JSON Schema object or a Standard Schema when given (got number)",
      ],
    ];
    for (const [override, message] of cases) {
      const error = captureError(() => defineTool({ ...base, ...override } as never));
      expect(error.code).toBe('INVALID_TOOL');
      expect(error.message).toBe(message);
      expect(error.details.tool).toBe('add');
    }
  });

  it('accepts a zod object and types execute from it', () => {
    const tool = defineTool({
      name: 'add',
      description: 'Add two numbers',
      inputSchema: z.object({ a: z.number(), b: z.number().default(2) }),
      execute: async ({ a, b }) => {
        expectTypeOf(a).toEqualTypeOf<number>();
        expectTypeOf(b).toEqualTypeOf<number>();
        return a + b;
      },
    });
    expectTypeOf(tool).toEqualTypeOf<Tool<{ a: number; b: number }, number>>();
    // A typed tool goes where untyped tools go (the `tools` option takes Tool[]).
    const tools: Tool[] = [tool];
    expect(tools).toHaveLength(1);
  });

  it('types execute as Record<string, unknown> for a JSON Schema', () => {
    defineTool({
      name: 'echo',
      description: 'Echo',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
      execute: (args) => {
        expectTypeOf(args).toEqualTypeOf<Record<string, unknown>>();
        return args.text;
      },
    });
  });
});
