import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { GeneratedPythonModule } from '../../src/codegen/python-module.js';

/**
 * A stand-in for the real `codecall_runtime` (which is not codegen's concern): `call`/`acall` record every call in
 * `CALLS` and echo it back, `search_catalog` ranks rows by how many query words they contain.
 */
export const STAND_IN_RUNTIME = `
CALLS = []


class ToolError(Exception):
    pass


def call(wire_name, params):
    CALLS.append((wire_name, params))
    return {"called": wire_name, "params": params}


async def acall(wire_name, params):
    CALLS.append((wire_name, params))
    return {"called": wire_name, "params": params}


def json_parse(text):
    return text


def shell_quote(text):
    return text


def retry(function, attempts=3):
    return function


def save_artifact(name, data):
    return name


def search_catalog(catalog, query, limit):
    words = query.lower().split()
    scored = []
    for name, signature, description in catalog:
        text = (name + " " + signature + " " + description).lower()
        score = sum(1 for word in words if word in text)
        if score:
            scored.append((-score, name, signature, description))
    scored.sort()
    return [{"name": n, "signature": s, "description": d} for _, n, s, d in scored[:limit]]
`;

/** Resolves `python3` to its real executable once (a version-manager shim costs ~200 ms a start). */
export function resolvePython(): string {
  return execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
}

/** A temporary directory holding the generated files and the stand-in runtime beside them. */
export interface PythonWorkspace {
  readonly directory: string;
  /** Runs `script` with the workspace first on `sys.path`; returns stdout. Throws with stderr on failure. */
  run(script: string, options?: { readonly environment?: NodeJS.ProcessEnv }): string;
  remove(): void;
}

/** Writes `generated` and the stand-in runtime into a fresh temporary directory. */
export function createPythonWorkspace(python: string, generated: GeneratedPythonModule): PythonWorkspace {
  const directory = mkdtempSync(join(tmpdir(), 'codecall-codegen-'));
  const files = [...generated.files, { path: 'codecall_runtime/__init__.py', content: STAND_IN_RUNTIME }];
  for (const file of files) {
    const path = join(directory, file.path);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, file.content);
  }
  return {
    directory,
    run(script, options = {}) {
      const prelude = `import sys\nsys.path.insert(0, ${JSON.stringify(directory)})\n`;
      return execFileSync(python, ['-S', '-c', prelude + script], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PYTHONDONTWRITEBYTECODE: '1', ...options.environment },
      });
    },
    remove() {
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** The source of one top-level `def`/`async def` in a generated file, up to the next definition. */
export function functionSource(content: string, name: string): string {
  const start = content.search(new RegExp(`^(async )?def ${name}\\(`, 'm'));
  if (start < 0) throw new Error(`no function ${name} in the generated source`);
  const end = content.indexOf('\n\n\n', start);
  return content.slice(start, end < 0 ? content.length : end).trimEnd();
}

/** The content of a generated file by path. */
export function fileContent(generated: GeneratedPythonModule, path: string): string {
  const file = generated.files.find((candidate) => candidate.path === path);
  if (file === undefined) throw new Error(`no generated file ${path}`);
  return file.content;
}
