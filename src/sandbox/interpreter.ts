import { execFile } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import { basename, delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { fileSignature, readHostCache, writeHostCache } from '../core/host-cache.js';
import { firstExecutable } from './executables.js';

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

/** Options of {@link resolvePythonInterpreter}. */
export interface ResolveInterpreterOptions {
  /**
   * A host-only cache folder (see `core/host-cache.ts`): what a probe found is kept there and reused by later
   * processes while the command, its PATH, the file it names, the version files a version manager reads, the
   * interpreter and its package folders are unchanged.
   */
  readonly cacheDirectory?: string | undefined;
}

const resolved = new Map<string, Promise<PythonInterpreter>>();

/** Name of the interpreter entry in the host cache. */
const CACHE_ENTRY = 'python-interpreter';
/** Files version managers (pyenv, asdf, mise) read in the current folder and its parents to choose a version. */
const VERSION_FILE_NAMES = ['.python-version', '.tool-versions', '.mise.toml', 'mise.toml'];
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * Resolves a Python command to its real interpreter, once per command per process (and, with a cache folder, once
 * for as long as nothing it depends on changes).
 * @throws CodecallError `INTERPRETER_NOT_FOUND` when the command cannot be run or is too old.
 */
export function resolvePythonInterpreter(
  command: string,
  options: ResolveInterpreterOptions = {},
): Promise<PythonInterpreter> {
  let pending = resolved.get(command);
  if (pending === undefined) {
    pending = resolveWithCache(command, options.cacheDirectory);
    resolved.set(command, pending);
    pending.catch(() => resolved.delete(command));
  }
  return pending;
}

async function resolveWithCache(command: string, cacheDirectory: string | undefined): Promise<PythonInterpreter> {
  let key: unknown;
  try {
    key = cacheDirectory === undefined ? undefined : interpreterCacheKey(command);
  } catch {
    // A folder that vanished under the process (its working directory): probe without the cache.
    key = undefined;
  }
  if (cacheDirectory === undefined || key === undefined) return probe(command);
  const cached = readHostCache<CachedInterpreter>(cacheDirectory, CACHE_ENTRY, key);
  if (cached !== undefined && isCurrent(cached)) return Object.freeze(cached.interpreter);
  const interpreter = await probe(command);
  writeHostCache(cacheDirectory, CACHE_ENTRY, key, {
    interpreter,
    signatures: factSignatures(interpreter),
  } satisfies CachedInterpreter);
  return interpreter;
}

/** A cached probe and the signatures of the files and folders its facts come from. */
interface CachedInterpreter {
  readonly interpreter: PythonInterpreter;
  readonly signatures: Readonly<Record<string, string | null>>;
}

/**
 * What decides which interpreter a command runs: the command, PATH, the file the command names on PATH (its
 * signature and, for a script such as a pyenv shim, the version files it reads). Undefined when the command is not
 * found (the probe then reports why).
 */
function interpreterCacheKey(command: string): unknown {
  const path = process.env.PATH ?? DEFAULT_PATH;
  const located = command.includes('/')
    ? resolve(command)
    : firstExecutable(
        path
          .split(delimiter)
          .filter((folder) => isAbsolute(folder))
          .map((folder) => join(folder, command)),
      );
  if (located === undefined) return undefined;
  const signature = fileSignature(located);
  if (signature === undefined) return undefined;
  return {
    command,
    path,
    located,
    signature,
    ...(isScript(located) ? { versionFiles: versionFileSignatures(located) } : {}),
  };
}

/** Whether a file starts with `#!` (a shim of a version manager, a wrapper), rather than being the interpreter. */
function isScript(path: string): boolean {
  let descriptor: number | undefined;
  try {
    descriptor = openSync(path, 'r');
    const start = Buffer.alloc(2);
    return readSync(descriptor, start, 0, 2, 0) === 2 && start.toString('latin1') === '#!';
  } catch {
    return false;
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
}

/**
 * The version files a shim may read: those of the current folder and every parent, and the global `version` file of
 * a pyenv-style root (`<root>/shims/python3` → `<root>/version`).
 */
function versionFileSignatures(shim: string): Record<string, string | null> {
  const signatures: Record<string, string | null> = {};
  const note = (file: string) => {
    signatures[file] = fileSignature(file) ?? null;
  };
  for (let folder = process.cwd(); ; folder = dirname(folder)) {
    for (const name of VERSION_FILE_NAMES) note(join(folder, name));
    if (dirname(folder) === folder) break;
  }
  const shimFolder = dirname(shim);
  if (basename(shimFolder) === 'shims') note(join(dirname(shimFolder), 'version'));
  return signatures;
}

/**
 * Signatures of what the facts were read from: the interpreter, its standard library and package folders (installing
 * or removing a package changes its folder).
 */
function factSignatures(interpreter: PythonInterpreter): Record<string, string | null> {
  const signatures: Record<string, string | null> = {};
  for (const path of [interpreter.executable, ...interpreter.stdlibPaths, ...interpreter.sitePaths]) {
    signatures[path] = fileSignature(path) ?? null;
  }
  return signatures;
}

function isCurrent(cached: CachedInterpreter): boolean {
  if (typeof cached !== 'object' || cached === null) return false;
  const { interpreter, signatures } = cached;
  if (typeof interpreter !== 'object' || interpreter === null || typeof signatures !== 'object' || !signatures) {
    return false;
  }
  if (
    typeof interpreter.executable !== 'string' ||
    typeof interpreter.version !== 'string' ||
    typeof interpreter.prefix !== 'string' ||
    typeof interpreter.basePrefix !== 'string' ||
    ![interpreter.stdlibPaths, interpreter.sitePaths, interpreter.siteModuleNames, interpreter.stdlibModuleNames].every(
      (list) => Array.isArray(list) && list.every((item) => typeof item === 'string'),
    )
  ) {
    return false;
  }
  const expected = factSignatures(interpreter);
  return (
    Object.keys(expected).length === Object.keys(signatures).length &&
    Object.entries(expected).every(([path, signature]) => signatures[path] === signature)
  );
}

function probe(command: string): Promise<PythonInterpreter> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      ['-c', PROBE_SCRIPT],
      { timeout: RESOLVE_TIMEOUT_MS, env: { PATH: process.env.PATH ?? DEFAULT_PATH } },
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
