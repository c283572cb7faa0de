import { isRecord } from '../core/values.js';
import { pythonStringLiteral } from './python-literals.js';

/** Enum values rendered as `Literal[...]`; a longer enum becomes its base type and is listed in the docstring. */
export const MAX_LITERAL_VALUES = 30;
/** Nesting followed when rendering a type; deeper (or cyclic) schemas become `Any`. */
export const MAX_TYPE_DEPTH = 8;
/** Nesting of `{...}` shapes in a `Returns:` rendering; deeper objects render as `dict`. */
export const MAX_SHAPE_DEPTH = 3;
/** Properties listed per object in a `Returns:` rendering; the rest are summarised as `...`. */
export const MAX_SHAPE_PROPERTIES = 20;
/** Longest `Returns:` rendering; a longer one is redone with less nesting. */
export const MAX_SHAPE_LENGTH = 600;

const ANY = 'Any';
const NONE = 'None';

// A Map, not an object: a schema's `type` is any string ("constructor", "toString"), and must not find an inherited member.
const SIMPLE_TYPES: ReadonlyMap<string, string> = new Map([
  ['string', 'str'],
  ['integer', 'int'],
  ['number', 'float'],
  ['boolean', 'bool'],
  ['null', NONE],
  ['object', 'dict'],
  ['array', 'list'],
]);

type SchemaObject = { readonly [keyword: string]: unknown };

/** True for values `typing.Literal` accepts that JSON can carry: strings, booleans, safe integers. */
function isLiteralValue(value: unknown): value is string | boolean | number {
  return typeof value === 'string' || typeof value === 'boolean' || Number.isSafeInteger(value);
}

function renderLiteralValue(value: string | boolean | number): string {
  if (typeof value === 'string') return pythonStringLiteral(value);
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return String(value);
}

function typeOfJsonValue(value: unknown): string {
  if (value === null) return NONE;
  if (typeof value === 'string') return 'str';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (Array.isArray(value)) return 'list';
  return typeof value === 'object' ? 'dict' : ANY;
}

interface RenderContext {
  /** Render objects with properties as `{"key": type}` (for `Returns:`) instead of `dict`. */
  readonly shapes: boolean;
  /** Remaining `{...}` nesting when `shapes` is on. */
  readonly shapeDepth: number;
  readonly depth: number;
}

/** Collects union members, deduplicated in first-seen order; `Any` absorbs everything, `None` goes last. */
class UnionMembers {
  private readonly members: string[] = [];
  private nullable = false;
  private any = false;

  add(member: string): void {
    if (member === ANY) this.any = true;
    else if (member === NONE) this.nullable = true;
    else if (!this.members.includes(member)) this.members.push(member);
  }

  addAll(other: UnionMembers): void {
    if (other.any) this.any = true;
    if (other.nullable) this.nullable = true;
    for (const member of other.members) this.add(member);
  }

  render(): string {
    if (this.any) return ANY;
    if (this.members.length === 0) return this.nullable ? NONE : ANY;
    return this.nullable ? `${this.members.join(' | ')} | ${NONE}` : this.members.join(' | ');
  }
}

function collect(schema: unknown, context: RenderContext): UnionMembers {
  const union = new UnionMembers();
  if (!isRecord(schema) || context.depth > MAX_TYPE_DEPTH || '$ref' in schema) {
    union.add(ANY);
    return union;
  }
  const inner: RenderContext = { shapes: context.shapes, shapeDepth: context.shapeDepth, depth: context.depth + 1 };
  if (schema.nullable === true) union.add(NONE);

  if ('const' in schema) {
    const value = schema.const;
    union.add(
      value === null ? NONE : isLiteralValue(value) ? `Literal[${renderLiteralValue(value)}]` : typeOfJsonValue(value),
    );
    return union;
  }
  if (Array.isArray(schema.enum)) {
    const values = schema.enum.filter((value) => value !== null);
    if (values.length < schema.enum.length) union.add(NONE);
    if (values.length > 0 && values.length <= MAX_LITERAL_VALUES && values.every(isLiteralValue)) {
      const unique = [...new Set(values)];
      union.add(`Literal[${unique.map(renderLiteralValue).join(', ')}]`);
    } else if (schema.type !== undefined) {
      union.addAll(collectType(schema, inner));
    } else {
      for (const value of values) union.add(typeOfJsonValue(value));
    }
    return union;
  }
  const alternatives = Array.isArray(schema.anyOf)
    ? schema.anyOf
    : Array.isArray(schema.oneOf)
      ? schema.oneOf
      : undefined;
  if (alternatives !== undefined) {
    if (alternatives.length === 0) union.add(ANY);
    for (const alternative of alternatives) union.addAll(collect(alternative, inner));
    return union;
  }
  if (Array.isArray(schema.allOf) && schema.type === undefined) {
    const parts = schema.allOf.map((part) => renderSchema(part, inner));
    const single = parts.length === 1 ? parts[0] : parts.every((part) => part === 'dict') ? 'dict' : undefined;
    union.add(single ?? ANY);
    return union;
  }
  union.addAll(collectType(schema, inner));
  return union;
}

