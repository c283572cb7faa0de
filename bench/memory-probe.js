// Started by bench/run.js in a fresh Node process (so earlier figures' memory does not count): the peak growth of this
// process's resident memory while N scripts sleep at once, per script. Prints one JSON line.
// Usage: node --expose-gc bench/memory-probe.js codecall|bare COUNT STATE_DIR
import { createCodecall } from '../dist/index.js';
import { resolvePythonInterpreter } from '../dist/sandbox/interpreter.js';
import { timeConcurrentSpawns } from './measure.js';

const [mode = 'codecall', countText = '64', stateDir] = process.argv.slice(2);
const count = Number(countText);
const SLEEP = 'import time; time.sleep(1)';
/** When the sample is taken: every script has started and none has ended. */
const SAMPLE_AFTER_MS = 700;

const interpreter = await resolvePythonInterpreter('python3');
const codecall = mode === 'codecall' ? createCodecall({ sandbox: 'none', stateDir }) : undefined;
const runAll = () =>
  codecall !== undefined
    ? Promise.all(Array.from({ length: count }, () => codecall.execute(SLEEP)))
    : timeConcurrentSpawns(interpreter.executable, ['-S', '-c', SLEEP], count);

// A first round loads and compiles everything (modules, validators, the generated tool module) once.
await runAll();
globalThis.gc?.();
const before = process.memoryUsage().rss;
let peak = before;
const sample = () => {
  peak = Math.max(peak, process.memoryUsage().rss);
};
const timer = setInterval(sample, 20);
const running = runAll();
await new Promise((resolve) => setTimeout(resolve, SAMPLE_AFTER_MS));
sample();
await running;
clearInterval(timer);
await codecall?.close();
console.log(JSON.stringify({ mode, count, bytesPerScript: (peak - before) / count }));
