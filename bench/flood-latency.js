// Latency of one run's tool calls while another run floods its channel with deeply nested frames.
// Not a test: run it after `npm run build` with `node bench/flood-latency.js`. Environment:
// FLOOD_DIST (folder of the built library, default dist), FLOOD_DEPTH (brackets per frame, default 7,800,000),
// FLOOD_CALLS (calls of the measured run, default 2,000).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const distribution = resolve(process.env.FLOOD_DIST ?? 'dist');
const { createCodecall, defineTool } = await import(pathToFileURL(join(distribution, 'index.js')).href);
const depth = Number(process.env.FLOOD_DEPTH ?? 7_800_000);
const calls = Number(process.env.FLOOD_CALLS ?? 2_000);
const rawChannel = readFileSync(new URL('../test/fixtures/raw_channel.py', import.meta.url), 'utf8');

let flooding = false;
let measured = false;
const tools = [
  defineTool({
    name: 'echo',
    description: 'Returns its arguments.',
    inputSchema: { type: 'object', properties: { value: {} } },
    execute: async (args) => args,
  }),
  defineTool({
    name: 'flood_started',
    description: 'The flooding run has had its first frame answered.',
    inputSchema: { type: 'object' },
    execute: () => {
      flooding = true;
      return null;
    },
  }),
  defineTool({
    name: 'state',
    description: 'Whether the flood is on and whether the measured run is done.',
    inputSchema: { type: 'object' },
    execute: () => ({ flooding, measured }),
  }),
  defineTool({
    name: 'measured',
    description: 'The measured run is done.',
    inputSchema: { type: 'object' },
    execute: () => {
      measured = true;
      return null;
    },
  }),
];

const stateDir = mkdtempSync(join(tmpdir(), 'codecall-flood-'));
const codecall = createCodecall({
  sandbox: 'none',
  tools,
  stateDir,
  limits: { maxToolCalls: 1_000_000, timeoutMs: 600_000 },
});

const measuring = (wait) =>
  [
    'import time',
    'from tools import echo, state',
    ...(wait ? ['while not state()["flooding"]:', '    time.sleep(0.01)'] : []),
    'for _ in range(50): echo(value=0)',
    'latencies = []',
    `for index in range(${calls}):`,
    '    started = time.perf_counter()',
    '    echo(value=index)',
    '    latencies.append((time.perf_counter() - started) * 1e6)',
    'latencies.sort()',
    'pick = lambda share: latencies[min(len(latencies) - 1, int(share * len(latencies)))]',
    'print(f"median {pick(0.5):.0f} us, p99 {pick(0.99):.0f} us, max {latencies[-1] / 1000:.1f} ms")',
  ].join('\n');

const flood = [
  rawChannel,
  'import time',
  `frame = b"[" * ${depth} + b"\\n"`,
  'frames = 0',
  'started = time.perf_counter()',
  'while True:',
  '    send(frame)',
  '    reply = receive()',
  '    frames += 1',
  '    if frames == 1:',
  '        call({"id": 1, "method": "flood_started", "params": {}})',
  '    if call({"id": 2, "method": "state", "params": {}})["result"]["measured"]:',
  '        break',
  'print(f"{frames} frames of {len(frame)} bytes in {time.perf_counter() - started:.1f} s, last reply {reply}")',
].join('\n');

const alone = await codecall.execute(measuring(false));
process.stdout.write(`alone:        ${alone.stdout}`);
const flooder = codecall.execute(flood);
const during = await codecall.execute(`${measuring(true)}\nfrom tools import measured\nmeasured()`);
process.stdout.write(`during flood: ${during.stdout}${during.stderr}`);
const flooded = await flooder;
process.stdout.write(`flooding run: ${flooded.stdout}${flooded.stderr}`);
await codecall.close();
rmSync(stateDir, { recursive: true, force: true });
