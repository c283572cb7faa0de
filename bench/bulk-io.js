// Bulk data through codecall, each figure next to its baseline measured in the same run: files read through the
// built-in `read_file` next to plain Python reads of the same files and next to a minimal Node/Python pair reading
// them across the same kind of socket (the floor of any read across a process boundary), a large tool result next to
// a raw socketpair reply, and a script printing many lines next to a bare interpreter printing the same. `run.js` adds
// these rows to its table; `node bench/bulk-io.js` prints them alone (after `npm run build`).
// BENCH_BULK=reads,small,large,print (any of them, comma-separated) measures only those groups of rows; BENCH_ROUNDS
// sets the rounds (default 5).
import { spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  writeFileSync,
  writevSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCodecall, defineTool } from '../dist/index.js';
import { resolvePythonInterpreter } from '../dist/sandbox/interpreter.js';
import { countNewlines, countNewlinesInJavaScript, newlineCounterReady } from '../dist/tools/newline-count.js';
import { answerLineClient, median, printedNumber, printedText, ratio, timeSpawn } from './measure.js';

/** Files of the batch, and the size of each. */
export const BATCH_FILES = 100;
export const BATCH_FILE_BYTES = 100 * 1024;
/** Size of the large tool result. */
export const LARGE_RESULT_BYTES = 5 * 1024 * 1024;
/** Lines printed, and the bytes of each (newline included): 5 MB in all. */
export const PRINTED_LINES = 50_000;
export const PRINTED_LINE_BYTES = 100;
/** Calls of the small-file and echo loops. */
const SMALL_CALLS = 1_000;
/** Calls of the loops reading one 100 KB file (of short lines, of text lines). */
const WHOLE_FILE_CALLS = 200;
/** The short-lines file: numbers as a CSV has them, one short line after another, as large as a batch file. */
const SHORT_LINES_FILE = 'numbers.csv';
/** Threads of the parallel variant of the batch. */
const BATCH_THREADS = 8;

// One line of text with a few multi-byte characters, as source files and logs have.
const TEXT_LINE = 'const value = compute(input, { mode: "fast", label: "étiquette" }); // keeps the état as is\n';

function shortLinesText() {
  let text = '';
  for (let row = 0; Buffer.byteLength(text) < BATCH_FILE_BYTES; row += 1) text += `${row},${row % 97}\n`;
  return text;
}

function batchText() {
  const lines = Math.floor(BATCH_FILE_BYTES / Buffer.byteLength(TEXT_LINE));
  const text = TEXT_LINE.repeat(lines);
  return `${text}${'x'.repeat(BATCH_FILE_BYTES - Buffer.byteLength(text) - 1)}\n`;
}

/** The batch's plain reads in Python (file names, one file read whole): the same in the batch and in a bare python. */
const PLAIN_READS = `names = ["batch/f%03d.txt" % i for i in range(${BATCH_FILES})]
def plain_one(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()
`;

/** The script of the batch: passes of plain reads and of read_file, alternating, then one line of JSON figures. */
function batchScript(passes) {
  return `
import asyncio, json, time
from concurrent.futures import ThreadPoolExecutor
from tools import read_file
import tools.aio as aio
${PLAIN_READS}def tool_one(name):
    return read_file(path=name)["content"]
async def gathered():
    async def one(name):
        return utf8((await aio.read_file(path=name))["content"])
    return sum(await asyncio.gather(*(one(name) for name in names)))
def timed(function):
    start = time.perf_counter()
    total = function()
    elapsed = time.perf_counter() - start
    assert total == ${BATCH_FILES * BATCH_FILE_BYTES}, total
    return elapsed
utf8 = lambda text: len(text.encode())
pool = ThreadPoolExecutor(${BATCH_THREADS})
passes = {"plain": [], "tool": [], "plainThreads": [], "toolThreads": [], "toolGather": []}
for _ in range(${passes}):
    passes["plain"].append(timed(lambda: sum(utf8(plain_one(path)) for path in names)))
    passes["tool"].append(timed(lambda: sum(utf8(tool_one(name)) for name in names)))
    passes["plainThreads"].append(timed(lambda: sum(map(utf8, pool.map(plain_one, names)))))
    passes["toolThreads"].append(timed(lambda: sum(map(utf8, pool.map(tool_one, names)))))
    passes["toolGather"].append(timed(lambda: asyncio.run(gathered())))
print(json.dumps({key: sorted(values)[len(values) // 2] for key, values in passes.items()}))
`;
}

