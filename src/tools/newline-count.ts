/** The byte that ends a line. */
const NEWLINE = 0x0a;
/** Newlines {@link countNewlines} finds one at a time before it looks at how close together they came. */
const NEWLINE_SAMPLE = 64;
/**
 * Average line length below which counting newlines four bytes at a time beats finding each one (measured on 100 KB:
 * about 10 ns a line found, about 25 µs for the whole text counted by words).
 */
const SHORT_LINE_BYTES = 32;
/** Words one 32-bit sum of four per-byte counters adds up before a counter (at most 1 per word) could overflow. */
const WORDS_PER_SUM = 255;
/** Four newline bytes: a word XOR this has a zero byte where the word has a newline. */
const NEWLINE_WORD = 0x0a0a0a0a;
/**
 * Bytes from which {@link countNewlines} counts with the WebAssembly counter: below, copying them into its memory and
 * calling it costs about what finding the newlines where they lie does.
 */
const SIMD_MIN_BYTES = 4_096;
/** Bytes the counter's memory holds: its 4 pages, a fixed size (a memory that grew would detach the views of it). */
const SIMD_CHUNK_BYTES = 4 * 65_536;

/**
 * The WebAssembly counter, newline-count.wat compiled (a test compiles that file and compares): it compares 16 bytes at
 * a time with `\n` (i8x16.eq) and sums the matches lane by lane, for up to 255 vectors before it widens the sums into
 * its total, then takes the last bytes one by one (the bench's line-count rows set it, its memory filled, beside the
 * JavaScript count).
 */
export const NEWLINE_COUNTER_WASM =
  'AGFzbQEAAAABBwFgAn9/AX8DAgEABQQBAQQEBxoCBm1lbW9yeQIADWNvdW50TmV3bGluZXMAAArNAQHKAQMDfwF7AX8gACABaiECIAIgAUEPcWshAwJAA0AgACADTw0BIABB8B9qIQQgBCADSwRAIAMhBAv9DAAAAAAAAAAAAAAAAAAAAAAhBQNAIAUgAP0ABAD9DAoKCgoKCgoKCgoKCgoKCgr9I/1xIQUgAEEQaiEAIAAgBEkNAAsgBf19/X8hBSAGIAX9GwAgBf0bAWogBf0bAiAF/RsDampqIQYMAAsLAkADQCAAIAJPDQEgBiAALQAAQQpGaiEGIABBAWohAAwACwsgBgs=';

/** The counter's memory and its export. */
interface SimdCounter {
  readonly memory: Uint8Array;
  readonly count: (start: number, length: number) => number;
}

/** The part of the WebAssembly global the counter uses (absent under `--jitless`). */
interface WebAssemblyApi {
  instantiate(bytes: Uint8Array): Promise<{ readonly instance: { readonly exports: Record<string, unknown> } }>;
}

/** The counter once made (null before, and for good where it cannot be made). */
let simdCounter: SimdCounter | null = null;
let simdCounterMade: Promise<boolean> | undefined;

/**
 * Starts making the WebAssembly counter unless that was started, and resolves whether there is one (false where
 * WebAssembly or its SIMD instructions are missing). It is compiled off the main thread (in a fresh process the first
 * compile also starts V8's WebAssembly engine, which a synchronous compile would make that count wait for):
 * {@link countNewlines} starts it at its first count of SIMD_MIN_BYTES or more and counts with JavaScript until it is
 * ready, so a process that reads one large file never waits for it.
 */
export function newlineCounterReady(): Promise<boolean> {
  simdCounterMade ??= makeSimdCounter();
  return simdCounterMade;
}

