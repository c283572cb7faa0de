import type { Options as AjvOptions, ErrorObject, ValidateFunction } from 'ajv';
import { importModule } from '../core/module-import.js';
import { isRecord } from '../core/values.js';
import type { ArgumentCheck } from './registered-tool.js';
import type { JsonSchemaDraft, NormalisedSchema } from './schema.js';
import { isStandardSchema } from './schema.js';
import { describeThrownValue } from './tool-result.js';
import type { JsonSchema, StandardSchema } from './types.js';
import { describeValue } from './value-description.js';

/** Deepest nesting of arguments accepted; deeper ones are refused before any (recursive) validator sees them. */
export const MAX_ARGUMENT_DEPTH = 256;

/** The only key refused anywhere in arguments: handlers that merge objects would let it replace a prototype. */
const FORBIDDEN_KEY = '__proto__';

/** What `createArgumentValidator` needs to know about a tool. */
export interface ArgumentValidatorOptions {
  /** Wire name, used in every message. */
  readonly toolName: string;
  /** The input schema as the tool gave it (a Standard Schema validates itself). */
  readonly inputSchema: JsonSchema | StandardSchema;
  /** The same schema as JSON Schema (validated with Ajv unless the tool gave a Standard Schema). */
  readonly normalised: NormalisedSchema;
}

/** Checks one call's arguments; the result's `value` is what the handler receives. */
export type ArgumentValidator = (args: unknown) => ArgumentCheck | Promise<ArgumentCheck>;

/** The compiled JSON Schema check of a tool, or the message to report on every call when its schema is broken. */
type CompiledCheck = ValidateFunction | string;

/** How each validator made here compiles its JSON Schema ahead of the first call (see {@link prepareArgumentValidator}). */
const preparers = new WeakMap<ArgumentValidator, () => Promise<void>>();

/**
 * Builds the argument check of one tool. JSON Schemas are compiled with Ajv on first use (then cached), Ajv itself
 * being loaded then (a process that never checks arguments never loads it); {@link prepareArgumentValidator} does
 * both ahead of the first call. Standard Schemas run their own `validate` and their output value (with defaults
 * applied) is passed on. Every message names the tool and the field, e.g.
 * `add: argument 'a' must be number (got string "x")`.
 */
export function createArgumentValidator(options: ArgumentValidatorOptions): ArgumentValidator {
  const { toolName, inputSchema, normalised } = options;
  let compiled: CompiledCheck | undefined;
  const compileNow = (): CompiledCheck | undefined => {
    if (compiled === undefined) {
      const ajv = ajvByDraft.get(normalised.draft);
      if (ajv !== undefined) compiled = compileSchema(ajv, toolName, normalised);
    }
    return compiled;
  };
  const prepare = async (): Promise<void> => {
    if (compiled !== undefined) return;
    try {
      await loadAjv(normalised.draft);
    } catch (error) {
      compiled = `${toolName}: the argument checker could not be loaded (${describeThrownValue(error)}); reinstall codecall's dependencies`;
      return;
    }
    compileNow();
  };
  const jsonValidator = (): CompiledCheck | Promise<CompiledCheck> => {
    const ready = compiled ?? compileNow();
    if (ready !== undefined) return ready;
    return prepare().then(() => compiled ?? `${toolName}: the arguments cannot be checked`);
  };
  const validator: ArgumentValidator = isStandardSchema(inputSchema)
    ? (args) => {
        const problem = checkArgumentShape(toolName, args);
        if (problem !== undefined) return { ok: false, message: problem };
        return validateWithStandardSchema({ toolName, schema: inputSchema, args: args as object, jsonValidator });
      }
    : (args) => {
        const problem = checkArgumentShape(toolName, args);
        if (problem !== undefined) return { ok: false, message: problem };
        const ready = compiled ?? compileNow();
        if (ready === undefined) return prepare().then(() => validator(args));
        return applyJsonCheck(toolName, ready, args);
      };
  // A Standard Schema needs its JSON Schema check only to word a failure: it is compiled when one happens.
  if (!isStandardSchema(inputSchema)) preparers.set(validator, prepare);
  return validator;
}

