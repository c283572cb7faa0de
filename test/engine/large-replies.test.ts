import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { seededRandom } from '../support/seeded-random.js';

const codecallWith = useCodecalls();

// Text whose characters take 1 to 4 bytes, so the ends of reads and of buffers fall inside characters.
const PATTERN = 'ab é 中 😀 \n';

/** `characters` characters of PATTERN repeated, starting at `shift`. */
function textOf(characters: number, shift: number): string {
  const units = [...PATTERN];
  let text = '';
  for (let index = 0; index < characters; index += 1) text += units[(index + shift) % units.length];
  return text;
}

// Sizes around the script's first receive buffer (64 KiB) and past the largest it keeps (2 MiB), then small again.
const SIZES = [0, 1, 4_095, 4_096, 4_097, 21_000, 21_845, 30_000, 70_000, 200_000, 900_000, 10, 50_000, 5_000];

describe("the script's channel reads replies of every size into the buffer it keeps", () => {
  const codecall = codecallWith({
    tools: [
      defineTool({
        name: 'text',
        description: 'Returns `characters` characters of a fixed pattern, starting at `shift`.',
        inputSchema: {
          type: 'object',
          properties: { characters: { type: 'integer' }, shift: { type: 'integer' } },
          required: ['characters', 'shift'],
        },
        execute: async ({ characters, shift }: { characters: number; shift: number }) => ({
          shift,
          text: textOf(characters, shift),
          tail: textOf(characters, shift + 1),
        }),
      }),
    ],
    limits: { maxToolCalls: 1_000 },
  });

  const script = (threads: number) => `
from concurrent.futures import ThreadPoolExecutor
from tools import text
pattern = list(${JSON.stringify(PATTERN)})
def expected(characters, shift):
    return "".join(pattern[(index + shift) % len(pattern)] for index in range(characters))
def check(job):
    index, characters = job
    reply = text(characters=characters, shift=index)
    assert reply["shift"] == index, reply["shift"]
    assert reply["text"] == expected(characters, index), (characters, index)
    assert reply["tail"] == expected(characters, index + 1), (characters, index)
    return len(reply["text"].encode())
jobs = list(enumerate(${JSON.stringify([...SIZES, 3_000_000, ...SIZES])}))
with ThreadPoolExecutor(${threads}) as pool:
    print(sum(pool.map(check, jobs)))
`;

  const total = [...SIZES, 3_000_000, ...SIZES].reduce(
    (sum, characters, index) => sum + Buffer.byteLength(textOf(characters, index)),
    0,
  );

  it('one call at a time', async () => {
    const result = await codecall.execute(script(1));
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(`${total}\n`);
  });

  it('from eight threads at once', async () => {
    const result = await codecall.execute(script(8));
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(`${total}\n`);
  });
});

