import { execFile } from 'node:child_process';
import { CodecallError } from '../core/errors.js';

/** The real Python interpreter behind a command such as `python3` (a pyenv shim costs ~200 ms a start). */
export interface PythonInterpreter {
  /** Absolute path of the real executable (`sys.executable`). */
  readonly executable: string;
  /** `major.minor.micro`. */
  readonly version: string;
  /** `sys.prefix`. */
  readonly prefix: string;
  /** `sys.base_prefix` (differs from prefix inside a virtualenv). */
  readonly basePrefix: string;
  /** Standard library directories (`stdlib`, `platstdlib`) and the `lib-dynload` directory. */
  readonly stdlibPaths: readonly string[];
  /**
   * Directories that `site` adds (site-packages, dist-packages, the user site, and what their `.pth` files add), in
   * order, existing ones only: scripts run without `site`, so these go on their `PYTHONPATH`.
   */
  readonly sitePaths: readonly string[];
  /** Top-level modules found in {@link sitePaths} (third-party packages), sorted; listed, never imported. */
  readonly siteModuleNames: readonly string[];
  /** Top-level module names of the standard library (a generated module must not shadow one). */
  readonly stdlibModuleNames: readonly string[];
}

/** Oldest Python the runtime supports. */
export const MINIMUM_PYTHON_VERSION = [3, 8] as const;

const RESOLVE_TIMEOUT_MS = 15_000;

const PROBE_SCRIPT = `
import json, os, pkgutil, sys, sysconfig
paths = sysconfig.get_paths()
stdlib = [p for p in {paths.get('stdlib'), paths.get('platstdlib')} if p]
dynload = [p for p in sys.path if p.endswith('lib-dynload')]
standard = [os.path.realpath(p) for p in stdlib + dynload]
site = []
for p in sys.path:
    if p and os.path.isdir(p) and p not in site and os.path.realpath(p) not in standard and not p.endswith('.zip'):
        site.append(p)
modules = sorted({m.name for m in pkgutil.iter_modules(site) if not m.name.startswith('_')})
names = set(getattr(sys, 'stdlib_module_names', ())) or set(sys.builtin_module_names) | {
  n.split('.')[0] for d in stdlib + dynload if os.path.isdir(d) for n in os.listdir(d) if n.endswith(('.py', '.so')) or '.' not in n}
print(json.dumps({'stdlibModuleNames': sorted(names), 'executable': os.path.realpath(sys.executable), 'version': '%d.%d.%d' % sys.version_info[:3],
  'prefix': sys.prefix, 'basePrefix': sys.base_prefix, 'stdlibPaths': sorted(stdlib) + dynload, 'sitePaths': site,
  'siteModuleNames': modules}))
`;

const resolved = new Map<string, Promise<PythonInterpreter>>();

/**
 * Resolves a Python command to its real interpreter, once per command per process.
 * @throws CodecallError `INTERPRETER_NOT_FOUND` when the command cannot be run or is too old.
 */
export function resolvePythonInterpreter(command: string): Promise<PythonInterpreter> {
  let pending = resolved.get(command);
  if (pending === undefined) {
    pending = probe(command);
    resolved.set(command, pending);
    pending.catch(() => resolved.delete(command));
  }
  return pending;
}

function probe(command: string): Promise<PythonInterpreter> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      ['-c', PROBE_SCRIPT],
      { timeout: RESOLVE_TIMEOUT_MS, env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin' } },
      (error, stdout, stderr) => {
        if (error) {
          reject(
            new CodecallError(
              'INTERPRETER_NOT_FOUND',
              `cannot run the Python interpreter "${command}" (${(error as NodeJS.ErrnoException).code ?? error.message}${
                stderr ? `: ${stderr.trim().split('\n').at(-1)}` : ''
              }); install Python 3 or set "python" to its path`,
              { python: command },
              { cause: error },
            ),
          );
          return;
        }
        try {
          const interpreter = JSON.parse(stdout) as PythonInterpreter;
          const [major = 0, minor = 0] = interpreter.version.split('.').map(Number);
          const [minimumMajor, minimumMinor] = MINIMUM_PYTHON_VERSION;
          if (major < minimumMajor || (major === minimumMajor && minor < minimumMinor)) {
            throw new Error(`Python ${interpreter.version} is older than ${MINIMUM_PYTHON_VERSION.join('.')}`);
          }
          resolve(Object.freeze(interpreter));
        } catch (cause) {
          reject(
            new CodecallError(
              'INTERPRETER_NOT_FOUND',
              `"${command}" is not a usable Python 3 interpreter (${(cause as Error).message})`,
              { python: command },
              { cause },
            ),
          );
        }
      },
    );
  });
}
