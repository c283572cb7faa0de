import type { Writable } from 'node:stream';
import { CodecallError } from '../core/errors.js';
import type { Limits } from '../core/limits.js';
import { type CodecallOptions, createCodecall, DEFAULT_PYTHON } from '../engine/codecall.js';
import { formatSeconds } from '../engine/failure-hints.js';
import { describeSandboxProbe, probeSandbox } from '../sandbox/bubblewrap-probe.js';
import { resolvePythonInterpreter } from '../sandbox/interpreter.js';
import { describeRunUids } from '../sandbox/run-uids.js';
import { unsandboxedWarning } from '../sandbox/select-runner.js';

function describeLimits(limits: Limits): string {
  const mebibytes = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MiB`;
  return [
    `timeout ${formatSeconds(limits.timeoutMs)}`,
    `${limits.maxToolCalls} tool calls`,
    `tool call timeout ${formatSeconds(limits.toolCallTimeoutMs)}`,
    `stdout shown ${limits.maxStdoutBytes} bytes`,
    `output ${mebibytes(limits.maxOutputBytes)}`,
    `memory ${mebibytes(limits.memoryBytes)}`,
    `${limits.maxProcesses} processes`,
    `files ${mebibytes(limits.maxFileBytes)}`,
    `frames ${mebibytes(limits.maxFrameBytes)}`,
    `cpu ${limits.cpuSeconds} s`,
  ].join(', ');
}

/**
 * `codecall doctor`: what runs would use here — the interpreter, the isolation, the tools, the limits. Exit 0 when
 * a script can run as configured, 1 when something needed is missing.
 */
export async function runDoctor(options: CodecallOptions, output: Writable): Promise<number> {
  const line = (label: string, text: string) => output.write(`${label.padEnd(12)} ${text}\n`);
  let healthy = true;
  const python = options.python ?? DEFAULT_PYTHON;
  try {
    const interpreter = await resolvePythonInterpreter(python);
    line('python', `${interpreter.executable} (Python ${interpreter.version}, from "${python}")`);
  } catch (error) {
    line('python', `NOT USABLE: ${(error as Error).message}`);
    healthy = false;
  }
  const probe = await probeSandbox();
  for (const text of describeSandboxProbe(probe)) line('sandbox', text);
  try {
    line('run uid', describeRunUids());
  } catch (error) {
    if (!(error instanceof CodecallError)) throw error;
    line('run uid', `NOT USABLE: ${error.message}`);
    healthy = false;
  }
  const mode = options.sandbox ?? 'auto';
  const codecall = createCodecall(options);
  try {
    try {
      const isolation = await codecall.isolation();
      line('isolation', `${isolation} (sandbox: ${mode})`);
      if (mode === 'auto' && isolation === 'none') {
        line('WARNING', unsandboxedWarning(probe.bubblewrap.reason ?? 'unknown reason'));
      }
    } catch (error) {
      if (!(error instanceof CodecallError)) throw error;
      line('isolation', `NOT AVAILABLE: ${error.message}`);
      healthy = false;
    }
    if (healthy) {
      const generated = await codecall.generateModule();
      const modules = new Map<string, number>();
      for (const fn of generated.functions) modules.set(fn.module, (modules.get(fn.module) ?? 0) + 1);
      line(
        'module',
        [...modules].map(([name, count]) => `${name} (${count} function${count === 1 ? '' : 's'})`).join(', ') ||
          `${codecall.moduleName} (no tools)`,
      );
    }
    for (const { name, status } of await codecall.toolSources()) {
      const state =
        status.state === 'ready'
          ? `ready (${status.toolCount} tool${status.toolCount === 1 ? '' : 's'})`
          : status.state === 'failed'
            ? `FAILED: ${status.error}`
            : 'not connected';
      line('mcp server', `${name}: ${state}`);
    }
    line('limits', describeLimits(codecall.limits));
  } finally {
    await codecall.close();
  }
  return healthy ? 0 : 1;
}
