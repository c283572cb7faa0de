import { execFile } from 'node:child_process';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { filePromises } from '../../core/file-promises.js';
import { fingerprint } from '../../core/fingerprint.js';
import { fileSignature } from '../../core/host-cache.js';
import { sha256Hex } from '../../core/node-crypto.js';
import { randomHex } from '../../core/random-bytes.js';

/** A Python source file, relative to the folder that goes on `sys.path`. */
export interface ModuleFile {
  readonly path: string;
  readonly content: string;
}

/** Prefix of the folders of interpreter commands. */
const INTERPRETER_COMMANDS_PREFIX = 'bin-';

/** Time allowed for compiling a module folder to bytecode once. */
const COMPILE_TIMEOUT_MS = 60_000;

// Compiles every .py below the folder; scripts run with PYTHONDONTWRITEBYTECODE, so without this they would
// compile the runtime and the generated module again on every start.
const COMPILE_SCRIPT = 'import compileall, sys; sys.exit(0 if compileall.compile_dir(sys.argv[1], quiet=2) else 1)';

function exists(path: string): Promise<boolean> {
  return filePromises()
    .stat(path)
    .then(
      () => true,
      () => false,
    );
}

function compile(executable: string, folder: string): Promise<void> {
  return new Promise((resolve) => {
    execFile(executable, ['-S', '-c', COMPILE_SCRIPT, folder], { timeout: COMPILE_TIMEOUT_MS }, () => resolve());
  });
}

/** What this process placed, by the fingerprint's name: concurrent callers share one write. */
const materialized = new Map<string, Promise<string>>();

/** How a folder found under a name compares with what would be written there. */
type FolderState = 'missing' | 'same' | 'different';

/** Characters of a folder's name taken from a SHA-256 (the names of earlier versions, and the fallback). */
const HASHED_NAME_LENGTH = 24;

/** The state of `folder`, given a check of an existing directory's content. */
function folderState(folder: string, holdsExpected: () => boolean): FolderState {
  try {
    if (!lstatSync(folder).isDirectory()) return 'different';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'different';
  }
  try {
    return holdsExpected() ? 'same' : 'different';
  } catch {
    return 'different';
  }
}

/**
 * Whether `folder` holds exactly `files` (byte for byte, no other file, no link) beside the `__pycache__` folders
 * compiled from them. Synchronous: a few small files, read where the thread pool's round trips would cost more.
 */
function holdsFiles(folder: string, files: ReadonlyMap<string, Buffer>): boolean {
  let matched = 0;
  const walk = (directory: string, prefix: string): boolean => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      const relativePath = prefix === '' ? entry.name : join(prefix, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== '__pycache__' && !walk(path, relativePath)) return false;
        continue;
      }
      const expected = files.get(relativePath);
      if (!entry.isFile() || expected === undefined || !readFileSync(path).equals(expected)) return false;
      matched += 1;
    }
    return true;
  };
  return walk(folder, '') && matched === files.size;
}

/**
 * Makes `target` by filling a temporary folder beside it and renaming it into place, so that concurrent writers race
 * safely; losing the race to another writer is no failure.
 * @throws the filling's error when there is still no `target` afterwards.
 */
async function writeFolder(
  target: string,
  modulesRoot: string,
  fill: (temporary: string) => Promise<void>,
): Promise<void> {
  const temporary = join(modulesRoot, `.tmp-${randomHex(6)}`);
  try {
    await fill(temporary);
    await filePromises().rename(temporary, target);
  } catch (error) {
    await filePromises().rm(temporary, { recursive: true, force: true });
    if (!(await exists(target))) throw error;
  }
}

/**
 * Places a content-addressed folder: under `named` (a fingerprint of the content) when the folder there holds what
 * would be written, or is missing and gets written; otherwise (another content shares the fingerprint, which whoever
 * chooses the content, say an upstream server's tool schemas, can arrange) under the SHA-256 name `hashed()`, reused on
 * sight as before the fingerprints.
 */
async function placeFolder(
  modulesRoot: string,
  named: string,
  hashed: () => string,
  state: () => FolderState,
  fill: (temporary: string) => Promise<void>,
): Promise<string> {
  let found = state();
  if (found === 'missing') {
    await writeFolder(named, modulesRoot, fill);
    // Ours, or a concurrent writer's: checked like any folder found.
    found = state();
  }
  if (found === 'same') return named;
  const target = join(modulesRoot, hashed());
  if (!(await exists(target))) await writeFolder(target, modulesRoot, fill);
  return target;
}

/**
 * Writes Python files into a folder of `modulesRoot` once, compiled to bytecode with `python`, and returns that
 * folder. Its name is a fingerprint of the files and the interpreter, so identical inputs share one folder, and one
 * found under that name is used only when it holds exactly these files (see {@link placeFolder}); concurrent writers
 * race safely (each writes a temporary folder, then renames it into place).
 */
