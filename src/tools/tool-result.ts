import { clipText } from '../core/wording.js';
import { escapePointerToken } from './json-pointer.js';

/** Longest rendering of a thrown non-Error object kept in the script's error message. */
export const MAX_THROWN_VALUE_PREVIEW_CHARS = 1_000;

/**
 * A tool returned a value that cannot travel as JSON (BigInt, circular structure, function, symbol, NaN, a Map...).
 * The message says what and where, and what to return instead; the engine sends it to the script as a tool error.
 */
export class ToolResultError extends Error {
  /** Wire name of the tool that returned the value. */
  readonly toolName: string;
  /** JSON Pointer of the offending value inside the result (`""` for the result itself). */
  readonly pointer: string;

  constructor(toolName: string, pointer: string, message: string) {
    super(message);
    this.name = 'ToolResultError';
    this.toolName = toolName;
    this.pointer = pointer;
  }
}

/**
 * Renders a handler's return value as JSON text, exactly as `JSON.stringify` would (toJSON honoured, `undefined`
 * properties dropped, `undefined` in arrays → null), except that `undefined` itself becomes `null` and values JSON
 * would silently corrupt or cannot hold are refused with a {@link ToolResultError}. Iterative: deep results cannot
 * overflow the stack. Sizes are not capped here.
 */
export function serializeToolResult(toolName: string, value: unknown): string {
  try {
    if (isFlatJson(value)) return JSON.stringify(value) ?? 'null';
  } catch {
    // A throwing getter or Proxy trap: the checking path below says where.
  }
  try {
    // Fast path: native JSON with a checking replacer (about twice the cost of plain JSON.stringify).
    const text = JSON.stringify(value, checkJsonValue);
    if (text !== undefined) return text;
  } catch {
    // A refused value, a cycle, or nesting too deep for the native recursion: the writer below finds out which.
  }
  return writeWithDiagnostics(toolName, value);
}

/** Most entries of a flat result checked directly; larger results go through the checking replacer. */
const MAX_FLAT_ENTRIES = 32;

function isJsonScalar(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return true;
    case 'number':
      return Number.isFinite(value);
    default:
      return value === null;
  }
}

