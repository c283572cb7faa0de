/** A key as one reference token of a JSON Pointer (RFC 6901): `~` becomes `~0`, `/` becomes `~1`. */
export function escapePointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}
