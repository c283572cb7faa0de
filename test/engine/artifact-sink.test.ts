import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ArtifactSink, checkArtifactName } from '../../src/engine/result/artifact-sink.js';

const root = mkdtempSync(join(tmpdir(), 'codecall-artifact-sink-'));
let folders = 0;

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function newFolder(): string {
  folders += 1;
  return join(root, `run-${folders}`);
}

/** The `$artifact` frames of `data` under `name`, in chunks of `chunkBytes`. */
function frames(name: string, data: Buffer, chunkBytes = 4): Record<string, unknown>[] {
  const result: Record<string, unknown>[] = [];
  for (let offset = 0; offset < data.length || offset === 0; offset += chunkBytes) {
    const piece = data.subarray(offset, offset + chunkBytes);
    result.push({ name, offset, data: piece.toString('base64'), final: offset + chunkBytes >= data.length });
    if (data.length === 0) break;
  }
  return result;
}

function send(sink: ArtifactSink, name: string, data: Buffer | string, chunkBytes = 4): void {
  for (const frame of frames(name, Buffer.from(data), chunkBytes)) sink.receive(frame);
}

describe('ArtifactSink', () => {
  it('writes chunked artifacts into a folder of its own (0700), files created 0600', async () => {
    const folder = newFolder();
    const sink = new ArtifactSink({ folder });
    send(sink, 'table.csv', 'a,b\n1,2\n');
    send(sink, 'empty.txt', '');
    const { artifacts, note } = await sink.finish();
    expect(note).toBeUndefined();
    expect(artifacts).toEqual([
      { path: join(folder, 'table.csv'), mimeType: 'text/csv', bytes: 8 },
      { path: join(folder, 'empty.txt'), mimeType: 'text/plain', bytes: 0 },
    ]);
    expect(readFileSync(join(folder, 'table.csv'), 'utf8')).toBe('a,b\n1,2\n');
    expect(lstatSync(folder).mode & 0o777).toBe(0o700);
    expect(lstatSync(join(folder, 'table.csv')).mode & 0o777).toBe(0o600);
  });

  it('refuses names that are not one plain file name: traversal, absolute, control characters, too long', async () => {
    const hostile = [
      '../x',
      '/etc/x',
      'a\nb',
      'a/b',
      '..',
      '.',
      '',
      'a\u0000b',
      '.hidden',
      'a\\b',
      'x\u009b2J',
      'n'.repeat(256),
    ];
    for (const name of hostile) expect(checkArtifactName(name)).toBeUndefined();
    const folder = newFolder();
    const sink = new ArtifactSink({ folder });
    for (const name of hostile) send(sink, name, 'x');
    const { artifacts, note } = await sink.finish();
    expect(artifacts).toEqual([]);
    expect(note).toContain(`${hostile.length} malformed frame(s) or unusable name(s)`);
    expect(() => readdirSync(folder)).toThrow();
    expect(readdirSync(root).some((name) => name === 'x')).toBe(false);
  });

  it('keeps at most maxArtifacts of 10,000 tiny artifacts and says how many were dropped', async () => {
    const sink = new ArtifactSink({ folder: newFolder(), maxArtifacts: 100 });
    for (let index = 0; index < 10_000; index++) send(sink, `tiny-${index}.txt`, 'x');
    const { artifacts, note } = await sink.finish();
    expect(artifacts).toHaveLength(100);
    expect(note).toContain('9900 over the limit of 100 artifacts');
  });

  it('stops at maxBytes in all: the artifact that crosses it is removed, the note says so', async () => {
    const folder = newFolder();
    const sink = new ArtifactSink({ folder, maxBytes: 1000 });
    send(sink, 'small.bin', Buffer.alloc(600), 256);
    send(sink, 'big.bin', Buffer.alloc(600), 256);
    const { artifacts, note } = await sink.finish();
    expect(artifacts.map((artifact) => artifact.bytes)).toEqual([600]);
    expect(note).toContain('1 over the limit of 1000 bytes in all');
    expect(readdirSync(folder)).toEqual(['small.bin']);
  });

  it('does not trust a claimed size: a forged offset of 1 GiB or an out-of-order chunk drops the artifact', async () => {
    const folder = newFolder();
    const sink = new ArtifactSink({ folder });
    sink.receive({ name: 'claimed.bin', offset: 0, data: 'AAAA', final: false });
    sink.receive({ name: 'claimed.bin', offset: 1024 ** 3, data: 'AAAA', final: true });
    sink.receive({ name: 'orphan.bin', offset: 1024 ** 3, data: 'AAAA', final: true });
    sink.receive({ name: 'bad.bin', offset: 0, data: 'not base64!', final: true });
    sink.receive({ name: 'unfinished.bin', offset: 0, data: 'AAAA', final: false });
    const { artifacts, note } = await sink.finish();
    expect(artifacts).toEqual([]);
    expect(note).toContain('1 incomplete');
    expect(readdirSync(folder)).toEqual([]);
  });

  it('gives a second artifact of the same name a suffix, and never writes through a link in its folder', async () => {
    const folder = newFolder();
    mkdirSync(folder, { mode: 0o700 });
    const outside = join(root, `outside-${folders}.txt`);
    writeFileSync(outside, 'canary');
    symlinkSync(outside, join(folder, 'linked.txt'));
    const sink = new ArtifactSink({ folder });
    send(sink, 'chart.png', 'one');
    send(sink, 'chart.png', 'two');
    send(sink, 'linked.txt', 'overwritten?');
    const { artifacts } = await sink.finish();
    expect(artifacts.map((artifact) => [artifact.path, readFileSync(artifact.path, 'utf8')])).toEqual([
      [join(folder, 'chart.png'), 'one'],
      [join(folder, 'chart-2.png'), 'two'],
    ]);
    expect(readFileSync(outside, 'utf8')).toBe('canary');
  });

  it('lists the files of its folder only once the folder was handed to a tool', async () => {
    const folder = newFolder();
    mkdirSync(folder, { mode: 0o700 });
    writeFileSync(join(folder, 'saved.png'), 'png');
    expect((await new ArtifactSink({ folder }).finish()).artifacts).toEqual([]);
    const handedOut = new ArtifactSink({ folder });
    expect(handedOut.folderForTools()).toBe(folder);
    expect((await handedOut.finish()).artifacts).toEqual([
      { path: join(folder, 'saved.png'), mimeType: 'image/png', bytes: 3 },
    ]);
  });

  it('ends at once when no frame came and no tool got the folder, and ignores frames after', async () => {
    const folder = newFolder();
    const unused = new ArtifactSink({ folder });
    expect(unused.finishUnused()).toEqual({ artifacts: [] });
    send(unused, 'late.txt', 'late');
    expect(() => readdirSync(folder)).toThrow();
    const malformed = new ArtifactSink({ folder: newFolder() });
    malformed.receive({ name: 'bad.txt' });
    expect(malformed.finishUnused()).toBeUndefined();
    const sent = new ArtifactSink({ folder: newFolder() });
    send(sent, 'sent.txt', 'sent');
    expect(sent.finishUnused()).toBeUndefined();
    const handedOut = new ArtifactSink({ folder: newFolder() });
    handedOut.folderForTools();
    expect(handedOut.finishUnused()).toBeUndefined();
    // A sink that cannot end at once is finished by its caller: done here so no write outlives the test's folder.
    await Promise.all([malformed.finish(), sent.finish(), handedOut.finish()]);
  });

  it('ignores frames once finished', async () => {
    const folder = newFolder();
    const sink = new ArtifactSink({ folder });
    await sink.finish();
    send(sink, 'late.txt', 'late');
    expect(() => readdirSync(folder)).toThrow();
  });
});
