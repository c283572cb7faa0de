/**
 * How numbers, durations, sizes and cut text are written for the model and for people: one wording everywhere (the
 * tool description, failure hints, error messages, `codecall doctor`), so the model never reads "300 s" in one place
 * and "300 seconds" in another.
 */

const MEBIBYTE = 1024 * 1024;

/** 12345 → "12,345", independent of the host's locale. */
export function formatCount(count: number): string {
  return String(count).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A count and its noun: "1 tool call", "1,000 tool calls". */
export function plural(count: number, word: string): string {
  return `${formatCount(count)} ${word}${count === 1 ? '' : 's'}`;
}

/** Milliseconds as seconds: "1 second", "300 seconds", "0.25 seconds". */
export function formatSeconds(milliseconds: number): string {
  const seconds = milliseconds / 1000;
  const text = Number.isInteger(seconds) ? formatCount(seconds) : String(Number(seconds.toFixed(3)));
  return `${text} second${seconds === 1 ? '' : 's'}`;
}

/** A size in bytes: whole mebibytes as "16 MiB", anything else as "1,500 bytes". */
export function formatBytes(bytes: number): string {
  return bytes % MEBIBYTE === 0 ? `${formatCount(bytes / MEBIBYTE)} MiB` : `${formatCount(bytes)} bytes`;
}

/** `text` cut to its first `maxCharacters` characters and ended with `…` when it is longer. */
export function clipText(text: string, maxCharacters: number): string {
  return text.length > maxCharacters ? `${text.slice(0, maxCharacters)}…` : text;
}