// The common small results (a scalar, or a plain object or array of scalars) are safe for plain JSON.stringify,
// which is several times cheaper than the checking replacer on every tool call's hot path. (A getter that returns
// something else when JSON.stringify reads it again is the one case this trusts.)
function isFlatJson(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return typeof value !== 'undefined' && isJsonScalar(value);
  if (Array.isArray(value)) {
    if (value.length > MAX_FLAT_ENTRIES || Object.getPrototypeOf(value) !== Array.prototype) return false;
    for (const item of value) if (!isJsonScalar(item)) return false;
    return true;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  if ('toJSON' in value) return false;
  const keys = Object.keys(value);
  if (keys.length > MAX_FLAT_ENTRIES) return false;
  for (const key of keys) {
    if (!isJsonScalar((value as Record<string, unknown>)[key])) return false;
  }
  return true;
}

/** Thrown by {@link checkJsonValue}; carries nothing, the diagnostic writer describes the problem. */
const REFUSED = Object.freeze({ refused: true });

// Replacer that refuses what JSON.stringify would silently drop or corrupt; values arrive after toJSON.
function checkJsonValue(_key: string, value: unknown): unknown {
  switch (typeof value) {
    case 'number':
      if (!Number.isFinite(value)) throw REFUSED;
      return value;
    case 'bigint':
    case 'function':
    case 'symbol':
      throw REFUSED;
    case 'object': {
      // Throws for Maps, Sets, Promises, Errors, binary data and boxed non-finite numbers.
      if (value !== null && !Array.isArray(value)) prepareObject(value);
      return value;
    }
    default:
      return value;
  }
}

// Iterative writer: exact JSON.stringify output for values nested too deep for the fast path, precise errors else.
function writeWithDiagnostics(toolName: string, value: unknown): string {
  const frames: Frame[] = [];
  try {
    return writeJson(value, frames);
  } catch (error) {
    if (error instanceof Refusal) {
      const pointer = currentPointer(frames);
      throw new ToolResultError(toolName, pointer, `${toolName} returned ${error.describe(where(pointer))}`);
    }
    // A throwing Proxy trap, or text beyond the engine's maximum string length.
    throw new ToolResultError(
      toolName,
      '',
      `${toolName} returned a value that cannot be sent as JSON (${describeThrownValue(error)}); return plain data`,
    );
  }
}

/** One object or array being written. `index` is one past the child being written (its key locates errors). */
interface Frame {
  readonly container: object;
  readonly keys: readonly string[] | undefined;
  index: number;
  written: number;
}

// Says what was refused; the pointer is filled in from the frames by the caller, so the hot path builds no strings.
class Refusal {
  constructor(readonly describe: (location: string) => string) {}
}

function writeJson(value: unknown, frames: Frame[]): string {
  const root = prepare(value, '');
  if (root === OMITTED) return 'null';
  const output: string[] = [];
  // The containers on the current path: meeting one again is a cycle (meeting a shared one elsewhere is fine).
  const ancestors = new Set<object>();
  const write = (prepared: unknown): void => {
    if (typeof prepared !== 'object' || prepared === null) {
      output.push(JSON.stringify(prepared));
      return;
    }
    if (ancestors.has(prepared)) {
      throw new Refusal(
        (location) =>
          `a circular structure at ${location} (an object that contains itself), which cannot be sent as JSON; ` +
          'return a copy without the cycle',
      );
    }
    ancestors.add(prepared);
    const isArray = Array.isArray(prepared);
    output.push(isArray ? '[' : '{');
    frames.push({ container: prepared, keys: isArray ? undefined : Object.keys(prepared), index: 0, written: 0 });
  };
  write(root);
  for (let frame = frames.at(-1); frame !== undefined; frame = frames.at(-1)) {
    const { container, keys } = frame;
    if (keys === undefined) {
      const array = container as unknown[];
      if (frame.index >= array.length) {
        output.push(']');
        frames.pop();
        ancestors.delete(container);
        continue;
      }
      const index = frame.index;
      frame.index += 1;
      const prepared = prepare(readProperty(array, index), index);
      if (frame.written > 0) output.push(',');
      frame.written += 1;
      write(prepared === OMITTED ? null : prepared);
      continue;
    }
    if (frame.index >= keys.length) {
      output.push('}');
      frames.pop();
      ancestors.delete(container);
      continue;
    }
    const key = keys[frame.index] as string;
    frame.index += 1;
    const prepared = prepare(readProperty(container, key), key);
    if (prepared === OMITTED) continue;
    output.push(`${frame.written > 0 ? ',' : ''}${JSON.stringify(key)}:`);
    frame.written += 1;
    write(prepared);
  }
  return output.join('');
}

// JSON Pointer of the value being written when a refusal was thrown.
function currentPointer(frames: readonly Frame[]): string {
  let pointer = '';
  for (const frame of frames) {
    const position = frame.index - 1;
    const segment = frame.keys === undefined ? String(position) : escapePointerToken(frame.keys[position] ?? '');
    pointer += `/${segment}`;
  }
  return pointer;
}

/**
 * The message the script sees when a tool throws: an Error's message (with its cause's, when it has one), never a
 * stack trace; a thrown string as is; anything else described plainly. Never throws.
 */
export function describeThrownValue(error: unknown): string {
  try {
    if (error instanceof Error) {
      const message = error.message || error.name || 'the tool failed without a message';
      const cause: unknown = error.cause;
      if (cause instanceof Error && cause.message && !message.includes(cause.message)) {
        return `${message} (cause: ${cause.message})`;
      }
      return message;
    }
    if (typeof error === 'string') return error || 'the tool failed with an empty message';
    if (error === undefined) return 'the tool failed without a message (it threw undefined)';
    if (error === null) return 'the tool failed without a message (it threw null)';
    if (typeof error === 'object') {
      const message: unknown = (error as { message?: unknown }).message;
      if (typeof message === 'string' && message !== '') return message;
      return `the tool failed with a non-Error value: ${preview(error)}`;
    }
    return `the tool failed with a non-Error value: ${String(error)}`;
  } catch {
    return 'the tool failed with a value that cannot be described';
  }
}

/** Marks a value JSON leaves out (undefined): dropped from objects, null in arrays. */
const OMITTED: unique symbol = Symbol('omitted');

// Applies toJSON and unboxing as JSON.stringify does, then refuses what JSON would mangle.
function prepare(value: unknown, key: string | number): unknown {
  let current = value;
  if ((typeof current === 'object' && current !== null) || typeof current === 'bigint') {
    const toJSON: unknown = (current as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      try {
        current = toJSON.call(current, String(key));
      } catch (error) {
        throw new Refusal(
          (location) =>
            `a value at ${location} whose toJSON() threw (${describeThrownValue(error)}); return plain data`,
        );
      }
    }
  }
  switch (typeof current) {
    case 'undefined':
      return OMITTED;
    case 'string':
    case 'boolean':
      return current;
    case 'number':
      if (Number.isFinite(current)) return current;
      throw refuse(Number.isNaN(current) ? 'NaN' : String(current), 'return a number, null or a string');
    case 'bigint':
      throw refuse('a BigInt', 'return a number or string');
    case 'symbol':
      throw refuse('a symbol', 'return a string');
    case 'function':
      throw refuse('a function', 'return plain data (call it, or leave it out)');
    default:
      break;
  }
  if (current === null || Array.isArray(current)) return current;
  return prepareObject(current as object);
}

function prepareObject(object: object): unknown {
  const prototype: unknown = Object.getPrototypeOf(object);
  // Plain objects, the common case, skip the checks below.
  if (prototype === Object.prototype || prototype === null) return object;
  if (object instanceof Number || object instanceof String || object instanceof Boolean) {
    return prepare(object.valueOf(), '');
  }
  if (object instanceof Map || object instanceof WeakMap) {
    throw refuse('a Map', 'return a plain object (Object.fromEntries(map)) or an array');
  }
  if (object instanceof Set || object instanceof WeakSet) throw refuse('a Set', 'return an array ([...set])');
  if (object instanceof Promise) throw refuse('a Promise', 'await it before returning');
  if (object instanceof Error) throw refuse('an Error', 'throw it, or return its message as a string');
  if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) {
    throw refuse('binary data', 'return a string (e.g. base64) or an array of numbers');
  }
  return object;
}

function readProperty(container: object, key: string | number): unknown {
  try {
    return (container as Record<string | number, unknown>)[key];
  } catch (error) {
    throw new Refusal(
      (location) =>
        `a value whose property at ${location} could not be read (${describeThrownValue(error)}); return plain data`,
    );
  }
}

function refuse(what: string, instead: string): Refusal {
  return new Refusal((location) => `${what} at ${location}, which cannot be sent as JSON; ${instead}`);
}

function where(pointer: string): string {
  return pointer === '' ? 'the top level' : pointer;
}

function preview(value: object): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return clipText(text, MAX_THROWN_VALUE_PREVIEW_CHARS);
}