async function makeSimdCounter(): Promise<boolean> {
  // The JavaScript count for good without WebAssembly (`--jitless`) or its SIMD instructions (the compile rejects).
  const api = (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
  if (api === undefined) return false;
  try {
    const { instance } = await api.instantiate(Buffer.from(NEWLINE_COUNTER_WASM, 'base64'));
    const memory = instance.exports.memory as { readonly buffer: ArrayBuffer };
    const count = instance.exports.countNewlines as (start: number, length: number) => number;
    simdCounter = { memory: new Uint8Array(memory.buffer, 0, SIMD_CHUNK_BYTES), count };
    return true;
  } catch {
    return false;
  }
}

/**
 * The newline bytes of `bytes` counted by the WebAssembly counter (copied into its memory a chunk at a time);
 * undefined while there is no counter (see {@link newlineCounterReady}).
 */
export function countNewlinesWithSimd(bytes: Buffer): number | undefined {
  const counter = simdCounter;
  if (counter === null) return undefined;
  let count = 0;
  for (let start = 0; start < bytes.length; start += SIMD_CHUNK_BYTES) {
    const chunk = bytes.subarray(start, start + SIMD_CHUNK_BYTES);
    counter.memory.set(chunk);
    count += counter.count(0, chunk.length);
  }
  return count;
}

/**
 * The number of newline bytes (`\n`) in `bytes`: from SIMD_MIN_BYTES on with the WebAssembly counter once it is ready
 * (the first such count starts making it), else with {@link countNewlinesInJavaScript}.
 */
export function countNewlines(bytes: Buffer): number {
  if (bytes.length >= SIMD_MIN_BYTES) {
    const counted = countNewlinesWithSimd(bytes);
    if (counted !== undefined) return counted;
    void newlineCounterReady();
  }
  return countNewlinesInJavaScript(bytes);
}

/**
 * {@link countNewlines} without WebAssembly. Finding each newline with indexOf costs a native call per line, cheap for
 * lines of tens of bytes; a file of short lines (a CSV of numbers) would cost hundreds of µs per 100 KB. So where the
 * last NEWLINE_SAMPLE newlines were under SHORT_LINE_BYTES apart on average, the rest is counted by words.
 */
export function countNewlinesInJavaScript(bytes: Buffer): number {
  let count = 0;
  let sampleStart = 0;
  let newline = bytes.indexOf(NEWLINE);
  while (newline !== -1) {
    count += 1;
    if (count % NEWLINE_SAMPLE === 0) {
      if (newline - sampleStart < NEWLINE_SAMPLE * SHORT_LINE_BYTES) {
        return count + countNewlinesByWord(bytes, newline + 1);
      }
      sampleStart = newline;
    }
    newline = bytes.indexOf(NEWLINE, newline + 1);
  }
  return count;
}

// Counts the newlines of `bytes` from `start` on, reading four bytes at a time (SWAR): no branch or call per newline.
function countNewlinesByWord(bytes: Buffer, start: number): number {
  const end = bytes.length;
  let count = 0;
  let index = start;
  // An Int32Array view starts at a multiple of four bytes of the underlying memory: the bytes before one go singly.
  while (index < end && (bytes.byteOffset + index) % 4 !== 0) {
    if (bytes[index] === NEWLINE) count += 1;
    index += 1;
  }
  const words = Math.floor((end - index) / 4);
  const view = new Int32Array(bytes.buffer, bytes.byteOffset + index, words);
  let word = 0;
  while (word < words) {
    const stop = Math.min(words, word + WORDS_PER_SUM);
    // Four counters, one per byte of the sum.
    let sum = 0;
    for (; word < stop; word += 1) {
      const bits = (view[word] as number) ^ NEWLINE_WORD;
      // Adding 0x7f to the low seven bits of a byte sets its bit 7 unless they are all zero; or-ing the byte sets it
      // when its own bit 7 is. So the complement has bit 7 set exactly in the zero bytes: the newlines.
      sum = (sum + ((~(((bits & 0x7f7f7f7f) + 0x7f7f7f7f) | bits) >>> 7) & 0x01010101)) | 0;
    }
    count += (sum & 0xff) + ((sum >>> 8) & 0xff) + ((sum >>> 16) & 0xff) + (sum >>> 24);
  }
  for (index += words * 4; index < end; index += 1) {
    if (bytes[index] === NEWLINE) count += 1;
  }
  return count;
}