describe('read_file through the channel (read into buffers the host lends and takes back)', () => {
  let base: string;
  let workspace: string;
  const codecall = () =>
    codecallWith({ workspace, builtinTools: ['files'], limits: { maxToolCalls: 10_000, timeoutMs: 120_000 } });

  // Sizes around what `read_file` decodes at once (4 KiB), the buffer the host lends (256 KiB, asked for with one
  // byte more than the file has) and the 1 MiB cap.
  const FILE_SIZES = [0, 10, 4_096, 4_097, 100_000, 262_142, 262_143, 262_144, 300_000, 1_100_000];

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'codecall-read-file-'));
    // Readable by the unprivileged user a root host runs scripts as: the script reads the files itself to compare.
    chmodSync(base, 0o755);
    workspace = join(base, 'workspace');
    mkdirSync(workspace, { mode: 0o755 });
    for (const [index, size] of FILE_SIZES.entries()) {
      const bytes = Buffer.from(textOf(size, index));
      writeFileSync(join(workspace, `f${index}.txt`), bytes.subarray(0, size));
    }
    // Invalid UTF-8 past what is decoded at once: it travels as the bytes read, decoded by the script, the bad byte as
    // U+FFFD.
    writeFileSync(
      join(workspace, 'invalid.txt'),
      Buffer.concat([Buffer.from('a'.repeat(6_000)), Buffer.from([0xff, 0x0a])]),
    );
  });

  afterAll(() => {
    rmSync(base, { recursive: true, force: true });
  });

  it('gives every thread of eight the bytes of its own file', async () => {
    const result = await codecall().execute(`
from concurrent.futures import ThreadPoolExecutor
from tools import read_file
root = ${JSON.stringify(workspace)}
names = ["f%d.txt" % index for index in range(${FILE_SIZES.length})] + ["invalid.txt"]
expected = {}
for name in names:
    with open(root + "/" + name, encoding="utf-8", errors="replace", newline="") as handle:
        expected[name] = handle.read()
def check(job):
    name = names[job % len(names)]
    reply = read_file(path=name)
    content = reply["content"]
    if reply["truncated"]:
        assert expected[name].startswith(content) and len(content) > 0, name
    else:
        assert content == expected[name], (name, len(content), len(expected[name]))
    assert reply["path"] == name
    return 1
with ThreadPoolExecutor(8) as pool:
    print(sum(pool.map(check, range(${(FILE_SIZES.length + 1) * 40}))))
`);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(`${(FILE_SIZES.length + 1) * 40}\n`);
  });

  it("gives the text Node's decoder gives for a file of invalid UTF-8 (the script decodes the bytes the host read)", async () => {
    // Pieces around every rule of the decoder: valid characters of 1 to 4 bytes, overlong forms, surrogates, code
    // points past U+10FFFF, lone continuation bytes, bytes never valid, and sequences cut short.
    const pieces = [
      [0x61],
      [0x0a],
      [0xc2, 0xa9],
      [0xe2, 0x82, 0xac],
      [0xf0, 0x9f, 0x98, 0x80],
      [0xc0, 0xaf],
      [0xc1, 0xbf],
      [0xe0, 0x80, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xed, 0x9f, 0xbf],
      [0xf4, 0x90, 0x80, 0x80],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
      [0x80],
      [0xbf],
      [0xfe],
      [0xff],
      [0xe2, 0x82],
      [0xf0, 0x9f, 0x98],
      [0xf0, 0x90],
    ];
    const random = seededRandom(7);
    const next = (bound: number) => Math.floor(random() * bound);
    const names: string[] = [];
    for (let file = 0; file < 12; file += 1) {
      const bytes: number[] = [];
      // Past what read_file decodes at once on the host (4 KiB), up to past the buffer it lends (256 KiB).
      const size = file === 11 ? 300_000 : 5_000 + next(40_000);
      while (bytes.length < size) {
        if (next(4) === 0) bytes.push(next(256));
        else bytes.push(...(pieces[next(pieces.length)] as number[]));
      }
      const name = `mixed-${file}.bin`;
      writeFileSync(join(workspace, name), Buffer.from(bytes));
      names.push(name);
    }
    // The texts are too long for stdout: each is printed as its length and the SHA-256 of its UTF-8.
    const result = await codecall().execute(`
import hashlib
from tools import read_file
for name in ${JSON.stringify(names)}:
    content = read_file(path=name)["content"]
    print(len(content), hashlib.sha256(content.encode()).hexdigest())
`);
    expect(result.error).toBeUndefined();
    const expected = names.map((name) => {
      const decoded = readFileSync(join(workspace, name)).toString('utf8');
      return `${[...decoded].length} ${createHash('sha256').update(decoded, 'utf8').digest('hex')}`;
    });
    expect(result.stdout.trim().split('\n')).toEqual(expected);
  });

  it('reads a 100 KB file again and again without taking fresh memory from the kernel each time', async () => {
    // Lines with a character past ASCII, as the bulk-read bench has: decoding them takes two blocks of the text's size.
    const line = 'const label = "étiquette"; // keeps the état as is\n';
    writeFileSync(join(workspace, 'hundred-kilobytes.txt'), line.repeat(Math.ceil(100_000 / line.length)));
    const result = await codecall().execute(`
import os
from tools import read_file
def page_faults():
    with open("/proc/self/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[7])
def read_and_drop():
    return len(read_file(path="hundred-kilobytes.txt")["content"].encode())
for _ in range(20):
    read_and_drop()
before = page_faults()
for _ in range(100):
    read_and_drop()
# Only glibc's malloc hands a freed heap top back to the kernel at once (and reads the hint the runtime gives it).
glibc = "CS_GNU_LIBC_VERSION" in os.confstr_names and os.confstr("CS_GNU_LIBC_VERSION") is not None
print((page_faults() - before) // 100 if glibc else 0)
`);
    expect(result.error).toBeUndefined();
    // Before the runtime kept freed memory, each call took about 50 fresh pages (the decoded text, its encoding).
    expect(Number(result.stdout)).toBeLessThan(5);
  });

  it('gives consistent replies while another process keeps changing the size of the file', async () => {
    const python = await resolvePythonInterpreter('python3');
    // Rewrites the file again and again, each time with lines of one letter and of another size (from empty to past
    // the lent buffer), truncating it first.
    const writer = spawn(
      python.executable,
      [
        '-I',
        '-S',
        '-c',
        `
import os, sys
path = sys.argv[1]
versions = [(letter * 99 + "\\n").encode() * count for letter, count in (("a", 1), ("b", 60), ("c", 1600), ("d", 3000))]
versions.append(b"")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
print("writing", flush=True)
while True:
    for data in versions:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
`,
        join(workspace, 'changing.txt'),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await once(writer.stdout, 'data');
      const result = await codecall().execute(`
from tools import read_file
letters = set("abcd\\n")
seen = set()
for _ in range(600):
    reply = read_file(path="changing.txt")
    content = reply["content"]
    assert set(content) <= letters, sorted(set(content) - letters)[:5]
    lines = content.count("\\n") + (0 if content.endswith("\\n") or not content else 1)
    assert reply["totalLines"] == lines, (reply["totalLines"], lines)
    assert not reply["truncated"]
    seen.add(len(content))
print(len(seen) > 1)
`);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('True\n');
    } finally {
      const exited = once(writer, 'exit');
      writer.kill('SIGKILL');
      await exited;
    }
  });
});