const SMALL_SCRIPT = `
import json, time
from tools import echo, read_file
for _ in range(100):
    read_file(path="small.txt")
    echo(value=1)
def timed(call, calls=${SMALL_CALLS}):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6
figures = {"read": [], "echo": [], "shortLines": [], "textLines": []}
for _ in range(3):
    figures["read"].append(timed(lambda: read_file(path="small.txt")))
    figures["echo"].append(timed(lambda: echo(value=1)))
    figures["shortLines"].append(timed(lambda: read_file(path="${SHORT_LINES_FILE}"), ${WHOLE_FILE_CALLS}))
    figures["textLines"].append(timed(lambda: read_file(path="batch/f000.txt"), ${WHOLE_FILE_CALLS}))
print(json.dumps({key: sorted(values)[1] for key, values in figures.items()}))
`;
/**
 * The plain loop of the batch alone, for a bare interpreter (`python -S`) started in the workspace: the same reads
 * of the same files, in a process without codecall's runtime (which tunes the allocator of the script's process, so
 * the batch's own plain reads run faster than a plain interpreter's). Prints the median seconds of `passes` passes.
 */
function bareBatchScript(passes) {
  return `
import time
${PLAIN_READS}times = []
for _ in range(${passes}):
    start = time.perf_counter()
    total = sum(len(plain_one(path).encode()) for path in names)
    times.append(time.perf_counter() - start)
    assert total == ${BATCH_FILES * BATCH_FILE_BYTES}, total
print(sorted(times)[len(times) // 2])
`;
}

/** Runs a bare interpreter with `code` in `cwd` and resolves what it prints, as a number. */
function bareNumber(executable, code, cwd) {
  const child = spawn(executable, ['-S', '-c', code], {
    cwd,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
  });
  return printedNumber(child, 'bare interpreter');
}

/** Bytes of the buffer both ends of the minimal pair read into: a batch file and its header fit. */
const PAIR_BUFFER_BYTES = 256 * 1024;

/**
 * The client of the minimal pair (see {@link minimalPairReads}): passes of the plain reads and of the same files asked
 * of the server, alternating; prints the median seconds of each as one line of JSON. Its heap is kept as codecall's
 * boot keeps the script's (a freed 2 MiB block raises glibc's thresholds), so its plain reads are the in-script ones.
 */
function pairClientScript(passes) {
  return `
import json, os, time
bytes(2 << 20)
fd = 3
os.set_blocking(fd, True)
buffer = bytearray(${PAIR_BUFFER_BYTES})
view = memoryview(buffer)
${PLAIN_READS}def pair_one(path):
    os.write(fd, path.encode() + b"\\n")
    count = os.readv(fd, [view])
    newline = buffer.find(b"\\n", 0, count)
    while newline == -1:
        count += os.readv(fd, [view[count:]])
        newline = buffer.find(b"\\n", 0, count)
    end = newline + 1 + int(buffer[:newline])
    while count < end:
        count += os.readv(fd, [view[count:end]])
    return str(view[newline + 1:end], "utf-8", "replace")
def timed(function):
    start = time.perf_counter()
    total = sum(len(function(path).encode()) for path in names)
    elapsed = time.perf_counter() - start
    assert total == ${BATCH_FILES * BATCH_FILE_BYTES}, total
    return elapsed
passes = {"plain": [], "pair": []}
for _ in range(${passes}):
    passes["plain"].append(timed(plain_one))
    passes["pair"].append(timed(pair_one))
print(json.dumps({key: sorted(values)[len(values) // 2] for key, values in passes.items()}))
`;
}

