import { CodecallError } from './errors.js';

/**
 * The one "unknown key" error of every configuration object (createCodecall options, `limits`, `pool`, `sessions`,
 * session options, `mcpServers` entries, `codecall.json`): `unknown key "x" in <where>; known keys: a, b, c`.
 * `details` carries `key`, `where` and `knownKeys`, plus whatever the caller adds (e.g. `server`, `file`).
 */
export function unknownKeyError(
  key: string,
  where: string,
  knownKeys: Iterable<string>,
  details: Record<string, unknown> = {},
): CodecallError {
  const known = [...knownKeys];
  return new CodecallError('INVALID_CONFIG', `unknown key "${key}" in ${where}; known keys: ${known.join(', ')}`, {
    ...details,
    key,
    where,
    knownKeys: known,
  });
}

/**
 * Checks that every own key of `value` is one of `knownKeys`.
 * @throws CodecallError `INVALID_CONFIG` from {@link unknownKeyError} for the first key that is not.
 */
export function checkKnownKeys(
  value: object,
  where: string,
  knownKeys: ReadonlySet<string>,
  details: Record<string, unknown> = {},
): void {
  for (const key of Object.keys(value)) {
    if (!knownKeys.has(key)) throw unknownKeyError(key, where, knownKeys, details);
  }
}

/**
 * The key names of an options type as a set, from a record naming each once: with the type argument given
 * (`knownKeys<keyof PoolOptions>({ size: true })`) the compiler refuses a missing key and an extra one, so the list
 * cannot drift from the type.
 */
export function knownKeys<Key extends string>(keys: Readonly<Record<Key, true>>): ReadonlySet<Key> {
  return new Set(Object.keys(keys) as Key[]);
}

/**
 * Checks a boolean option: absent (`undefined`) gives `fallback`; anything but `true` or `false` is refused, `null`
 * included (it is a value given, not an option left out).
 * @throws CodecallError `INVALID_CONFIG` naming the option and the value.
 */
export function checkBoolean(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new CodecallError('INVALID_CONFIG', `${name} must be true or false, got ${JSON.stringify(value)}`, {
      [name]: value,
    });
  }
  return value;
}
