import { delimiter } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { BootVariable, CHANNEL_FILE_DESCRIPTOR } from '../core/launch-layout.js';
import type { Limits } from '../core/limits.js';

/** The PATH scripts get: system directories only, never the host's PATH. */
export const SCRIPT_PATH = '/usr/local/bin:/usr/bin:/bin';

/** Host variables passed through by default: harmless locale and time zone settings only. */
export const DEFAULT_PASSTHROUGH_VARIABLES: readonly string[] = Object.freeze(['TZ']);

/** Variable names that may never be passed through, whatever the configuration says. */
const FORBIDDEN_VARIABLE = /^(LD_|PYTHON|CODECALL_)/;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Options of {@link buildScriptEnvironment}. */
export interface ScriptEnvironmentOptions {
  readonly workDir: string;
  readonly tmpDir: string;
  readonly artifactsDir: string;
  /** Directories for `sys.path`, in order (generated modules, runtime, site packages). */
  readonly pythonPath: readonly string[];
  /** A folder whose `python` and `python3` run the script's interpreter: put first on PATH. */
  readonly commandsDir?: string | undefined;
  readonly limits: Limits;
  /** Variables set explicitly by the configuration (`env`). */
  readonly extra?: Readonly<Record<string, string>> | undefined;
  /** Names of host variables to copy when set (`envPassthrough`); defaults to {@link DEFAULT_PASSTHROUGH_VARIABLES}. */
  readonly passthrough?: readonly string[] | undefined;
  /** The host environment to copy passthrough variables from (defaults to `process.env`). */
  readonly hostEnvironment?: NodeJS.ProcessEnv | undefined;
}

/**
 * Builds the script's environment from an allowlist: nothing of the host's environment reaches the script unless
 * named in `passthrough` or set in `extra` (so a host `OPENAI_API_KEY` or `GITHUB_TOKEN` never leaks).
 */
export function buildScriptEnvironment(options: ScriptEnvironmentOptions): Record<string, string> {
  const { limits } = options;
  const environment: Record<string, string> = {
    PATH: options.commandsDir === undefined ? SCRIPT_PATH : `${options.commandsDir}${delimiter}${SCRIPT_PATH}`,
    HOME: options.workDir,
    TMPDIR: options.tmpDir,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    PYTHONUTF8: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
    PYTHONNOUSERSITE: '1',
    PYTHONPATH: options.pythonPath.join(delimiter),
    // Without it each thread reserves a malloc arena and RLIMIT_AS allows only a handful of threads.
    MALLOC_ARENA_MAX: '2',
    MPLBACKEND: 'Agg',
    [BootVariable.channelFileDescriptor]: String(CHANNEL_FILE_DESCRIPTOR),
    [BootVariable.maxFrameBytes]: String(limits.maxFrameBytes),
    [BootVariable.artifactsDirectory]: options.artifactsDir,
    [BootVariable.resourceLimits]: [
      `as=${limits.memoryBytes}`,
      `nproc=${limits.maxProcesses}`,
      `fsize=${limits.maxFileBytes}`,
      `nofile=${limits.maxOpenFiles}`,
      `cpu=${limits.cpuSeconds}`,
      'core=0',
    ].join(','),
  };
  const variables = checkScriptVariables({ extra: options.extra, passthrough: options.passthrough });
  const host = options.hostEnvironment ?? process.env;
  for (const name of variables.passthrough ?? DEFAULT_PASSTHROUGH_VARIABLES) {
    const value = host[name];
    if (value !== undefined) environment[name] = value;
  }
  Object.assign(environment, variables.extra);
  return environment;
}

/** The script variables of a configuration (`env`, `envPassthrough`), checked and copied. */
export interface ScriptVariables {
  /** Variables set explicitly (`env`). */
  readonly extra: Readonly<Record<string, string>> | undefined;
  /** Names of host variables to copy (`envPassthrough`); undefined means {@link DEFAULT_PASSTHROUGH_VARIABLES}. */
  readonly passthrough: readonly string[] | undefined;
}

/**
 * Checks `env` (an object of strings) and `envPassthrough` (an array of names): every name must be a valid variable
 * name and none may be one codecall controls (`LD_*`, `PYTHON*`, `CODECALL_*`). Returns frozen copies, so a caller
 * that checks once at configuration time keeps what it checked. `null` counts as not given.
 * @throws CodecallError `INVALID_CONFIG` naming the option and the bad name or value.
 */
export function checkScriptVariables(options: {
  readonly extra?: unknown;
  readonly passthrough?: unknown;
}): ScriptVariables {
  return { extra: checkExtraVariables(options.extra), passthrough: checkPassthroughNames(options.passthrough) };
}

function checkExtraVariables(extra: unknown): Readonly<Record<string, string>> | undefined {
  if (extra === undefined || extra === null) return undefined;
  if (typeof extra !== 'object' || Array.isArray(extra)) {
    throw new CodecallError('INVALID_CONFIG', `env must be an object of strings, got ${JSON.stringify(extra)}`, {
      value: extra,
    });
  }
  const checked: Record<string, string> = {};
  for (const [name, value] of Object.entries(extra)) {
    checkVariableName(name, 'env');
    if (typeof value !== 'string') {
      throw new CodecallError('INVALID_CONFIG', `env.${name} must be a string, got ${JSON.stringify(value)}`, {
        name,
        value,
      });
    }
    checked[name] = value;
  }
  return Object.freeze(checked);
}

function checkPassthroughNames(passthrough: unknown): readonly string[] | undefined {
  if (passthrough === undefined || passthrough === null) return undefined;
  if (!Array.isArray(passthrough)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `envPassthrough must be an array of variable names, got ${JSON.stringify(passthrough)}`,
      { value: passthrough },
    );
  }
  for (const name of passthrough) checkVariableName(name, 'envPassthrough');
  return Object.freeze([...(passthrough as string[])]);
}

function checkVariableName(name: unknown, key: string): asserts name is string {
  if (typeof name !== 'string' || !VARIABLE_NAME.test(name)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${key}: ${JSON.stringify(name)} is not a valid environment variable name`,
      { name },
    );
  }
  if (FORBIDDEN_VARIABLE.test(name)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${key}: "${name}" cannot be set for scripts (LD_*, PYTHON* and CODECALL_* are controlled by codecall)`,
      { name },
    );
  }
}