/**
 * The floor of a file read across a process boundary on this machine: a bare interpreter asks a minimal Node server
 * for each file of the batch over the same kind of socket codecall uses (an inherited socketpair); the server opens,
 * stats, reads and closes the file by its plain path into one reused buffer and writes a line with its size and its
 * bytes in one writev; the client decodes them where they lie. No path checks, schema, result object, runtime or
 * sandbox. Resolves the client's `{ plain, pair }` median seconds of `passes` passes.
 */
function minimalPairReads(executable, workspace, passes) {
  const child = spawn(executable, ['-S', '-c', pairClientScript(passes)], {
    cwd: workspace,
    stdio: ['ignore', 'pipe', 'inherit', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
  });
  const socket = child.stdio[3];
  // The socket's descriptor, written with one writev as codecall's channel does (a stream write would add a copy).
  const fd = socket._handle.fd;
  const buffer = Buffer.allocUnsafe(PAIR_BUFFER_BYTES);
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => {
    pending += chunk;
    for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n')) {
      const path = join(workspace, pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      const file = openSync(path, 'r');
      let size;
      try {
        size = readSync(file, buffer, 0, Math.min(fstatSync(file).size + 1, PAIR_BUFFER_BYTES), null);
      } finally {
        closeSync(file);
      }
      const header = Buffer.from(`${size}\n`);
      // Behind a reply still queued in the stream, the next goes there too (copied: the next read reuses the buffer).
      const sent = socket.writableLength === 0 ? writevSync(fd, [header, buffer.subarray(0, size)]) : 0;
      if (sent < header.length + size) socket.write(Buffer.concat([header, buffer.subarray(0, size)]).subarray(sent));
    }
  });
  socket.on('error', () => {});
  return printedText(child, 'pair client').then(JSON.parse);
}

const LARGE_SCRIPT = `
import time
from tools import large_result
large_result()
times = []
for _ in range(5):
    start = time.perf_counter()
    text = large_result()
    times.append(time.perf_counter() - start)
    assert len(text) == ${LARGE_RESULT_BYTES}
print(sorted(times)[2] * 1e3)
`;

// The baseline of a large result: a minimal client and a minimal Node server over the same kind of socket, the reply
// made with JSON.stringify and parsed with json.loads, nothing else.
const RAW_LARGE_CLIENT = `
import json, os, time
fd = 3
os.set_blocking(fd, True)
times = []
for i in range(1, 7):
    start = time.perf_counter()
    os.write(fd, (json.dumps({"id": i, "method": "large_result", "params": {}}) + "\\n").encode())
    parts = []
    while True:
        chunk = os.read(fd, 1 << 20)
        parts.append(chunk)
        if chunk.endswith(b"\\n"):
            break
    text = json.loads(b"".join(parts))["result"]
    times.append(time.perf_counter() - start)
    assert len(text) == ${LARGE_RESULT_BYTES}
print(sorted(times[1:])[2] * 1e3)
`;

function rawLargeReplyMilliseconds(executable, text) {
  return answerLineClient({
    executable,
    source: RAW_LARGE_CLIENT,
    answer: (request) => `{"id":${request.id},"result":${JSON.stringify(text)}}`,
    name: 'raw client',
  });
}

const PRINT_SCRIPT = `line = "x" * ${PRINTED_LINE_BYTES - 1}\nfor _ in range(${PRINTED_LINES}):\n    print(line)\n`;

/** The groups of rows, in the order they are measured. */
export const BULK_GROUPS = ['reads', 'small', 'large', 'print'];

/**
 * Measures the bulk rows; `rounds` scripts of each kind, alternating with their baselines; `groups` (of
 * BULK_GROUPS) says which rows. Resolves the rows as `{ figure, unit, digits, value, baseline, baselineName }`.
 */