function applyJsonCheck(toolName: string, validator: CompiledCheck, args: unknown): ArgumentCheck {
  if (typeof validator === 'string') return { ok: false, message: validator };
  if (validator(args)) return { ok: true, value: args };
  return { ok: false, message: describeAjvErrors(toolName, validator.errors ?? [], args as object) };
}

/**
 * Loads Ajv and compiles a validator made by {@link createArgumentValidator} now, so that its first call does not
 * pay for it (a validator made elsewhere needs nothing). Never rejects: a broken schema is reported by the calls.
 */
export function prepareArgumentValidator(validator: ArgumentValidator): Promise<void> {
  return preparers.get(validator)?.() ?? Promise.resolve();
}

// Options shared by the per-draft Ajv instances: lenient about unknown keywords and formats, fills in defaults. A
// schema is not validated against its draft's meta-schema: compiling the meta-schema costs a process 55–85 ms at its
// first argument check (a one-shot `codecall run` calling a tool pays it), and Ajv still refuses a keyword whose value
// has the wrong type when it compiles the schema, which each call then reports (see compileSchema).
const AJV_OPTIONS: AjvOptions = {
  strict: false,
  allErrors: false,
  validateFormats: false,
  addUsedSchema: false,
  useDefaults: true,
  validateSchema: false,
};

/** What codecall uses of an Ajv instance (one class per draft). */
interface SchemaCompiler {
  compile(schema: object): ValidateFunction;
  removeSchema(schema: object): unknown;
}

/** The Ajv instance of each draft, once loaded. */
const ajvByDraft = new Map<JsonSchemaDraft, SchemaCompiler>();
const ajvLoading = new Map<JsonSchemaDraft, Promise<SchemaCompiler>>();

/** An Ajv class of one draft, as codecall constructs it. */
type AjvClass = new (options: AjvOptions) => SchemaCompiler;

/** The Ajv classes of the command's bundle (see scripts/bundle-cli.js), one per draft. */
type AjvClasses = Readonly<Record<'Ajv' | 'Ajv2019' | 'Ajv2020', AjvClass>>;

/**
 * Ajv's classes from the `codecall` command's own Ajv bundle, compiled with its code cache (see src/cli/main.ts);
 * undefined everywhere else.
 */
declare const __codecallLoadAjv: (() => unknown) | undefined;

/** The command's bundled Ajv once looked for: its classes, or null when there is none (the package is imported). */
let bundledAjv: AjvClasses | null | undefined;

function ajvFromBundle(): AjvClasses | undefined {
  if (bundledAjv === undefined) {
    try {
      bundledAjv = typeof __codecallLoadAjv === 'function' ? ((__codecallLoadAjv() as AjvClasses) ?? null) : null;
    } catch {
      bundledAjv = null;
    }
  }
  return bundledAjv ?? undefined;
}

/** The Ajv class of `draft` among the bundled ones. */
function bundledAjvClass(classes: AjvClasses, draft: JsonSchemaDraft): AjvClass {
  if (draft === 'draft-2020-12') return classes.Ajv2020;
  if (draft === 'draft-2019-09') return classes.Ajv2019;
  return classes.Ajv;
}

/** The Ajv class of `draft` from the package, importing only that draft's module. */
function importAjvClass(draft: JsonSchemaDraft): Promise<AjvClass> {
  if (draft === 'draft-2020-12') {
    return importModule<typeof import('ajv/dist/2020.js')>('ajv/dist/2020.js').then(({ Ajv2020 }) => Ajv2020);
  }
  if (draft === 'draft-2019-09') {
    return importModule<typeof import('ajv/dist/2019.js')>('ajv/dist/2019.js').then(({ Ajv2019 }) => Ajv2019);
  }
  return importModule<typeof import('ajv')>('ajv').then(({ Ajv }) => Ajv);
}

