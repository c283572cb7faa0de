// Child of bench/startup.js: a fresh host process runs the same script of sequential echo calls SCRIPTS times and
// prints the µs per call each run measured inside the script, as JSON. Arguments: state folder, calls, scripts.
import { createCodecall, defineTool } from '../dist/index.js';

const [stateDir, calls = '1000', scripts = '4'] = process.argv.slice(2);
const echo = defineTool({
  name: 'echo',
  description: 'Returns its arguments.',
  inputSchema: { type: 'object', properties: { value: {} } },
  execute: async (args) => args,
});
const codecall = createCodecall({ sandbox: 'none', tools: [echo], stateDir, limits: { maxToolCalls: Number(calls) } });
const script = [
  'import time',
  'from tools import echo',
  'start = time.perf_counter()',
  `for i in range(${calls}):`,
  '    echo(value=i)',
  `print((time.perf_counter() - start) / ${calls} * 1e6)`,
].join('\n');
const perCall = [];
for (let run = 0; run < Number(scripts); run += 1) {
  const result = await codecall.execute(script);
  if (result.status !== 'success') throw new Error(`run failed: ${JSON.stringify(result)}`);
  perCall.push(Number(result.stdout));
}
await codecall.close();
process.stdout.write(JSON.stringify(perCall));