export async function measureBulkIo({ stateDir, interpreter, rounds = 5, groups = BULK_GROUPS, print = () => {} }) {
  // Readable by the unprivileged user a root host runs scripts as: the script starts in the workspace and reads it.
  const workspace = mkdtempSync(join(tmpdir(), 'codecall-bulk-workspace-'));
  chmodSync(workspace, 0o755);
  mkdirSync(join(workspace, 'batch'), { mode: 0o755 });
  const text = batchText();
  for (let index = 0; index < BATCH_FILES; index += 1) {
    writeFileSync(join(workspace, 'batch', `f${String(index).padStart(3, '0')}.txt`), text);
  }
  writeFileSync(join(workspace, 'small.txt'), '123456789\n');
  writeFileSync(join(workspace, SHORT_LINES_FILE), shortLinesText());
  const largeText = TEXT_LINE.repeat(Math.ceil(LARGE_RESULT_BYTES / TEXT_LINE.length)).slice(0, LARGE_RESULT_BYTES);
  const codecall = createCodecall({
    sandbox: 'none',
    stateDir: join(stateDir, 'bulk-state'),
    workspace,
    builtinTools: ['files'],
    tools: [
      defineTool({
        name: 'echo',
        description: 'Returns its arguments.',
        inputSchema: { type: 'object', properties: { value: {} } },
        execute: async (args) => args,
      }),
      defineTool({
        name: 'large_result',
        description: 'Returns 5 MB of text.',
        inputSchema: { type: 'object', properties: {} },
        execute: async () => largeText,
      }),
    ],
    limits: { maxToolCalls: 100_000 },
  });
  const run = async (code) => {
    const result = await codecall.execute(code);
    if (result.status !== 'success') throw new Error(`bulk run failed: ${JSON.stringify(result)}`);
    return result.stdout;
  };
  const rows = [];
  try {
    if (groups.includes('reads')) await measureReads();
    if (groups.includes('small')) await measureSmall();
    if (groups.includes('large')) await measureLarge();
    if (groups.includes('print')) await measurePrint();
  } finally {
    await codecall.close();
    rmSync(workspace, { recursive: true, force: true });
  }
  return rows;

  async function measureReads() {
    print('bulk reads…');
    const batch = { plain: [], tool: [], plainThreads: [], toolThreads: [], toolGather: [] };
    const bare = [];
    const pair = { plain: [], pair: [] };
    for (let round = 0; round < rounds; round += 1) {
      const figures = JSON.parse(await run(batchScript(3)));
      for (const key of Object.keys(batch)) batch[key].push(figures[key]);
      bare.push(await bareNumber(interpreter.executable, bareBatchScript(3), workspace));
      const floor = await minimalPairReads(interpreter.executable, workspace, 3);
      for (const key of Object.keys(pair)) pair[key].push(floor[key]);
    }
    const megabytes = (BATCH_FILES * BATCH_FILE_BYTES) / 1e6;
    const rate = (seconds) => megabytes / median(seconds);
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through read_file, a loop`,
      unit: 'MB/s',
      digits: 0,
      value: rate(batch.tool),
      baseline: rate(batch.plain),
      baselineName: 'plain Python reads of the same files',
      target: '≥ 0.5× baseline',
      met: rate(batch.tool) >= 0.5 * rate(batch.plain),
    });
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through read_file, a loop`,
      unit: 'MB/s',
      digits: 0,
      value: rate(batch.tool),
      baseline: rate(bare),
      baselineName: 'the same plain reads in a bare python -S',
      target: '≥ 0.5× baseline',
      met: rate(batch.tool) >= 0.5 * rate(bare),
    });
    // The floor: what any process boundary with a socket costs here, next to the plain reads of its own client.
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through a minimal Node/Python pair, a loop`,
      unit: 'MB/s',
      digits: 0,
      value: rate(pair.pair),
      baseline: rate(pair.plain),
      baselineName: 'plain Python reads of the same files in the same client',
    });
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through read_file, a loop`,
      unit: 'MB/s',
      digits: 0,
      value: rate(batch.tool),
      baseline: rate(pair.pair),
      baselineName: 'the same reads through the minimal Node/Python pair',
    });
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through read_file, ${BATCH_THREADS} threads`,
      unit: 'MB/s',
      digits: 0,
      value: rate(batch.toolThreads),
      baseline: rate(batch.plainThreads),
      baselineName: `plain Python reads, ${BATCH_THREADS} threads`,
    });
    rows.push({
      figure: `${BATCH_FILES} files × ${BATCH_FILE_BYTES / 1024} KB through tools.aio.read_file, one asyncio.gather`,
      unit: 'MB/s',
      digits: 0,
      value: rate(batch.toolGather),
      baseline: rate(batch.plain),
      baselineName: 'plain Python reads of the same files',
    });
  }

  async function measureSmall() {
    const small = { read: [], echo: [], shortLines: [], textLines: [] };
    for (let round = 0; round < rounds; round += 1) {
      const figures = JSON.parse(await run(SMALL_SCRIPT));
      for (const key of Object.keys(small)) small[key].push(figures[key]);
    }
    rows.push({
      figure: 'read_file of a 10-byte file',
      unit: 'µs',
      value: median(small.read),
      baseline: median(small.echo),
      baselineName: 'echo tool call',
    });
    // The line count of read_file (the WebAssembly counter), next to the JavaScript count it replaces, on the text of a
    // batch file and on the short-lines file, in this process.
    await newlineCounterReady();
    for (const [name, bytes] of [
      ['text lines', Buffer.from(batchText())],
      ['short lines (a CSV of numbers)', Buffer.from(shortLinesText())],
    ]) {
      rows.push({
        figure: `line count of a ${BATCH_FILE_BYTES / 1024} KB file of ${name}`,
        unit: 'µs',
        digits: 2,
        value: countMicroseconds(countNewlines, bytes),
        baseline: countMicroseconds(countNewlinesInJavaScript, bytes),
        baselineName: 'the same counted in JavaScript',
      });
    }
    // A file of short lines next to one of text lines: the line count takes the same time for both (the rows above).
    rows.push({
      figure: `read_file of a ${BATCH_FILE_BYTES / 1024} KB file of short lines (a CSV of numbers)`,
      unit: 'µs',
      value: median(small.shortLines),
      baseline: median(small.textLines),
      baselineName: `read_file of a ${BATCH_FILE_BYTES / 1024} KB file of text lines`,
    });
  }

  async function measureLarge() {
    print('large results…');
    const large = [];
    const rawLarge = [];
    for (let round = 0; round < rounds; round += 1) {
      large.push(Number(await run(LARGE_SCRIPT)));
      rawLarge.push(await rawLargeReplyMilliseconds(interpreter.executable, largeText));
    }
    rows.push({
      figure: `a ${LARGE_RESULT_BYTES / 1024 / 1024} MB tool result`,
      unit: 'ms',
      value: median(large),
      baseline: median(rawLarge),
      baselineName: 'raw socketpair reply, JSON.stringify + json.loads',
    });
  }

  async function measurePrint() {
    print('printing…');
    const printed = [];
    const bare = [];
    const session = codecall.session();
    const cells = [];
    // The host's own CPU (all its threads) while the output crosses: codecall reading and keeping it, next to Node
    // spawning the bare interpreter and reading its pipe.
    const runCpu = [];
    const cellCpu = [];
    const bareCpu = [];
    for (let round = 0; round < rounds * 2; round += 1) {
      let cpuBefore = process.cpuUsage();
      const started = performance.now();
      const result = await codecall.execute(PRINT_SCRIPT);
      printed.push(performance.now() - started);
      runCpu.push(cpuMilliseconds(process.cpuUsage(cpuBefore)));
      if (result.status !== 'success' || result.stdoutTruncated?.totalBytes !== PRINTED_LINES * PRINTED_LINE_BYTES) {
        throw new Error(`print run lost output: ${JSON.stringify(result.stdoutTruncated ?? result.status)}`);
      }
      cpuBefore = process.cpuUsage();
      bare.push(await timeSpawn(interpreter.executable, ['-S', '-c', PRINT_SCRIPT]));
      bareCpu.push(cpuMilliseconds(process.cpuUsage(cpuBefore)));
      cpuBefore = process.cpuUsage();
      const cellStarted = performance.now();
      const cell = await session.execute(PRINT_SCRIPT);
      cells.push(performance.now() - cellStarted);
      cellCpu.push(cpuMilliseconds(process.cpuUsage(cpuBefore)));
      if (cell.status !== 'success' || cell.stdoutTruncated?.totalBytes !== PRINTED_LINES * PRINTED_LINE_BYTES) {
        throw new Error(`print cell lost output: ${JSON.stringify(cell.stdoutTruncated ?? cell.status)}`);
      }
    }
    await session.close();
    rows.push({
      figure: `${PRINTED_LINES.toLocaleString('en')} lines printed (5 MB), cold run`,
      unit: 'ms',
      value: median(printed),
      baseline: median(bare),
      baselineName: 'bare python -S printing the same to a pipe',
      target: '≤ 1.5× baseline',
      met: median(printed) <= 1.5 * median(bare),
    });
    rows.push({
      figure: `${PRINTED_LINES.toLocaleString('en')} lines printed (5 MB), session cell`,
      unit: 'ms',
      value: median(cells),
      baseline: median(bare),
      baselineName: 'bare python -S printing the same to a pipe',
    });
    rows.push({
      figure: `host CPU of a cold run printing ${PRINTED_LINES.toLocaleString('en')} lines (5 MB)`,
      unit: 'ms',
      value: median(runCpu),
      baseline: median(bareCpu),
      baselineName: 'host CPU spawning bare python -S printing the same and reading its pipe',
    });
    rows.push({
      figure: `host CPU while a session cell prints ${PRINTED_LINES.toLocaleString('en')} lines (5 MB)`,
      unit: 'ms',
      value: median(cellCpu),
      baseline: median(bareCpu),
      baselineName: 'host CPU spawning bare python -S printing the same and reading its pipe',
    });
  }
}

/** Counts of a buffer one after another: `count(bytes)` 20,000 times after 2,000 unmeasured; µs per count. */
function countMicroseconds(count, bytes) {
  let total = 0;
  for (let warmUp = 0; warmUp < 2_000; warmUp += 1) total += count(bytes);
  const started = performance.now();
  for (let round = 0; round < 20_000; round += 1) total += count(bytes);
  const elapsed = performance.now() - started;
  if (total === 0 && bytes.includes(0x0a)) throw new Error('the line count found no newline');
  return (elapsed * 1000) / 20_000;
}

/** User and system CPU of a `process.cpuUsage` difference, in milliseconds. */
function cpuMilliseconds(usage) {
  return (usage.user + usage.system) / 1000;
}

/** The groups BENCH_BULK names (all when unset); an unknown name is an error, not an empty table. */
function bulkGroups(setting) {
  if (setting === undefined || setting === '') return BULK_GROUPS;
  const groups = setting.split(',').map((name) => name.trim());
  const unknown = groups.filter((name) => !BULK_GROUPS.includes(name));
  if (unknown.length > 0) {
    throw new Error(`BENCH_BULK names unknown groups ${unknown.join(', ')}; use any of ${BULK_GROUPS.join(', ')}`);
  }
  return groups;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bulk-'));
  try {
    const interpreter = await resolvePythonInterpreter('python3');
    const rows = await measureBulkIo({
      stateDir,
      interpreter,
      rounds: Number(process.env.BENCH_ROUNDS ?? 5),
      groups: bulkGroups(process.env.BENCH_BULK),
      print: (text) => process.stderr.write(`${text}\n`),
    });
    for (const entry of rows) {
      const digits = entry.digits ?? 1;
      console.log(
        `${entry.figure} (${entry.unit}): ${entry.value.toFixed(digits)} | ${entry.baseline.toFixed(digits)} ` +
          `${entry.baselineName} | ${ratio(entry.value, entry.baseline)}`,
      );
    }
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}
