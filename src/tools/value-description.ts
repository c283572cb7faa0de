import { clipText } from '../core/wording.js';

/** Longest string quoted back in a message about a bad value ("got string ..."); longer ones are cut with an ellipsis. */
export const MAX_QUOTED_VALUE_CHARS = 40;

function quotedString(value: string): string {
  return `string ${JSON.stringify(clipText(value, MAX_QUOTED_VALUE_CHARS))}`;
}

/** Describes a received value for a message: `string "x"`, `number 5`, `boolean true`, `null`, `array`, `object`. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'string':
      return quotedString(value);
    case 'number':
    case 'boolean':
      return `${typeof value} ${String(value)}`;
    default:
      return typeof value;
  }
}

/**
 * Describes what a value is, for a message about a bad definition: `null`, `an array`, `string "x"`, `an object`,
 * `an instance of Date`, or its `typeof` (`number`, `function`, ...).
 */
export function describeKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return quotedString(value);
  if (typeof value === 'object') {
    const className = value.constructor?.name;
    return className === undefined || className === 'Object' ? 'an object' : `an instance of ${className}`;
  }
  return typeof value;
}
