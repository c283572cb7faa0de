import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { hostCacheDirectory } from '../../src/core/host-cache.js';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';

/** A fresh copy of the module, as a new host process would load it (its in-process memo empty). */
async function freshResolver(): Promise<typeof resolvePythonInterpreter> {
  vi.resetModules();
  return (await import('../../src/sandbox/interpreter.js')).resolvePythonInterpreter;
}

describe('interpreter facts cached across processes', () => {
  let root: string;
  let shim: string;
  let log: string;
  let cacheDirectory: string;
  let project: string;
  const originalCwd = process.cwd();

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'codecall-interpreter-cache-'));
    const real = (await resolvePythonInterpreter('python3')).executable;
    // A shim like a version manager's: a script that logs each start, then runs the real interpreter.
    mkdirSync(join(root, 'shims'));
    shim = join(root, 'shims', 'python3');
    log = join(root, 'starts.log');
    writeFileSync(shim, `#!/bin/sh\necho start >> '${log}'\nexec '${real}' "$@"\n`);
    chmodSync(shim, 0o755);
    cacheDirectory = hostCacheDirectory(join(root, 'state')) ?? '';
    project = join(root, 'project');
    mkdirSync(project);
    process.chdir(project);
  });
  afterEach(() => {
    process.chdir(originalCwd);
    rmSync(root, { recursive: true, force: true });
  });
  const starts = () => readFileSync(log, 'utf8').split('\n').filter(Boolean).length;

  it('probes once, then reuses the facts until a version file or the shim changes', async () => {
    const first = await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(1);
    const second = await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(1);
    expect(second).toEqual(first);

    // A version manager picks another version from a file in the current folder: asked again.
    writeFileSync(join(project, '.python-version'), 'system\n');
    await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(2);
    await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(2);

    // The global version file of a pyenv-style root (<root>/shims/python3 → <root>/version).
    writeFileSync(join(root, 'version'), '3.11\n');
    await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(3);

    // The shim itself replaced.
    writeFileSync(shim, `${readFileSync(shim, 'utf8')}\n`);
    await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(4);
  });

  it('probes again when the cache entry is corrupt, and without a cache folder every process probes', async () => {
    await (await freshResolver())(shim, { cacheDirectory });
    writeFileSync(join(cacheDirectory, 'python-interpreter.json'), '{not json');
    await (await freshResolver())(shim, { cacheDirectory });
    expect(starts()).toBe(2);
    await (await freshResolver())(shim);
    await (await freshResolver())(shim);
    expect(starts()).toBe(4);
  });
});