// Imported on demand: loading Ajv costs tens of milliseconds, which a run that calls no tool should not pay.
function loadAjv(draft: JsonSchemaDraft): Promise<SchemaCompiler> {
  let loading = ajvLoading.get(draft);
  if (loading === undefined) {
    const bundled = ajvFromBundle();
    const ajvClass = bundled === undefined ? importAjvClass(draft) : Promise.resolve(bundledAjvClass(bundled, draft));
    const created = ajvClass.then((Ajv) => new Ajv(AJV_OPTIONS));
    loading = created.then((ajv) => {
      ajvByDraft.set(draft, ajv);
      return ajv;
    });
    ajvLoading.set(draft, loading);
    loading.catch(() => ajvLoading.delete(draft));
  }
  return loading;
}

// Returns the message to report on every call when the schema itself is broken (a host bug the script should see).
function compileSchema(ajv: SchemaCompiler, toolName: string, normalised: NormalisedSchema): CompiledCheck {
  try {
    return ajv.compile(normalised.jsonSchema);
  } catch (error) {
    return `${toolName}: the tool's input schema is invalid, so its arguments cannot be checked (${describeThrownValue(error)}); this is a problem of the host's tool definition`;
  } finally {
    // The validator is kept by the tool; dropping Ajv's own cache entry lets closed registries be collected.
    ajv.removeSchema(normalised.jsonSchema);
  }
}

/**
 * Refuses what must never reach a validator or handler: non-object arguments, nesting deeper than
 * {@link MAX_ARGUMENT_DEPTH} (walked iteratively, so a 200,000-deep array cannot overflow the stack), and `__proto__`
 * keys. Returns the message, or undefined when the arguments are acceptable.
 */
export function checkArgumentShape(toolName: string, args: unknown): string | undefined {
  if (!isRecord(args)) {
    return `${toolName}: arguments must be an object of named arguments (got ${describeValue(args)})`;
  }
  if (hasOnlyScalarArguments(args)) return undefined;
  // Each entry links to its parent, so the path is built only for a message, never copied per container.
  const pending: PendingContainer[] = [{ value: args, depth: 1, parent: undefined, key: '' }];
  for (let entry = pending.pop(); entry !== undefined; entry = pending.pop()) {
    const { value, depth } = entry;
    if (depth > MAX_ARGUMENT_DEPTH) {
      const start = formatFieldFromPath(pathOfEntry(entry).slice(0, 3));
      return `${toolName}: arguments are nested more than ${MAX_ARGUMENT_DEPTH} levels deep (at ${start}…); send flatter data`;
    }
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index += 1) {
        const item: unknown = value[index];
        if (typeof item === 'object' && item !== null) {
          pending.push({ value: item, depth: depth + 1, parent: entry, key: index });
        }
      }
      continue;
    }
    for (const key of Object.keys(value)) {
      if (key === FORBIDDEN_KEY) {
        const where =
          entry.parent === undefined
            ? 'arguments contain'
            : `argument '${formatFieldFromPath(pathOfEntry(entry))}' contains`;
        return `${toolName}: ${where} the key '${FORBIDDEN_KEY}', which is not allowed`;
      }
      const item: unknown = (value as Record<string, unknown>)[key];
      if (typeof item === 'object' && item !== null) {
        pending.push({ value: item, depth: depth + 1, parent: entry, key });
      }
    }
  }
  return undefined;
}

// Flat arguments, the usual case, need no walk (and no allocation on every call's hot path).
function hasOnlyScalarArguments(args: object): boolean {
  for (const key of Object.keys(args)) {
    if (key === FORBIDDEN_KEY) return false;
    const value: unknown = (args as Record<string, unknown>)[key];
    if (typeof value === 'object' && value !== null) return false;
  }
  return true;
}

/** An object or array still to be walked by {@link checkArgumentShape}. */
interface PendingContainer {
  readonly value: object;
  readonly depth: number;
  readonly parent: PendingContainer | undefined;
  /** Key or index of this container in its parent. */
  readonly key: string | number;
}

function pathOfEntry(entry: PendingContainer): (string | number)[] {
  const path: (string | number)[] = [];
  for (let current: PendingContainer | undefined = entry; current?.parent !== undefined; current = current.parent) {
    path.push(current.key);
  }
  return path.reverse();
}

interface StandardValidation {
  readonly toolName: string;
  readonly schema: StandardSchema;
  readonly args: object;
  /** The JSON Schema validator of the same tool, used only to word a failure the way JSON Schema tools do. */
  readonly jsonValidator: () => CompiledCheck | Promise<CompiledCheck>;
}

