import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  open,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { OutputCapture } from '../../src/engine/supervise/output-capture.js';
import { SavedOutputFile } from '../../src/engine/supervise/saved-output-file.js';

let folder: string;
beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), 'codecall-saved-output-'));
});
afterEach(() => {
  rmSync(folder, { recursive: true, force: true });
});

describe('a saved output file', () => {
  it('holds every chunk in order, whether a chunk fills a batch, ends one or waits for the end', async () => {
    const path = join(folder, 'stdout.txt');
    const file = new SavedOutputFile(path, 8);
    const chunks = ['abc', 'defgh', 'ij', '0123456789abcdef', 'k', 'lmnopqrs', 'tail'];
    for (const chunk of chunks) file.write(Buffer.from(chunk));
    expect(await file.end()).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe(chunks.join(''));
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('keeps two files apart when they are written at once from one buffer overwritten by the next, their ends beside writes in flight', async () => {
    const texts = [0, 1].map((file) =>
      Array.from({ length: 40_000 }, (_, index) => `file ${file} line ${index}\n`).join(''),
    );
    const paths = [0, 1].map((file) => join(folder, `together-${file}.txt`));
    const files = paths.map((path) => new SavedOutputFile(path));
    const bytes = texts.map((text) => Buffer.from(text));
    const reused = Buffer.alloc(70_000);
    // Chunks of 1 byte to 70 kB, in one buffer overwritten by the next chunk, the two files taking turns.
    const offsets = [0, 0];
    for (
      let size = 1;
      offsets.some((offset, file) => offset < (bytes[file] as Buffer).length);
      size = 1 + ((size * 7) % 70_000)
    ) {
      for (const file of [0, 1]) {
        const source = bytes[file] as Buffer;
        const offset = offsets[file] as number;
        if (offset >= source.length) continue;
        const length = source.copy(reused, 0, offset, offset + size);
        (files[file] as SavedOutputFile).write(reused.subarray(0, length));
        reused.fill(0x21, 0, length);
        offsets[file] = offset + length;
      }
    }
    expect(await Promise.all(files.map((file) => file.end()))).toEqual([true, true]);
    expect(paths.map((path) => readFileSync(path, 'utf8'))).toEqual(texts);
  });

  it('gives a batch back for reuse only once its write is done, not while the write waits for a pool thread', async () => {
    // Spare batches of 8 bytes, left by a finished file.
    const spares = new SavedOutputFile(join(folder, 'spares.txt'), 8);
    spares.write(Buffer.from('s'.repeat(32)));
    expect(await spares.end()).toBe(true);
    const paths = ['first', 'second'].map((name) => join(folder, `${name}.txt`));
    const [first, second] = paths.map((path) => new SavedOutputFile(path, 8)) as [SavedOutputFile, SavedOutputFile];
    await vi.waitFor(() => expect(paths.every((path) => existsSync(path))).toBe(true));
    // The opens' callbacks run on the turn after the files appear.
    for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    // Every thread of the pool blocked in opening a FIFO nobody writes yet: the first file's write waits in the queue.
    const fifos = Array.from({ length: Math.max(4, Number(process.env.UV_THREADPOOL_SIZE ?? 4)) }, (_, index) => {
      const fifo = join(folder, `fifo-${index}`);
      execFileSync('mkfifo', [fifo]);
      return fifo;
    });
    const opened = fifos.map(
      (fifo) =>
        new Promise<number>((resolve, reject) => open(fifo, 'r', (error, fd) => (error ? reject(error) : resolve(fd)))),
    );
    first.write(Buffer.from('AAAAAAAA'));
    // A batch given back too early would be the one this write takes, and overwrites, before the first is written.
    second.write(Buffer.from('BBBBBBBB'));
    for (const fifo of fifos) closeSync(openSync(fifo, 'w'));
    for (const descriptor of await Promise.all(opened)) closeSync(descriptor);
    expect(await Promise.all([first.end(), second.end()])).toEqual([true, true]);
    expect(paths.map((path) => readFileSync(path, 'utf8'))).toEqual(['AAAAAAAA', 'BBBBBBBB']);
  });

  it('is created empty when it ends before anything was written', async () => {
    const path = join(folder, 'empty.txt');
    expect(await new SavedOutputFile(path).end()).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe('');
  });

  it('says it is not complete, and leaves the path alone, when the path exists', async () => {
    const path = join(folder, 'taken.txt');
    writeFileSync(path, 'before');
    const file = new SavedOutputFile(path, 1);
    file.write(Buffer.from('after'));
    expect(await file.end()).toBe(false);
    expect(readFileSync(path, 'utf8')).toBe('before');
  });

  it('says it is not complete when its folder is missing', async () => {
    const file = new SavedOutputFile(join(folder, 'missing', 'stdout.txt'));
    file.write(Buffer.from('lost'));
    expect(await file.end()).toBe(false);
  });
});

describe('an output capture that outgrows its budget', () => {
  it('keeps head, tail and saved file right when every chunk comes in the same buffer, overwritten by the next', async () => {
    const text = Array.from({ length: 3_000 }, (_, index) => `row ${index}\n`).join('');
    const bytes = Buffer.from(text);
    const saved = join(folder, 'reused.txt');
    const capture = new OutputCapture({ keepBytes: 1_000, fullOutputPath: saved });
    const reused = Buffer.alloc(700);
    for (let start = 0, size = 1; start < bytes.length; start += size, size = 1 + ((size * 5) % 700)) {
      const length = bytes.copy(reused, 0, start, start + size);
      capture.push(reused.subarray(0, length));
      reused.fill(0x21);
    }
    const output = await capture.finish();
    expect(output.head.toString()).toBe(text.slice(0, 400));
    expect(output.tail.toString()).toBe(text.slice(-600));
    expect(output).toMatchObject({ totalBytes: bytes.length, truncated: true, fullOutputComplete: true });
    expect(readFileSync(saved, 'utf8')).toBe(text);
  });

  it('keeps everything, and saves no file, while the stream fits its budget', async () => {
    const saved = join(folder, 'unused.txt');
    const capture = new OutputCapture({ keepBytes: 10, fullOutputPath: saved });
    const reused = Buffer.alloc(3);
    for (const piece of ['abc', 'def', 'ghi', 'j']) {
      capture.push(reused.subarray(0, reused.write(piece)));
    }
    const output = await capture.finish();
    expect(Buffer.concat([output.head, output.tail]).toString()).toBe('abcdefghij');
    expect(output).toMatchObject({ totalBytes: 10, truncated: false, fullOutputPath: undefined });
    expect(capture.finishInMemory()).toEqual(output);
  });

  it('ends in memory only while no file was opened', async () => {
    const capture = new OutputCapture({ keepBytes: 4, fullOutputPath: join(folder, 'over.txt') });
    capture.push(Buffer.from('abc'));
    expect(capture.finishInMemory()).toMatchObject({ totalBytes: 3, truncated: false });
    capture.push(Buffer.from('defg'));
    expect(capture.finishInMemory()).toBeUndefined();
    expect(await capture.finish()).toMatchObject({ totalBytes: 7, truncated: true, fullOutputComplete: true });
    expect(readFileSync(join(folder, 'over.txt'), 'utf8')).toBe('abcdefg');
  });

  it('saves the complete stream, fed in chunks of any size, up to its cap', async () => {
    const text = Array.from({ length: 5_000 }, (_, index) => `line ${index}\n`).join('');
    const bytes = Buffer.from(text);
    const saved = join(folder, 'saved.txt');
    const capped = join(folder, 'capped.txt');
    const whole = new OutputCapture({ keepBytes: 1_000, fullOutputPath: saved });
    const cut = new OutputCapture({ keepBytes: 1_000, fullOutputPath: capped, maxFullOutputBytes: 10_000 });
    // Chunks of 1 byte to 70 kB, as pipe reads come.
    for (let start = 0, size = 1; start < bytes.length; start += size, size = 1 + ((size * 7) % 70_000)) {
      const chunk = bytes.subarray(start, start + size);
      whole.push(chunk);
      cut.push(chunk);
    }
    const [wholeOutput, cutOutput] = await Promise.all([whole.finish(), cut.finish()]);
    expect(wholeOutput).toMatchObject({ truncated: true, fullOutputPath: saved, fullOutputComplete: true });
    expect(readFileSync(saved, 'utf8')).toBe(text);
    expect(cutOutput).toMatchObject({ truncated: true, fullOutputPath: capped, fullOutputComplete: false });
    expect(readFileSync(capped, 'utf8')).toBe(text.slice(0, 10_000));
  });
});
