import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  INTERPRETER_COMMAND_NAMES,
  type ModuleFile,
  materializeInterpreterCommands,
  materializeModule,
} from '../../src/engine/launch/module-cache.js';

/**
 * Module folders and interpreter command folders are named by a fingerprint, which is no cryptographic hash: whoever
 * chooses a module's text (an upstream server's tool schemas) can make it share a fingerprint with another. So a
 * folder found under a name is used only when it holds exactly what would be written there; otherwise the files go
 * under their SHA-256 name. Each test plants, under the name another input got, a folder of other content.
 */

const temporary = mkdtempSync(join(tmpdir(), 'codecall-module-cache-'));
afterAll(() => rmSync(temporary, { recursive: true, force: true }));

/** The real interpreter (the one on PATH may be a slow version-manager shim); it compiles the folders. */
const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout.trim();

let folders = 0;
/** A new, empty modules folder: materializeModule remembers what it placed in each for the life of the process. */
function modulesFolder(): string {
  folders += 1;
  const folder = join(temporary, `modules-${folders}`);
  mkdirSync(folder);
  return folder;
}

const files: ModuleFile[] = [
  { path: 'tools/__init__.py', content: 'def add(a, b):\n    return a + b\n' },
  { path: 'tools/aio.py', content: 'async def add(a, b):\n    return a + b\n' },
];
const otherFiles: ModuleFile[] = [{ path: 'tools/__init__.py', content: 'import os\nos.system("id")\n' }];

/** Whether `folder` holds `expected` (and reads them back as they were written). */
function holds(folder: string, expected: readonly ModuleFile[]): boolean {
  return expected.every((file) => readFileSync(join(folder, file.path), 'utf8') === file.content);
}

describe('materializeModule', () => {
  it('writes the files once, compiled, and finds the folder again in another process', async () => {
    const modules = modulesFolder();
    const folder = await materializeModule(modules, files, python);
    expect(holds(folder, files)).toBe(true);
    expect(existsSync(join(folder, 'tools/__pycache__'))).toBe(true);
    // As another process would: the same folder by another path, of which this process remembers nothing.
    const link = `${modules}-link`;
    symlinkSync(modules, link);
    const again = await materializeModule(link, files, python);
    expect(again).toBe(join(link, basename(folder)));
    expect(statSync(again).ino).toBe(statSync(folder).ino);
  });

  it('checks again a folder it placed itself before using it a second time', async () => {
    const modules = modulesFolder();
    const folder = await materializeModule(modules, files, python);
    expect(await materializeModule(modules, files, python)).toBe(folder);
    writeFileSync(join(folder, 'tools/__init__.py'), otherFiles[0]?.content ?? '');
    const replaced = await materializeModule(modules, files, python);
    expect(replaced).not.toBe(folder);
    expect(holds(replaced, files)).toBe(true);
  });

  it('does not use a folder under its name that holds other files, and writes its own under another name', async () => {
    const original = await materializeModule(modulesFolder(), files, python);
    const modules = modulesFolder();
    // What a colliding text would have left under the name these files get.
    const planted = join(modules, basename(original));
    cpSync(await materializeModule(modulesFolder(), otherFiles, python), planted, { recursive: true });
    const folder = await materializeModule(modules, files, python);
    expect(folder).not.toBe(planted);
    expect(basename(folder)).toMatch(/^[0-9a-f]{24}$/);
    expect(holds(folder, files)).toBe(true);
    expect(readFileSync(join(planted, 'tools/__init__.py'), 'utf8')).toBe(otherFiles[0]?.content);
    expect(await materializeModule(modules, files, python)).toBe(folder);
  });

  it('does not use a folder holding the same files and one more (a module that would hide another)', async () => {
    const original = await materializeModule(modulesFolder(), files, python);
    const modules = modulesFolder();
    const planted = join(modules, basename(original));
    cpSync(original, planted, { recursive: true });
    writeFileSync(join(planted, 'json.py'), 'raise SystemExit("hidden")\n');
    const folder = await materializeModule(modules, files, python);
    expect(folder).not.toBe(planted);
    expect(existsSync(join(folder, 'json.py'))).toBe(false);
  });

  it('does not use a folder whose file is a link, even to the right content', async () => {
    const original = await materializeModule(modulesFolder(), files, python);
    const modules = modulesFolder();
    const planted = join(modules, basename(original));
    cpSync(original, planted, { recursive: true });
    const elsewhere = join(temporary, `elsewhere-${folders}.py`);
    writeFileSync(elsewhere, files[1]?.content ?? '');
    rmSync(join(planted, 'tools/aio.py'));
    symlinkSync(elsewhere, join(planted, 'tools/aio.py'));
    expect(await materializeModule(modules, files, python)).not.toBe(planted);
  });
});

describe('materializeInterpreterCommands', () => {
  it('links python and python3 to the interpreter, once', async () => {
    const modules = modulesFolder();
    const folder = await materializeInterpreterCommands(modules, python);
    expect(basename(folder)).toMatch(/^bin-[0-9a-f]{16}$/);
    for (const command of INTERPRETER_COMMAND_NAMES) expect(readlinkSync(join(folder, command))).toBe(python);
    expect(await materializeInterpreterCommands(modules, python)).toBe(folder);
  });

  it('does not use a folder under its name whose links point elsewhere', async () => {
    const original = await materializeInterpreterCommands(modulesFolder(), python);
    const modules = modulesFolder();
    const planted = join(modules, basename(original));
    mkdirSync(planted);
    for (const command of INTERPRETER_COMMAND_NAMES) symlinkSync('/bin/sh', join(planted, command));
    const folder = await materializeInterpreterCommands(modules, python);
    expect(folder).not.toBe(planted);
    expect(basename(folder)).toMatch(/^bin-[0-9a-f]{24}$/);
    for (const command of INTERPRETER_COMMAND_NAMES) expect(readlinkSync(join(folder, command))).toBe(python);
  });
});
