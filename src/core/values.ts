/** Whether `value` is an object with named entries: not null, not an array (class instances count). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