// Synchronous when the schema's validate is (zod's usually is), so the common path allocates no promise.
function validateWithStandardSchema(validation: StandardValidation): ArgumentCheck | Promise<ArgumentCheck> {
  const { toolName, schema, args } = validation;
  const failed = (error: unknown): ArgumentCheck => ({
    ok: false,
    message: `${toolName}: checking the arguments failed (${describeThrownValue(error)}); this is a problem of the host's tool definition`,
  });
  let outcome: ReturnType<StandardSchema['~standard']['validate']>;
  try {
    outcome = schema['~standard'].validate(args);
  } catch (error) {
    return failed(error);
  }
  if (outcome instanceof Promise) {
    return outcome.then((result: StandardResult) => interpretStandardResult(validation, result), failed);
  }
  return interpretStandardResult(validation, outcome);
}

type StandardResult = Awaited<ReturnType<StandardSchema['~standard']['validate']>>;

function interpretStandardResult(
  validation: StandardValidation,
  result: StandardResult,
): ArgumentCheck | Promise<ArgumentCheck> {
  if (result.issues === undefined) return { ok: true, value: result.value };
  // The schema's own verdict stands; its JSON Schema, when it also fails, gives the same wording as JSON Schema tools.
  const jsonValidator = validation.jsonValidator();
  if (jsonValidator instanceof Promise) {
    return jsonValidator.then((ready) => describeStandardFailure(validation, result, ready));
  }
  return describeStandardFailure(validation, result, jsonValidator);
}

function describeStandardFailure(
  validation: StandardValidation,
  result: StandardResult,
  jsonValidator: CompiledCheck,
): ArgumentCheck {
  const { toolName, args } = validation;
  const copy = copyForWording(args);
  if (typeof jsonValidator !== 'string' && copy !== undefined && !jsonValidator(copy)) {
    return { ok: false, message: describeAjvErrors(toolName, jsonValidator.errors ?? [], args) };
  }
  const issue = result.issues?.[0];
  if (issue === undefined) return { ok: false, message: `${toolName}: the arguments are invalid` };
  const path = (issue.path ?? []).map((segment) => {
    const key = typeof segment === 'object' && segment !== null ? (segment as { key: unknown }).key : segment;
    return typeof key === 'number' ? key : String(key);
  });
  return { ok: false, message: describeStandardIssue(toolName, issue as StandardIssue, path, args) };
}

// Ajv fills in defaults, so it checks a copy; arguments that cannot be copied (not from the wire) skip the wording.
function copyForWording(args: object): object | undefined {
  try {
    return structuredClone(args);
  } catch {
    return undefined;
  }
}

/** The fields of a Standard Schema issue codecall reads; `code`, `expected`, `keys`, `values` are zod's extras. */
interface StandardIssue {
  readonly message: string;
  readonly code?: unknown;
  readonly expected?: unknown;
  readonly keys?: unknown;
  readonly values?: unknown;
}

function describeStandardIssue(
  toolName: string,
  issue: StandardIssue,
  path: readonly (string | number)[],
  args: object,
): string {
  if (issue.code === 'unrecognized_keys' && Array.isArray(issue.keys) && typeof issue.keys[0] === 'string') {
    return `${toolName}: ${unexpectedField(path, issue.keys[0])}`;
  }
  const lookup = lookUp(args, path);
  if (issue.code === 'invalid_type' && typeof issue.expected === 'string') {
    if (!lookup.present && path.length > 0) {
      return `${toolName}: ${missingField(path.slice(0, -1), String(path[path.length - 1]))}`;
    }
    const expected = issue.expected === 'int' ? 'integer' : issue.expected;
    return `${toolName}: ${subject(path)} must be ${expected} (got ${describeValue(lookup.value)})`;
  }
  if (issue.code === 'invalid_value' && Array.isArray(issue.values) && issue.values.length > 0) {
    return `${toolName}: ${subject(path)} must be ${describeAllowed(issue.values)} (got ${describeValue(lookup.value)})`;
  }
  return `${toolName}: ${subject(path)} ${path.length === 0 ? 'are' : 'is'} invalid: ${issue.message}`;
}

