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
    PATH: SCRIPT_PATH,
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
    CODECALL_ARTIFACTS_DIR: options.artifactsDir,
    [BootVariable.resourceLimits]: [
      `as=${limits.memoryBytes}`,
      `nproc=${limits.maxProcesses}`,
      `fsize=${limits.maxFileBytes}`,
      `nofile=${limits.maxOpenFiles}`,
      `cpu=${limits.cpuSeconds}`,
      'core=0',
    ].join(','),
  };
  const host = options.hostEnvironment ?? process.env;
  for (const name of options.passthrough ?? DEFAULT_PASSTHROUGH_VARIABLES) {
    checkVariableName(name, 'envPassthrough');
    const value = host[name];
    if (value !== undefined) environment[name] = value;
  }
  for (const [name, value] of Object.entries(options.extra ?? {})) {
    checkVariableName(name, 'env');
    if (typeof value !== 'string') {
      throw new CodecallError('INVALID_CONFIG', `env.${name} must be a string, got ${JSON.stringify(value)}`, {
        name,
        value,
      });
    }
    environment[name] = value;
  }
  return environment;
}

function checkVariableName(name: string, key: string): void {
  if (!VARIABLE_NAME.test(name)) {
    throw new CodecallError('INVALID_CONFIG', `${key}: "${name}" is not a valid environment variable name`, { name });
  }
  if (FORBIDDEN_VARIABLE.test(name)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${key}: "${name}" cannot be set for scripts (LD_*, PYTHON* and CODECALL_* are controlled by codecall)`,
      { name },
    );
  }
}
