import { resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { CodecallError } from '../core/errors.js';
import type { IsolationLevel } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import { formatBytes, formatSeconds, plural } from '../core/wording.js';
import { DEFAULT_WORKSPACE_MOUNT } from '../core/workspace-mount.js';
import { parseDatabases } from '../databases/database-config.js';
import { probeDatabase } from '../databases/database-probe.js';
import { type CodecallOptions, createCodecall, DEFAULT_PYTHON } from '../engine/codecall.js';
import { describeNarrowing } from '../mcp-client/tool-narrowing.js';
import { describeSandboxProbe, probeSandbox } from '../sandbox/bubblewrap-probe.js';
import { resolvePythonInterpreter } from '../sandbox/interpreter.js';
import { importablePackagesOf } from '../sandbox/notable-packages.js';
import { BUILTIN_TOOL_SET_MEMBERS, FILE_TOOL_SET_NAMES } from '../tools/builtin-tool-sets.js';
import type { ToolSourceStatus } from '../tools/registered-tool.js';
import { HTTP_TOKEN_ENVIRONMENT_VARIABLE, type HttpTokenSetting } from './http-token.js';

/** What `doctor` reports beyond the codecall's options. */
export interface DoctorSettings {
  /** The bearer token `serve --http` would use (from `--token-file` or the environment). */
  readonly httpToken?: (() => Promise<HttpTokenSetting>) | undefined;
  /**
   * Modules to import inside the sandbox, as a script would (`--import`); without them, the notable packages the
   * description names.
   */
  readonly imports?: readonly string[] | undefined;
}

const MODULE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/**
 * Checks the module names given to `doctor --import`.
 * @throws CodecallError `INVALID_CONFIG` naming a name that is not a Python module name.
 */
export function checkImportNames(names: readonly string[]): string[] {
  const checked = names
    .flatMap((name) => name.split(','))
    .map((name) => name.trim())
    .filter((name) => name !== '');
  for (const name of checked) {
    if (!MODULE_NAME.test(name)) {
      throw new CodecallError('INVALID_CONFIG', `--import: "${name}" is not a Python module name`, { name });
    }
  }
  return checked;
}

const IMPORT_PROBE = `
import importlib, json
results = {}
for name in json.loads(NAMES):
    try:
        importlib.import_module(name)
        results[name] = None
    except BaseException as error:
        results[name] = "%s: %s" % (type(error).__name__, error)
print(json.dumps(results))
`;

/** Why an import failed inside the sandbox, in words, from its error. */
function explainImportFailure(error: string, python: string): string {
  if (/^ModuleNotFoundError/.test(error)) return `not installed for ${python}`;
  if (/cannot open shared object file/.test(error)) {
    return 'a shared library it loads is not visible in the sandbox: add its folder to readOnlyPaths';
  }
  if (/Permission denied/.test(error)) return 'the sandbox user cannot read it: check the permissions of its files';
  return 'it fails while importing (see the error)';
}

/** Tries the imports in a run of the configured codecall; one line per module, false when one fails. */
async function probeImports(
  codecall: ReturnType<typeof createCodecall>,
  names: readonly string[],
  python: string,
  line: (label: string, text: string) => void,
): Promise<boolean> {
  if (names.length === 0) {
    line('imports', 'nothing to try (no notable packages found; name some with --import)');
    return true;
  }
  const script = IMPORT_PROBE.replace('NAMES', JSON.stringify(JSON.stringify(names)));
  const result = await codecall.execute(script);
  let outcomes: Record<string, string | null>;
  try {
    outcomes = JSON.parse(result.stdout) as Record<string, string | null>;
  } catch {
    line('imports', `NOT TRIED: the probe run ended with ${result.status}: ${result.error?.message ?? 'no output'}`);
    return false;
  }
  let healthy = true;
  for (const name of names) {
    const error = outcomes[name];
    if (error === null) line('import', `${name}: ok`);
    else {
      healthy = false;
      const text = typeof error === 'string' ? error : 'no answer';
      line('import', `${name}: FAILED (${explainImportFailure(text, python)}): ${text.split('\n')[0]}`);
    }
  }
  return healthy;
}

function describeHttpAuthentication(setting: HttpTokenSetting): string {
  const token =
    setting.token === undefined
      ? `a random one generated at each start and printed on stderr (set ${HTTP_TOKEN_ENVIRONMENT_VARIABLE} or --token-file to keep one)`
      : `from ${setting.source}`;
  return `authentication: bearer token on every request, ${token}; Host and Origin checked on loopback; --http unix:PATH for a socket only this user can open`;
}

import { type OutputsRetention, resolveOutputsRetention } from '../engine/result/outputs-retention.js';
import { describeRunUids } from '../sandbox/run-uids.js';
import { unsandboxedWarning } from '../sandbox/select-runner.js';

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
    `disk ${formatBytes(limits.maxDiskBytes)}`,
    `frames ${formatBytes(limits.maxFrameBytes)}`,
    `cpu ${formatSeconds(limits.cpuSeconds * 1000)}`,
  ].join(', ');
}

/** What bounds the files of a run, in a line: the run's tmpfs under bubblewrap, only the file size without one. */
export function describeDiskLimit(limits: Limits, isolation: IsolationLevel): string {
  if (isolation === 'bubblewrap') {
    return (
      `${formatBytes(limits.maxDiskBytes)} per run or session (limits.maxDiskBytes): working directory, TMPDIR and ` +
      "/tmp on one tmpfs in the sandbox, charged to the run's memory cgroup where it has one; ENOSPC past it"
    );
  }
  return (
    `NOT BOUNDED without a sandbox: the run directory is on the host's disk, each file up to ` +
    `${formatBytes(limits.maxFileBytes)} (limits.maxFileBytes); limits.maxDiskBytes holds under bubblewrap only`
  );
}