export function materializeModule(modulesRoot: string, files: readonly ModuleFile[], python: string): Promise<string> {
  const encoded = new Map(files.map((file) => [normalize(file.path), Buffer.from(file.content, 'utf8')]));
  const named = join(modulesRoot, fingerprint([python, ...[...encoded].flat()]));
  const place = () => placeModule(modulesRoot, named, encoded, python);
  const known = materialized.get(named);
  // What this process placed for the fingerprint holds these very files unless another content shares it.
  if (known !== undefined) {
    return known.then((folder) =>
      folderState(folder, () => holdsFiles(folder, encoded)) === 'same' ? folder : place(),
    );
  }
  const pending = place();
  materialized.set(named, pending);
  pending.catch(() => materialized.delete(named));
  return pending;
}

async function placeModule(
  modulesRoot: string,
  named: string,
  encoded: ReadonlyMap<string, Buffer>,
  python: string,
): Promise<string> {
  return await placeFolder(
    modulesRoot,
    named,
    // The name of earlier versions: python, then each path and content, each followed by a NUL.
    () => sha256Hex([python, ...[...encoded].flat()]).slice(0, HASHED_NAME_LENGTH),
    () => folderState(named, () => holdsFiles(named, encoded)),
    async (temporary) => {
      for (const [path, bytes] of encoded) {
        const target = join(temporary, path);
        await filePromises().mkdir(dirname(target), { recursive: true, mode: 0o755 });
        await filePromises().writeFile(target, bytes, { mode: 0o644 });
      }
      await compile(python, temporary);
    },
  );
}

/** Paths of the `.py` files below a folder (`__pycache__` aside), relative to it, sorted by code unit. */
function pythonFilePaths(folder: string): string[] {
  const paths: string[] = [];
  const walk = (directory: string): void => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory() && entry.name !== '__pycache__') walk(path);
      else if (entry.isFile() && entry.name.endsWith('.py')) paths.push(relative(folder, path));
    }
  };
  walk(folder);
  // By code unit, not localeCompare: its first call loads ICU's collator, 10–25 ms of a one-shot run.
  return paths.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Reads the `.py` files below a folder (the shipped runtime) as module files. Synchronous: a few small files read
 * once per preparation, where the thread pool's round trips cost more than the reads.
 */
export function readPythonFiles(folder: string): ModuleFile[] {
  return pythonFilePaths(folder).map((path) => ({ path, content: readFileSync(join(folder, path), 'utf8') }));
}

/**
 * The `.py` files below a folder as {@link readPythonFiles} finds them, each with its signature (see
 * `fileSignature`) instead of its content: what tells, without reading them, that the files are the ones seen before.
 */
export function pythonFileSignatures(folder: string): [string, string | null][] {
  return pythonFilePaths(folder).map((path) => [path, fileSignature(join(folder, path)) ?? null]);
}

/** Commands that run the script's interpreter inside its sandbox (`subprocess.run(["python", ...])`). */
export const INTERPRETER_COMMAND_NAMES: readonly string[] = Object.freeze(['python', 'python3']);

/** Whether `folder` holds exactly the links of {@link INTERPRETER_COMMAND_NAMES} to `executable`. */
function holdsInterpreterCommands(folder: string, executable: string): boolean {
  const entries = readdirSync(folder, { withFileTypes: true });
  return (
    entries.length === INTERPRETER_COMMAND_NAMES.length &&
    entries.every(
      (entry) =>
        INTERPRETER_COMMAND_NAMES.includes(entry.name) &&
        entry.isSymbolicLink() &&
        readlinkSync(join(folder, entry.name)) === executable,
    )
  );
}

/**
 * A folder holding `python` and `python3` as links to `executable`, made once per interpreter under `modulesRoot`
 * (renamed into place, so concurrent writers race safely), named by a fingerprint of the path and used only when its
 * links point there (see {@link placeFolder}). Scripts get it first on their PATH, read-only.
 */
export async function materializeInterpreterCommands(modulesRoot: string, executable: string): Promise<string> {
  const named = join(modulesRoot, `${INTERPRETER_COMMANDS_PREFIX}${fingerprint([executable])}`);
  return await placeFolder(
    modulesRoot,
    named,
    () => `${INTERPRETER_COMMANDS_PREFIX}${sha256Hex([executable]).slice(0, HASHED_NAME_LENGTH)}`,
    () => folderState(named, () => holdsInterpreterCommands(named, executable)),
    async (temporary) => {
      await filePromises().mkdir(temporary, { mode: 0o755 });
      for (const command of INTERPRETER_COMMAND_NAMES)
        await filePromises().symlink(executable, join(temporary, command));
    },
  );
}
