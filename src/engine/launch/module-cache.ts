import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';

/** A Python source file, relative to the folder that goes on `sys.path`. */
export interface ModuleFile {
  readonly path: string;
  readonly content: string;
}

/** Time allowed for compiling a module folder to bytecode once. */
const COMPILE_TIMEOUT_MS = 60_000;

// Compiles every .py below the folder; scripts run with PYTHONDONTWRITEBYTECODE, so without this they would
// compile the runtime and the generated module again on every start.
const COMPILE_SCRIPT = 'import compileall, sys; sys.exit(0 if compileall.compile_dir(sys.argv[1], quiet=2) else 1)';

function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function compile(executable: string, folder: string): Promise<void> {
  return new Promise((resolve) => {
    execFile(executable, ['-S', '-c', COMPILE_SCRIPT, folder], { timeout: COMPILE_TIMEOUT_MS }, () => resolve());
  });
}

const materialized = new Map<string, Promise<string>>();

/**
 * Writes Python files into `<modulesRoot>/<hash>/` once, compiled to bytecode with `python`, and returns that folder.
 * The hash covers the files and the interpreter, so identical inputs share one folder; concurrent writers race
 * safely (each writes a temporary folder, then renames it into place).
 */
export function materializeModule(modulesRoot: string, files: readonly ModuleFile[], python: string): Promise<string> {
  const hash = createHash('sha256').update(python).update('\0');
  for (const file of files) hash.update(file.path).update('\0').update(file.content).update('\0');
  const target = join(modulesRoot, hash.digest('hex').slice(0, 24));
  let pending = materialized.get(target);
  if (pending === undefined) {
    pending = writeModule(target, modulesRoot, files, python);
    materialized.set(target, pending);
    pending.catch(() => materialized.delete(target));
  }
  return pending;
}

async function writeModule(
  target: string,
  modulesRoot: string,
  files: readonly ModuleFile[],
  python: string,
): Promise<string> {
  if (await exists(target)) return target;
  const temporary = join(modulesRoot, `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    for (const file of files) {
      const path = join(temporary, file.path);
      await mkdir(dirname(path), { recursive: true, mode: 0o755 });
      await writeFile(path, file.content, { mode: 0o644 });
    }
    await compile(python, temporary);
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    if (!(await exists(target))) throw error;
  }
  return target;
}

/**
 * Reads the `.py` files below a folder (the shipped runtime) as module files. Synchronous: a few small files read
 * once per preparation, where the thread pool's round trips cost more than the reads.
 */
export function readPythonFiles(folder: string): ModuleFile[] {
  const files: ModuleFile[] = [];
  const walk = (directory: string): void => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory() && entry.name !== '__pycache__') walk(path);
      else if (entry.isFile() && entry.name.endsWith('.py')) {
        files.push({ path: relative(folder, path), content: readFileSync(path, 'utf8') });
      }
    }
  };
  walk(folder);
  // By code unit, not localeCompare: its first call loads ICU's collator, 10–25 ms of a one-shot run.
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Commands that run the script's interpreter inside its sandbox (`subprocess.run(["python", ...])`). */
export const INTERPRETER_COMMAND_NAMES: readonly string[] = Object.freeze(['python', 'python3']);

/**
 * A folder holding `python` and `python3` as links to `executable`, made once per interpreter under `modulesRoot`
 * (renamed into place, so concurrent writers race safely). Scripts get it first on their PATH, read-only.
 */
export async function materializeInterpreterCommands(modulesRoot: string, executable: string): Promise<string> {
  const name = `bin-${createHash('sha256').update(executable).digest('hex').slice(0, 24)}`;
  const target = join(modulesRoot, name);
  if (await exists(target)) return target;
  const temporary = join(modulesRoot, `.tmp-${randomBytes(6).toString('hex')}`);
  try {
    await mkdir(temporary, { mode: 0o755 });
    for (const command of INTERPRETER_COMMAND_NAMES) await symlink(executable, join(temporary, command));
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    if (!(await exists(target))) throw error;
  }
  return target;
}
