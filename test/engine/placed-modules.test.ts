import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CodecallOptions } from '../../src/index.js';

/**
 * A later process takes the module folders an earlier one placed for the same input from their records in the host
 * cache (no generating, no reading back), but only while each folder is the directory recorded: one removed and made
 * again under its name (say by content that shares its fingerprint) is checked, and not used.
 */

/** The real interpreter (the one on PATH may be a slow version-manager shim). */
const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout.trim();

/** A codecall of a fresh copy of the modules, as a new host process would make it. */
async function freshCodecall(options: CodecallOptions) {
  vi.resetModules();
  const { createCodecall, defineTool } = await import('../../src/index.js');
  return createCodecall({
    ...options,
    tools: [
      defineTool({
        name: 'add',
        description: 'Adds two numbers.',
        inputSchema: {
          type: 'object',
          properties: { a: { type: 'number' }, b: { type: 'number' } },
          required: ['a', 'b'],
        },
        execute: ({ a, b }: { a: number; b: number }) => a + b,
      }),
    ],
  });
}

const SCRIPT = 'from tools import add\nprint(add(1, 2))';

describe('module folders placed by an earlier process', () => {
  let stateDir: string;
  beforeEach(() => {
    stateDir = mkdtempSync(join(tmpdir(), 'codecall-placed-modules-'));
  });
  afterEach(() => rmSync(stateDir, { recursive: true, force: true }));

  const options = (): CodecallOptions => ({ stateDir, sandbox: 'none', python, builtinTools: [], warmUp: false });
  const records = () => readdirSync(join(stateDir, 'cache')).filter((name) => name.startsWith('placed-module-'));
  /** The module folder holding `file`. */
  const folderHolding = (file: string) =>
    readdirSync(join(stateDir, 'modules'))
      .map((name) => join(stateDir, 'modules', name))
      .find((folder) => existsSync(join(folder, file)));

  async function run(): Promise<string> {
    const codecall = await freshCodecall(options());
    try {
      const result = await codecall.execute(SCRIPT);
      return `${result.stdout}${result.stderr}`;
    } finally {
      await codecall.close();
    }
  }

  it('are recorded, and used again by a later process for the same input', async () => {
    expect(await run()).toBe('3\n');
    // The generated module's and the runtime's.
    expect(records()).toHaveLength(2);
    expect(await run()).toBe('3\n');
    expect(records()).toHaveLength(2);
  });

  it.each([
    ['the generated module', 'tools/__init__.py'],
    ['the runtime', 'codecall_boot.py'],
  ])('are not used when %s was made again under its name', async (_, file) => {
    expect(await run()).toBe('3\n');
    const folder = folderHolding(file) as string;
    expect(folder).toBeDefined();
    // Removed and made again with other content: the record names a directory that is no longer there.
    rmSync(folder, { recursive: true, force: true });
    mkdirSync(join(folder, file, '..'), { recursive: true });
    writeFileSync(join(folder, file), 'raise SystemExit("planted")\n');
    expect(await run()).toBe('3\n');
  });
});
