import { CodecallError, errorMessage } from '../core/errors.js';
import { isRecord } from '../core/values.js';
import { escapePointerToken } from './json-pointer.js';
import type { JsonSchema, StandardSchema } from './types.js';
import { describeKind } from './value-description.js';

/** Deepest nesting a tool's JSON Schema may have; deeper schemas are refused as malformed. */
export const MAX_SCHEMA_DEPTH = 256;

/** The JSON Schema dialects codecall validates with; drafts 04 and 06 are checked as draft-07. */
export type JsonSchemaDraft = 'draft-2020-12' | 'draft-2019-09' | 'draft-07';

/** A tool schema in the one form the rest of codecall reads. */
export interface NormalisedSchema {
  /** Deep-frozen plain JSON Schema without its top-level `$schema` (codegen and validation read this). */
  readonly jsonSchema: JsonSchema;
  /** Dialect the schema was written in, taken from its `$schema` (2020-12 when absent). */
  readonly draft: JsonSchemaDraft;
}

/** Which of a tool's schemas is being normalised: the arguments must be an object, the result may be anything. */
type SchemaRole = 'inputSchema' | 'outputSchema';

/** True when `value` implements Standard Schema v1 (a zod schema, for example). */
export function isStandardSchema(value: unknown): value is StandardSchema {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const standard: unknown = (value as { '~standard'?: unknown })['~standard'];
  return (
    typeof standard === 'object' &&
    standard !== null &&
    typeof (standard as { validate?: unknown }).validate === 'function'
  );
}

/** True when `value` is a plain object (not an array, class instance or null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isRecord(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * Turns a tool's input schema (JSON Schema or Standard Schema) into a frozen JSON Schema of `type: "object"`.
 * Throws CodecallError('INVALID_TOOL') when the schema cannot describe named arguments.
 */
export function normaliseInputSchema(toolName: string, schema: JsonSchema | StandardSchema): NormalisedSchema {
  const normalised = normaliseSchema(toolName, schema, 'inputSchema');
  const type = normalised.jsonSchema.type;
  if (type !== 'object') {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool '${toolName}': inputSchema must describe an object of named arguments ("type": "object"), ` +
        `but its type is ${type === undefined ? 'missing' : JSON.stringify(type)}; wrap the arguments in an object schema`,
      { tool: toolName, field: 'inputSchema', type },
    );
  }
  return normalised;
}

/** Turns a tool's output schema (JSON Schema or Standard Schema) into a frozen JSON Schema. */
export function normaliseOutputSchema(toolName: string, schema: JsonSchema | StandardSchema): NormalisedSchema {
  return normaliseSchema(toolName, schema, 'outputSchema');
}

function normaliseSchema(toolName: string, schema: unknown, role: SchemaRole): NormalisedSchema {
  const source = isStandardSchema(schema) ? convertStandardSchema(toolName, schema, role) : schema;
  if (!isPlainObject(source)) {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool '${toolName}': ${role} must be a JSON Schema object or a Standard Schema such as a zod schema ` +
        `(got ${describeKind(source)})`,
      { tool: toolName, field: role },
    );
  }
  const copy = copyJson(toolName, role, source, '', 0, new Set()) as Record<string, unknown>;
  const draft = detectDraft(copy.$schema);
  delete copy.$schema;
  return Object.freeze({ jsonSchema: deepFreeze(copy), draft });
}

function convertStandardSchema(toolName: string, schema: StandardSchema, role: SchemaRole): unknown {
  const standard = schema['~standard'];
  const converter = standard.jsonSchema;
  if (converter === undefined || typeof converter.input !== 'function') {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool '${toolName}': its ${role} (a '${standard.vendor}' Standard Schema) cannot produce a JSON Schema ` +
        `('~standard.jsonSchema' is missing); pass a JSON Schema object instead, or upgrade the schema library ` +
        '(zod >= 4.2 provides it)',
      { tool: toolName, field: role, vendor: standard.vendor },
    );
  }
  // The result's shape is documented by what the handler returns (output); arguments by what the script sends (input).
  const convert =
    role === 'outputSchema' && typeof converter.output === 'function' ? converter.output : converter.input;
  try {
    return convert({ target: 'draft-2020-12' });
  } catch (error) {
    const reason = errorMessage(error);
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool '${toolName}': its ${role} cannot be converted to JSON Schema (${reason}); use JSON-compatible ` +
        'types in the schema, or pass a JSON Schema object instead',
      { tool: toolName, field: role, vendor: standard.vendor },
      { cause: error },
    );
  }
}

function detectDraft(schemaUri: unknown): JsonSchemaDraft {
  if (typeof schemaUri !== 'string') return 'draft-2020-12';
  if (schemaUri.includes('2019-09')) return 'draft-2019-09';
  if (/draft-0[3-7]/.test(schemaUri)) return 'draft-07';
  return 'draft-2020-12';
}

// A copy the caller cannot mutate later; refuses anything JSON cannot hold so codegen and Ajv see plain data.
function copyJson(
  toolName: string,
  role: SchemaRole,
  value: unknown,
  pointer: string,
  depth: number,
  ancestors: Set<object>,
): unknown {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return value;
    throw invalidSchemaContent(toolName, role, pointer, String(value));
  }
  if (typeof value !== 'object') throw invalidSchemaContent(toolName, role, pointer, `a ${typeof value}`);
  if (depth >= MAX_SCHEMA_DEPTH) {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool '${toolName}': ${role} is nested more than ${MAX_SCHEMA_DEPTH} levels deep at ${pointer}; ` +
        'use $defs and $ref for recursive shapes',
      { tool: toolName, field: role, pointer },
    );
  }
  if (ancestors.has(value)) throw invalidSchemaContent(toolName, role, pointer, 'a circular reference');
  ancestors.add(value);
  let copy: unknown;
  if (Array.isArray(value)) {
    copy = value.map((item, index) => copyJson(toolName, role, item, `${pointer}/${index}`, depth + 1, ancestors));
  } else if (isPlainObject(value)) {
    const target: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const child = copyJson(toolName, role, value[key], `${pointer}/${escapePointerToken(key)}`, depth + 1, ancestors);
      // defineProperty, so a property literally named "__proto__" stays data instead of replacing the prototype.
      Object.defineProperty(target, key, { value: child, enumerable: true, writable: true, configurable: true });
    }
    copy = target;
  } else {
    throw invalidSchemaContent(toolName, role, pointer, describeKind(value));
  }
  ancestors.delete(value);
  return copy;
}

function invalidSchemaContent(toolName: string, role: SchemaRole, pointer: string, what: string): CodecallError {
  return new CodecallError(
    'INVALID_TOOL',
    `invalid tool '${toolName}': ${role} contains ${what} at ${pointer || '/'}; a JSON Schema must be plain JSON`,
    { tool: toolName, field: role, pointer },
  );
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
