import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isStandardSchema, normaliseInputSchema, normaliseOutputSchema } from '../../src/tools/schema.js';
import type { JsonSchema, StandardSchema } from '../../src/tools/types.js';
import { captureError } from '../support/capture-error.js';

describe('normaliseInputSchema with JSON Schema', () => {
  it('passes the schema through as a deep-frozen copy without $schema', () => {
    const schema: JsonSchema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { path: { type: 'string' } },
      required: ['path'],
    };
    const normalised = normaliseInputSchema('read_file', schema);
    expect(normalised.jsonSchema).toEqual({
      type: 'object',
      properties: { path: { type: 'string' } },
      required: ['path'],
    });
    expect(normalised.jsonSchema).not.toBe(schema);
    expect(normalised.draft).toBe('draft-2020-12');
    expect(Object.isFrozen(normalised.jsonSchema)).toBe(true);
    expect(Object.isFrozen((normalised.jsonSchema.properties as Record<string, unknown>).path)).toBe(true);
    expect(Object.isFrozen(normalised.jsonSchema.required)).toBe(true);
    // The caller's object is untouched and later changes to it do not leak in.
    expect(schema.$schema).toBeDefined();
    (schema.properties as Record<string, unknown>).extra = { type: 'number' };
    expect(normalised.jsonSchema.properties).not.toHaveProperty('extra');
  });

  it.each([
    [undefined, 'draft-2020-12'],
    ['https://json-schema.org/draft/2020-12/schema', 'draft-2020-12'],
    ['https://json-schema.org/draft/2019-09/schema', 'draft-2019-09'],
    ['http://json-schema.org/draft-07/schema#', 'draft-07'],
    ['http://json-schema.org/draft-04/schema#', 'draft-07'],
  ])('detects the draft of $schema %j', (uri, draft) => {
    const schema: JsonSchema = uri === undefined ? { type: 'object' } : { $schema: uri, type: 'object' };
    expect(normaliseInputSchema('t', schema).draft).toBe(draft);
  });

  it('keeps a property named __proto__ as data', () => {
    const schema = JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}') as JsonSchema;
    const normalised = normaliseInputSchema('t', schema);
    const properties = normalised.jsonSchema.properties as Record<string, unknown>;
    expect(Object.hasOwn(properties, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(properties)).toBe(Object.prototype);
  });

  it('refuses schemas that are not plain JSON', () => {
    const circular: Record<string, unknown> = { type: 'object' };
    circular.properties = { self: circular };
    expect(captureError(() => normaliseInputSchema('t', circular)).message).toBe(
      "invalid tool 't': inputSchema contains a circular reference at /properties/self; a JSON Schema must be plain JSON",
    );
    expect(
      captureError(() => normaliseInputSchema('t', { type: 'object', properties: { a: { maximum: Number.NaN } } }))
        .message,
    ).toBe("invalid tool 't': inputSchema contains NaN at /properties/a/maximum; a JSON Schema must be plain JSON");
    expect(captureError(() => normaliseInputSchema('t', { type: 'object', default: new Date(0) })).message).toBe(
      "invalid tool 't': inputSchema contains an instance of Date at /default; a JSON Schema must be plain JSON",
    );
  });

  it('refuses a schema nested beyond the limit', () => {
    let schema: JsonSchema = { type: 'string' };
    for (let level = 0; level < 300; level += 1) schema = { type: 'object', properties: { a: schema } };
    const error = captureError(() => normaliseInputSchema('t', schema));
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toContain('nested more than 256 levels deep');
  });

  it('refuses an input schema that is not of type object', () => {
    const error = captureError(() => normaliseInputSchema('t', { type: 'array' }));
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toBe(
      'invalid tool \'t\': inputSchema must describe an object of named arguments ("type": "object"), but its type is "array"; wrap the arguments in an object schema',
    );
  });
});

describe('normaliseInputSchema with Standard Schema', () => {
  it('recognises zod schemas as Standard Schemas', () => {
    expect(isStandardSchema(z.object({}))).toBe(true);
    expect(isStandardSchema({ type: 'object' })).toBe(false);
    expect(isStandardSchema(null)).toBe(false);
  });

  it('converts a zod object with its own jsonSchema.input (draft 2020-12) and strips $schema', () => {
    const schema = z.object({
      path: z.string().describe('File path'),
      offset: z.number().int().min(1).optional(),
      mode: z.enum(['r', 'w']).default('r'),
    });
    const normalised = normaliseInputSchema('read_file', schema);
    expect(normalised.draft).toBe('draft-2020-12');
    expect(normalised.jsonSchema).not.toHaveProperty('$schema');
    expect(normalised.jsonSchema.type).toBe('object');
    expect(normalised.jsonSchema.required).toEqual(['path']);
    expect(normalised.jsonSchema.properties).toMatchObject({
      path: { type: 'string', description: 'File path' },
      offset: { type: 'integer', minimum: 1 },
      mode: { type: 'string', enum: ['r', 'w'], default: 'r' },
    });
    expect(Object.isFrozen(normalised.jsonSchema)).toBe(true);
  });

  it('uses the output JSON Schema for an output schema', () => {
    const normalised = normaliseOutputSchema('t', z.object({ total: z.number().default(0) }));
    expect(normalised.jsonSchema.required).toEqual(['total']);
  });

  it('refuses a zod schema that is not an object', () => {
    const error = captureError(() => normaliseInputSchema('t', z.string()));
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toContain('but its type is "string"');
  });

  it('reports a zod schema that cannot be converted', () => {
    const error = captureError(() => normaliseInputSchema('t', z.object({ when: z.date() })));
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toBe(
      "invalid tool 't': its inputSchema cannot be converted to JSON Schema (Date cannot be represented in JSON Schema); use JSON-compatible types in the schema, or pass a JSON Schema object instead",
    );
  });

  it('refuses a Standard Schema without a JSON Schema converter', () => {
    const legacy: StandardSchema = {
      '~standard': { version: 1, vendor: 'legacy', validate: (value) => ({ value }) },
    };
    const error = captureError(() => normaliseInputSchema('t', legacy));
    expect(error.code).toBe('INVALID_TOOL');
    expect(error.message).toBe(
      "invalid tool 't': its inputSchema (a 'legacy' Standard Schema) cannot produce a JSON Schema ('~standard.jsonSchema' is missing); pass a JSON Schema object instead, or upgrade the schema library (zod >= 4.2 provides it)",
    );
  });
});
