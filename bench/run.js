// `npm run bench`: every figure next to its baseline, measured in the same run. Prints one table.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCodecall, defineTool, resolvePythonInterpreter } from '../dist/index.js';
import { median, plainJsonEchoMicroseconds, ratio, timeSpawn } from './measure.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const CALLS = Number(process.env.BENCH_CALLS ?? 5_000);
const stateDir = mkdtempSync(join(tmpdir(), 'codecall-bench-'));
const rows = [];
const row = (figure, value, baseline, baselineName) =>
  rows.push({
    figure,
    value,
    baseline: baselineName ? `${baseline} (${baselineName})` : '',
    ratio: baselineName ? ratio(parseFloat(value), parseFloat(baseline)) : '',
  });

const interpreter = await resolvePythonInterpreter('python3');
const echo = defineTool({
  name: 'echo',
  description: 'Returns its arguments.',
  inputSchema: { type: 'object', properties: { value: {} } },
  execute: async (args) => args,
});
const codecall = createCodecall({ sandbox: 'none', tools: [echo], stateDir, limits: { maxToolCalls: CALLS + 1_000 } });

// Cold print(1), isolation none, alternating with a bare interpreter spawned the same way (same flags).
await codecall.execute('print(1)');
await timeSpawn(interpreter.executable, ['-S', '-c', 'pass']);
const cold = [];
const bareSameFlags = [];
const bareDefault = [];
for (let run = 0; run < RUNS; run += 1) {
  let started = performance.now();
  const result = await codecall.execute('print(1)');
  cold.push(performance.now() - started);
  if (result.stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(result.stdout)}`);
  bareSameFlags.push(await timeSpawn(interpreter.executable, ['-S', '-c', 'pass']));
  started = performance.now();
  bareDefault.push(await timeSpawn(interpreter.executable, ['-c', 'pass']));
}
row('cold print(1), none (ms)', median(cold).toFixed(1), median(bareSameFlags).toFixed(1), 'bare python -S -c pass');
row('cold print(1), none (ms)', median(cold).toFixed(1), median(bareDefault).toFixed(1), 'bare python -c pass');

// Sequential tool calls: µs per round trip measured inside the script, next to a plain JSON echo.
const roundTrips = [];
const echoes = [];
for (let run = 0; run < 5; run += 1) {
  const result = await codecall.execute(
    `import time\nfrom tools import echo\nfor i in range(200):\n    echo(value=i)\nstart = time.perf_counter()\nfor i in range(${CALLS}):\n    echo(value=i)\nprint((time.perf_counter() - start) / ${CALLS} * 1e6)`,
  );
  if (result.status !== 'success') throw new Error(result.stderr);
  roundTrips.push(Number(result.stdout));
  echoes.push(await plainJsonEchoMicroseconds(interpreter.executable, CALLS));
}
row('sequential tool call (µs)', median(roundTrips).toFixed(1), median(echoes).toFixed(1), 'plain JSON echo');

await codecall.close();
rmSync(stateDir, { recursive: true, force: true });

const widths = ['figure', 'value', 'baseline', 'ratio'].map((key) =>
  Math.max(key.length, ...rows.map((entry) => String(entry[key]).length)),
);
const line = (cells) => cells.map((cell, index) => String(cell).padEnd(widths[index])).join('  ');
console.log(`codecall benchmarks: Python ${interpreter.version}, ${RUNS} runs, medians`);
console.log(line(['figure', 'value', 'baseline', 'ratio']));
for (const entry of rows) console.log(line([entry.figure, entry.value, entry.baseline, entry.ratio]));