function describeAjvErrors(toolName: string, errors: readonly ErrorObject[], args: object): string {
  const first = errors[0];
  if (first === undefined) return `${toolName}: the arguments are invalid`;
  const combinator = errors.find((error) => error.keyword === 'anyOf' || error.keyword === 'oneOf');
  if (combinator !== undefined) {
    const branches = errors.filter((error) => error !== combinator);
    const types = branches.flatMap((error) =>
      error.keyword === 'type' && error.instancePath === combinator.instancePath ? [error.params.type as unknown] : [],
    );
    const path = pathOf(args, combinator.instancePath);
    const got = describeValue(lookUp(args, path).value);
    if (types.length > 0 && types.length === branches.length) {
      return `${toolName}: ${subject(path)} must be ${types.flat().join(' or ')} (got ${got})`;
    }
    if (combinator.instancePath !== first.instancePath || branches.length === 0) {
      return `${toolName}: ${subject(path)} ${combinator.message ?? 'is invalid'} (got ${got})`;
    }
  }
  const path = pathOf(args, first.instancePath);
  const got = describeValue(lookUp(args, path).value);
  const params = first.params as Record<string, unknown>;
  switch (first.keyword) {
    case 'required':
      return `${toolName}: ${missingField(path, String(params.missingProperty))}`;
    case 'additionalProperties':
      return `${toolName}: ${unexpectedField(path, String(params.additionalProperty))}`;
    case 'unevaluatedProperties':
      return `${toolName}: ${unexpectedField(path, String(params.unevaluatedProperty))}`;
    case 'type':
      return `${toolName}: ${subject(path)} must be ${[params.type].flat().join(' or ')} (got ${got})`;
    case 'enum':
      return `${toolName}: ${subject(path)} must be ${describeAllowed(params.allowedValues)} (got ${got})`;
    case 'const':
      return `${toolName}: ${subject(path)} must be ${describeAllowed([params.allowedValue])} (got ${got})`;
    default:
      return `${toolName}: ${subject(path)} ${first.message ?? 'is invalid'} (got ${got})`;
  }
}

function missingField(parentPath: readonly (string | number)[], name: string): string {
  if (parentPath.length === 0) return `missing required argument '${name}'`;
  return `argument '${formatFieldFromPath(parentPath)}' is missing required field '${name}'`;
}

function unexpectedField(parentPath: readonly (string | number)[], name: string): string {
  if (parentPath.length === 0) return `unexpected argument '${name}'`;
  return `argument '${formatFieldFromPath(parentPath)}' has unexpected field '${name}'`;
}

function subject(path: readonly (string | number)[]): string {
  return path.length === 0 ? 'arguments' : `argument '${formatFieldFromPath(path)}'`;
}

/** Renders a path the way a Python caller reads it: `options.mode`, `items[2].id`. */
function formatFieldFromPath(path: readonly (string | number)[]): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text;
}

// Ajv reports JSON Pointers; array indices become numbers so they render as [n].
function pathOf(args: unknown, instancePath: string): (string | number)[] {
  if (instancePath === '') return [];
  const path: (string | number)[] = [];
  let current: unknown = args;
  for (const raw of instancePath.slice(1).split('/')) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(current)) {
      path.push(Number(key));
      current = current[Number(key)];
    } else {
      path.push(key);
      current =
        typeof current === 'object' && current !== null && Object.hasOwn(current, key)
          ? (current as Record<string, unknown>)[key]
          : undefined;
    }
  }
  return path;
}

function lookUp(args: unknown, path: readonly (string | number)[]): { present: boolean; value: unknown } {
  let current: unknown = args;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, segment)) {
      return { present: false, value: undefined };
    }
    current = (current as Record<string | number, unknown>)[segment];
  }
  return { present: true, value: current };
}

function describeAllowed(values: unknown): string {
  const list = Array.isArray(values) ? values : [values];
  const rendered = list.map((value) => JSON.stringify(value) ?? String(value));
  return rendered.length === 1 ? (rendered[0] ?? '') : `one of ${rendered.join(', ')}`;
}