function collectType(schema: SchemaObject, context: RenderContext): UnionMembers {
  const union = new UnionMembers();
  let types: unknown[];
  if (Array.isArray(schema.type)) types = schema.type;
  else if (typeof schema.type === 'string') types = [schema.type];
  else if (isRecord(schema.properties) || 'additionalProperties' in schema) types = ['object'];
  else if ('items' in schema || 'prefixItems' in schema) types = ['array'];
  else types = [];
  if (types.length === 0) union.add(ANY);
  for (const type of types) {
    if (type === 'array') union.add(renderArray(schema, context));
    else if (type === 'object') union.add(renderObject(schema, context));
    else union.add((typeof type === 'string' ? SIMPLE_TYPES.get(type) : undefined) ?? ANY);
  }
  return union;
}

function renderArray(schema: SchemaObject, context: RenderContext): string {
  if (!isRecord(schema.items)) return 'list';
  const item = renderSchema(schema.items, context);
  return item === ANY ? 'list' : `list[${item}]`;
}

function renderObject(schema: SchemaObject, context: RenderContext): string {
  if (!context.shapes || context.shapeDepth <= 0 || !isRecord(schema.properties)) return 'dict';
  const properties = schema.properties;
  const keys = Object.keys(properties);
  if (keys.length === 0) return 'dict';
  const inner: RenderContext = { shapes: context.shapes, shapeDepth: context.shapeDepth - 1, depth: context.depth };
  let text = '{';
  for (let index = 0; index < keys.length && index < MAX_SHAPE_PROPERTIES; index += 1) {
    const key = keys[index] ?? '';
    text += `${index === 0 ? '' : ', '}${pythonStringLiteral(key)}: ${renderSchema(properties[key], inner)}`;
  }
  return keys.length > MAX_SHAPE_PROPERTIES ? `${text}, ...}` : `${text}}`;
}

/**
 * Whether the schema has a keyword that changes its type hint beyond its `type`; without them a single `type` maps
 * directly. `const` and `$ref` count when present at all (see {@link collect}), the others only when set: reading a
 * property is a cheap lookup, `in` a slow one when it misses.
 */
function hasTypeShapingKeyword(schema: SchemaObject): boolean {
  return (
    schema.enum !== undefined ||
    schema.anyOf !== undefined ||
    schema.oneOf !== undefined ||
    schema.allOf !== undefined ||
    schema.nullable !== undefined ||
    'const' in schema ||
    '$ref' in schema
  );
}

/**
 * The rendering of one schema. The most common schemas (one `type`, e.g. `{"type": "string", "description": ...}`)
 * go straight to their hint; the rest go through the union machinery, which gives the same text for those.
 */
function renderSchema(schema: unknown, context: RenderContext): string {
  if (
    context.depth > MAX_TYPE_DEPTH ||
    !isRecord(schema) ||
    typeof schema.type !== 'string' ||
    hasTypeShapingKeyword(schema)
  ) {
    return collect(schema, context).render();
  }
  if (schema.type !== 'array' && schema.type !== 'object') return SIMPLE_TYPES.get(schema.type) ?? ANY;
  const inner: RenderContext = { shapes: context.shapes, shapeDepth: context.shapeDepth, depth: context.depth + 1 };
  return schema.type === 'array' ? renderArray(schema, inner) : renderObject(schema, inner);
}

const TYPE_CONTEXT: RenderContext = { shapes: false, shapeDepth: 0, depth: 0 };

/**
 * The Python type hint for a JSON Schema: string → `str`, integer → `int`, number → `float`, boolean → `bool`,
 * array → `list[item]`, object → `dict`, enum/const → `Literal[...]`, type arrays and `nullable` → `X | None`,
 * anyOf/oneOf → `A | B`, `$ref` and anything unsupported → `Any`.
 */
export function pythonTypeOf(schema: unknown): string {
  return renderSchema(schema, TYPE_CONTEXT);
}

/**
 * A compact rendering of a result's shape for the `Returns:` section: like {@link pythonTypeOf}, but objects with
 * properties show them, e.g. `{"content": str, "size": int}` or `list[{"name": str, "tags": list[str]}]`.
 */
export function pythonShapeOf(schema: unknown): string {
  for (let shapeDepth = MAX_SHAPE_DEPTH; shapeDepth > 0; shapeDepth -= 1) {
    const shape = renderSchema(schema, { shapes: true, shapeDepth, depth: 0 });
    if (shape.length <= MAX_SHAPE_LENGTH) return shape;
  }
  return pythonTypeOf(schema);
}
