import type { Writable } from 'node:stream';
import { CodecallError } from '../core/errors.js';
import type { Limits } from '../core/limits.js';
import { formatBytes, formatSeconds, plural } from '../core/wording.js';
import { type CodecallOptions, createCodecall, DEFAULT_PYTHON } from '../engine/codecall.js';
import { describeSandboxProbe, probeSandbox } from '../sandbox/bubblewrap-probe.js';
import { resolvePythonInterpreter } from '../sandbox/interpreter.js';
import { HTTP_TOKEN_ENVIRONMENT_VARIABLE, type HttpTokenSetting } from './http-token.js';

/** What `doctor` reports beyond the codecall's options. */
export interface DoctorSettings {
  /** The bearer token `serve --http` would use (from `--token-file` or the environment). */
  readonly httpToken?: (() => Promise<HttpTokenSetting>) | undefined;
}

function describeHttpAuthentication(setting: HttpTokenSetting): string {
  const token =
    setting.token === undefined
      ? `a random one generated at each start and printed on stderr (set ${HTTP_TOKEN_ENVIRONMENT_VARIABLE} or --token-file to keep one)`
      : `from ${setting.source}`;
  return `authentication: bearer token on every request, ${token}; Host and Origin checked on loopback; --http unix:PATH for a socket only this user can open`;
}

function describeLimits(limits: Limits): string {
  return [
    `timeout ${formatSeconds(limits.timeoutMs)}`,
    plural(limits.maxToolCalls, 'tool call'),
    `tool call timeout ${formatSeconds(limits.toolCallTimeoutMs)}`,
    `stdout shown ${formatBytes(limits.maxStdoutBytes)}`,
    `errors shown ${formatBytes(limits.maxErrorBytes)}`,
    `output ${formatBytes(limits.maxOutputBytes)}`,
    `memory ${formatBytes(limits.memoryBytes)}`,
    `${limits.maxProcesses} processes`,
    `files ${formatBytes(limits.maxFileBytes)}`,
    `frames ${formatBytes(limits.maxFrameBytes)}`,
    `cpu ${formatSeconds(limits.cpuSeconds * 1000)}`,
  ].join(', ');
}

/**
 * `codecall doctor`: what runs would use here — the interpreter, the isolation, the tools, the limits. Exit 0 when
 * a script can run as configured, 1 when something needed is missing.
 */
export async function runDoctor(
  options: CodecallOptions,
  output: Writable,
  settings: DoctorSettings = {},
): Promise<number> {
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
  for (const text of describeSandboxProbe(await probeSandbox())) line('sandbox', text);
  const codecall = createCodecall(options);
  try {
    try {
      line('isolation', `${await codecall.isolation()} (sandbox: ${options.sandbox ?? 'auto'})`);
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
        [...modules].map(([name, count]) => `${name} (${plural(count, 'function')})`).join(', ') ||
          `${codecall.moduleName} (no tools)`,
      );
    }
    for (const { name, status } of await codecall.toolSources()) {
      const state =
        status.state === 'ready'
          ? `ready (${plural(status.toolCount, 'tool')})`
          : status.state === 'failed'
            ? `FAILED: ${status.error}`
            : 'not connected';
      line('mcp server', `${name}: ${state}`);
    }
    line('limits', describeLimits(codecall.limits));
    line(
      'secrets',
      options.redactSecrets === false ? 'shown as printed (redactSecrets: false)' : 'masked in output and errors',
    );
    if (settings.httpToken !== undefined) {
      try {
        line('http', describeHttpAuthentication(await settings.httpToken()));
      } catch (error) {
        if (!(error instanceof CodecallError)) throw error;
        line('http', `authentication: NOT USABLE: ${error.message}`);
        healthy = false;
      }
    }
  } finally {
    await codecall.close();
  }
  return healthy ? 0 : 1;
}
