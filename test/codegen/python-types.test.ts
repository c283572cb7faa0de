import { describe, expect, it } from 'vitest';
import { MAX_LITERAL_VALUES, pythonShapeOf, pythonTypeOf } from '../../src/codegen/python-types.js';

describe('pythonTypeOf', () => {
  it('maps the simple types', () => {
    expect(pythonTypeOf({ type: 'string' })).toBe('str');
    expect(pythonTypeOf({ type: 'integer' })).toBe('int');
    expect(pythonTypeOf({ type: 'number' })).toBe('float');
    expect(pythonTypeOf({ type: 'boolean' })).toBe('bool');
    expect(pythonTypeOf({ type: 'null' })).toBe('None');
    expect(pythonTypeOf({ type: 'object', properties: { a: { type: 'string' } } })).toBe('dict');
  });

  it('renders arrays with their item type', () => {
    expect(pythonTypeOf({ type: 'array', items: { type: 'string' } })).toBe('list[str]');
    expect(pythonTypeOf({ type: 'array', items: { type: 'array', items: { type: 'integer' } } })).toBe(
      'list[list[int]]',
    );
    expect(pythonTypeOf({ type: 'array', items: { type: 'object' } })).toBe('list[dict]');
    expect(pythonTypeOf({ type: 'array' })).toBe('list');
    expect(pythonTypeOf({ type: 'array', items: {} })).toBe('list');
  });

  it('renders enums and consts as Literal', () => {
    expect(pythonTypeOf({ type: 'string', enum: ['a', 'b'] })).toBe('Literal["a", "b"]');
    expect(pythonTypeOf({ enum: [1, 2, true] })).toBe('Literal[1, 2, True]');
    expect(pythonTypeOf({ enum: ['a', null] })).toBe('Literal["a"] | None');
    expect(pythonTypeOf({ const: 'fixed' })).toBe('Literal["fixed"]');
    expect(pythonTypeOf({ enum: ['say "hi"'] })).toBe('Literal["say \\"hi\\""]');
  });

  it('falls back to the base type for enums Literal cannot hold', () => {
    expect(pythonTypeOf({ type: 'number', enum: [0.5, 1.5] })).toBe('float');
    expect(pythonTypeOf({ enum: [0.5, 'x'] })).toBe('float | str');
    const many = Array.from({ length: MAX_LITERAL_VALUES + 1 }, (_, index) => `v${index}`);
    expect(pythonTypeOf({ type: 'string', enum: many })).toBe('str');
  });

  it('renders nullable types and type arrays as unions with None last', () => {
    expect(pythonTypeOf({ type: ['string', 'null'] })).toBe('str | None');
    expect(pythonTypeOf({ type: ['null', 'integer', 'string'] })).toBe('int | str | None');
    expect(pythonTypeOf({ type: 'string', nullable: true })).toBe('str | None');
  });

  it('renders anyOf/oneOf as unions', () => {
    expect(pythonTypeOf({ anyOf: [{ type: 'string' }, { type: 'integer' }] })).toBe('str | int');
    expect(pythonTypeOf({ oneOf: [{ type: 'string' }, { type: 'null' }] })).toBe('str | None');
    expect(pythonTypeOf({ anyOf: [{ type: 'string' }, { type: 'string', format: 'uri' }] })).toBe('str');
    expect(pythonTypeOf({ anyOf: [{ type: 'string' }, { $ref: '#/$defs/x' }] })).toBe('Any');
  });

  it('uses Any for $ref, unknown and missing types', () => {
    expect(pythonTypeOf({ $ref: '#/$defs/Thing' })).toBe('Any');
    expect(pythonTypeOf({})).toBe('Any');
    expect(pythonTypeOf(true)).toBe('Any');
    expect(pythonTypeOf({ type: 'bigint' })).toBe('Any');
    expect(pythonTypeOf(undefined)).toBe('Any');
  });

  // A schema's `type` comes from whoever defined the tool (an upstream MCP server among them): the names of an
  // object's inherited members are unknown types like any other, not members found by a lookup.
  it('uses Any for types named like inherited object members', () => {
    for (const type of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      expect(pythonTypeOf({ type })).toBe('Any');
      expect(pythonTypeOf({ type: [type, 'null'] })).toBe('Any');
      expect(pythonTypeOf({ type: 'array', items: { type } })).toBe('list');
      expect(pythonShapeOf({ type: 'object', properties: { value: { type } } })).toBe('{"value": Any}');
    }
  });

  it('infers objects and arrays from their keywords', () => {
    expect(pythonTypeOf({ properties: { a: {} } })).toBe('dict');
    expect(pythonTypeOf({ items: { type: 'string' } })).toBe('list[str]');
    expect(pythonTypeOf({ allOf: [{ type: 'object' }, { properties: { a: {} } }] })).toBe('dict');
  });

  it('survives cyclic schemas', () => {
    const node: Record<string, unknown> = { type: 'array' };
    node.items = node;
    expect(pythonTypeOf(node)).toBe('list[list[list[list[list[list[list[list[list]]]]]]]]');
  });
});

describe('pythonShapeOf', () => {
  it('shows the properties of objects', () => {
    expect(
      pythonShapeOf({ type: 'object', properties: { content: { type: 'string' }, size: { type: 'integer' } } }),
    ).toBe('{"content": str, "size": int}');
  });

  it('shows nested objects and arrays of objects', () => {
    expect(
      pythonShapeOf({
        type: 'array',
        items: {
          type: 'object',
          properties: {
            name: { type: 'string' },
            owner: { type: 'object', properties: { login: { type: 'string' } } },
            labels: { type: 'array', items: { type: 'string' } },
            state: { enum: ['open', 'closed'] },
            closed_at: { type: ['string', 'null'] },
          },
        },
      }),
    ).toBe(
      'list[{"name": str, "owner": {"login": str}, "labels": list[str], "state": Literal["open", "closed"], ' +
        '"closed_at": str | None}]',
    );
  });

  it('stops nesting at three levels and summarises long property lists', () => {
    const deep = {
      type: 'object',
      properties: {
        a: {
          type: 'object',
          properties: { b: { type: 'object', properties: { c: { type: 'object', properties: { d: {} } } } } },
        },
      },
    };
    expect(pythonShapeOf(deep)).toBe('{"a": {"b": {"c": dict}}}');
    const wide = {
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`p${i}`, { type: 'integer' }])),
    };
    expect(pythonShapeOf(wide)).toMatch(/^\{"p0": int, .*"p19": int, \.\.\.\}$/);
  });

  it('renders non-object results like type hints', () => {
    expect(pythonShapeOf({ type: 'string' })).toBe('str');
    expect(pythonShapeOf({ type: 'object' })).toBe('dict');
  });
});
