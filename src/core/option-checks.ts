import { CodecallError } from './errors.js';

/** Throws INVALID_CONFIG naming the first key of `value` that is not one of `known`. */
export function checkKnownKeys(value: object, known: readonly string[], where: string): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new CodecallError('INVALID_CONFIG', `unknown key "${key}" in ${where}; known keys: ${known.join(', ')}`, {
        key,
        known,
      });
    }
  }
}