/** Longest list of left-out tool names shown for one MCP server. */
const MAX_LEFT_OUT_SHOWN = 12;

/** A source's state in a line: ready with its tool count (and how it was narrowed), failed, or not connected. */
function describeSourceStatus(status: ToolSourceStatus): string {
  if (status.state === 'failed') return `FAILED: ${status.error}`;
  if (status.state === 'idle') return 'not connected';
  const narrowing = status.narrowing;
  if (narrowing === undefined) return `ready (${status.toolCount} tool${status.toolCount === 1 ? '' : 's'})`;
  const leftOut = narrowing.leftOut;
  const shown = leftOut.slice(0, MAX_LEFT_OUT_SHOWN).join(', ');
  const more = leftOut.length > MAX_LEFT_OUT_SHOWN ? `, and ${leftOut.length - MAX_LEFT_OUT_SHOWN} more` : '';
  return `ready: ${describeNarrowing(narrowing)}${leftOut.length === 0 ? '' : `; left out: ${shown}${more}`}`;
}

/** The `outputs` retention in a line: `kept 1 day / 512 MiB / 500 runs`. */
export function describeOutputsRetention(retention: OutputsRetention): string {
  const hours = retention.maxAgeMs / 3_600_000;
  const age = hours >= 24 && Number.isInteger(hours / 24) ? plural(hours / 24, 'day') : `${Number(hours.toFixed(2))} h`;
  const mebibytes = Number((retention.maxBytes / (1024 * 1024)).toFixed(1));
  return `kept ${age} / ${mebibytes} MiB / ${plural(retention.maxRuns, 'run')} (whichever is reached first)`;
}

/** The built-in sets in a line: each set with its tools, and the file tools that none of them includes. */
function describeBuiltinTools(names: readonly string[]): string {
  const sets = [...new Set(names)];
  const included = new Set(sets.flatMap((name) => BUILTIN_TOOL_SET_MEMBERS.get(name) ?? []));
  const parts = sets.map((name) => `${name} (${(BUILTIN_TOOL_SET_MEMBERS.get(name) ?? []).join(', ')})`);
  const usesFiles = sets.some((name) => FILE_TOOL_SET_NAMES.includes(name));
  const leftOut = (BUILTIN_TOOL_SET_MEMBERS.get('files') ?? []).filter((tool) => !included.has(tool));
  return `${parts.join(', ')}${usesFiles && leftOut.length > 0 ? `; left out: ${leftOut.join(', ')}` : ''}`;
}

/**
 * `codecall doctor`: what runs would use here — the interpreter, the isolation, the tools (built-in sets, host
 * tools, upstream servers and how they are narrowed, databases and whether they answer), the limits. Exit 0 when a
 * script can run as configured, 1 when something needed is missing.
 */
export async function runDoctor(
  options: CodecallOptions,
  output: Writable,
  settings: DoctorSettings = {},
): Promise<number> {
  const line = (label: string, text: string) => output.write(`${label.padEnd(12)} ${text}\n`);
  let healthy = true;
  const python = options.python ?? DEFAULT_PYTHON;
  let imports = settings.imports ?? [];
  try {
    const interpreter = await resolvePythonInterpreter(python);
    line('python', `${interpreter.executable} (Python ${interpreter.version}, from "${python}")`);
    const importable = importablePackagesOf(interpreter.siteModuleNames);
    line(
      'packages',
      importable.notable.length === 0 && importable.others === 0
        ? 'standard library only'
        : `${importable.notable.join(', ') || 'no notable ones'} (${plural(importable.others, 'other module')})`,
    );
    if (settings.imports === undefined) imports = importable.notable;
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
  // Doctor looks at this machine: with a `remote` configuration, at what an agent here prepares (its tools).
  const codecall = createCodecall({ ...options, remote: undefined });
  let runIsolation: IsolationLevel | undefined;
  try {
    try {
      const isolation = await codecall.isolation();
      runIsolation = isolation;
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
        [...modules].map(([name, count]) => `${name} (${plural(count, 'function')})`).join(', ') ||
          `${codecall.moduleName} (no tools)`,
      );
    }
    const builtinTools = options.builtinTools ?? [];
    if (builtinTools.length > 0) line('builtin', describeBuiltinTools(builtinTools));
    const hostTools = options.tools ?? [];
    if (hostTools.length > 0) line('tools', hostTools.map((tool) => tool.name).join(', '));
    const databases = parseDatabases(options.databases ?? {}, {
      baseDirectory: resolve(options.workspace ?? process.cwd()),
    });
    for (const { name, status } of await codecall.toolSources()) {
      if (Object.hasOwn(databases, name)) continue;
      line('mcp server', `${name}: ${describeSourceStatus(status)}`);
    }
    const probes = await Promise.all(Object.values(databases).map((database) => probeDatabase(database)));
    Object.keys(databases).forEach((name, index) => {
      line('database', `${name}: ${probes[index]?.text ?? ''}`);
    });
    if (healthy && !(await probeImports(codecall, imports, python, line))) healthy = false;
    line(
      'workspace',
      `${options.workspace ?? process.cwd()} (workspaceMount ${options.workspaceMount ?? DEFAULT_WORKSPACE_MOUNT})`,
    );
    line('limits', describeLimits(codecall.limits));
    if (runIsolation !== undefined) line('disk', describeDiskLimit(codecall.limits, runIsolation));
    line(
      'secrets',
      options.redactSecrets === false ? 'shown as printed (redactSecrets: false)' : 'masked in output and errors',
    );
    line('outputs', describeOutputsRetention(resolveOutputsRetention(options.outputs)));
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
