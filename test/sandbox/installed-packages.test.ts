import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toCallToolResult } from '../../src/mcp-server/execute-code-server.js';
import { bubblewrapUsable, useSandboxedCodecalls } from './support/sandbox-fixture.js';

const codecallWith = useSandboxedCodecalls();
const SYSTEM_PYTHON = '/usr/bin/python3';
const scratch = mkdtempSync(join(tmpdir(), 'codecall-packages-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Why Debian's matplotlib cannot be tried here, or undefined when it imports outside the sandbox. */
function matplotlibMissing(): string | undefined {
  const check = spawnSync(SYSTEM_PYTHON, ['-c', 'import matplotlib'], { encoding: 'utf8' });
  if (check.error !== undefined) return `${SYSTEM_PYTHON} cannot run (${check.error.message})`;
  return check.status === 0 ? undefined : `${SYSTEM_PYTHON} has no matplotlib (install python3-matplotlib)`;
}
const matplotlibReason = matplotlibMissing();
if (matplotlibReason !== undefined) console.warn(`[sandbox tests] matplotlib test skipped: ${matplotlibReason}`);

/** A venv of the system Python with a package in site-packages and one in a folder a .pth file adds. */
function createVirtualEnvironment(): string {
  const venv = join(scratch, 'venv');
  execFileSync(SYSTEM_PYTHON, ['-m', 'venv', '--without-pip', venv]);
  const libFolder = join(venv, 'lib');
  const versionFolder = readdirSync(libFolder).find((name) => name.startsWith('python')) as string;
  const sitePackages = join(libFolder, versionFolder, 'site-packages');
  mkdirSync(join(sitePackages, 'venv_inside'));
  writeFileSync(join(sitePackages, 'venv_inside', '__init__.py'), 'ANSWER = 41\n');
  const local = join(scratch, 'local-packages');
  mkdirSync(join(local, 'venv_local'), { recursive: true });
  writeFileSync(join(local, 'venv_local', '__init__.py'), 'def plus_one(value):\n    return value + 1\n');
  writeFileSync(join(sitePackages, 'local.pth'), `${local}\n`);
  return join(venv, 'bin', 'python');
}

describe.skipIf(!bubblewrapUsable)('installed packages inside bubblewrap', () => {
  it.skipIf(matplotlibReason !== undefined)(
    "imports Debian's matplotlib (shared libraries through /etc/alternatives) and draws a chart, fonts found",
    async () => {
      const codecall = codecallWith({ python: SYSTEM_PYTHON, workspaceMount: 'none' });
      const result = await codecall.execute(
        [
          'import matplotlib',
          'matplotlib.use("Agg")',
          'import matplotlib.pyplot as plt',
          'import io',
          'figure, axes = plt.subplots()',
          'axes.bar(["a", "b"], [3, 5])',
          'buffer = io.BytesIO()',
          'figure.savefig(buffer, format="png")',
          'print(buffer.getvalue()[:8] == b"\\x89PNG\\r\\n\\x1a\\n")',
        ].join('\n'),
      );
      expect(result.error).toBeUndefined();
      expect(result).toMatchObject({ status: 'success', stdout: 'True\n', isolation: 'bubblewrap' });
      // Fontconfig's configuration is there: no "Fontconfig error" on stderr.
      expect(result.stderr).toBe('');
      expect(await codecall.describe()).toMatch(/Installed besides the Python standard library: [^.]*matplotlib/);
    },
    60_000,
  );

  it.skipIf(matplotlibReason !== undefined)(
    'returns a chart left open as a PNG artifact, and as image content over MCP',
    async () => {
      const codecall = codecallWith({ python: SYSTEM_PYTHON, workspaceMount: 'none' });
      const result = await codecall.execute(
        ['import matplotlib.pyplot as plt', 'plt.bar(["north", "south"], [3, 5])', 'plt.title("sales")'].join('\n'),
      );
      expect(result).toMatchObject({ status: 'success', isolation: 'bubblewrap' });
      const charts = (result.artifacts ?? []).filter((artifact) => artifact.mimeType === 'image/png');
      expect(charts).toHaveLength(1);
      const bytes = readFileSync((charts[0] as { path: string }).path);
      expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      const content = (await toCallToolResult(result)).content;
      expect(content).toContainEqual({ type: 'image', mimeType: 'image/png', data: bytes.toString('base64') });
    },
    60_000,
  );

  it('imports the packages of a virtual environment, .pth folders included', async () => {
    const python = createVirtualEnvironment();
    const codecall = codecallWith({ python, workspaceMount: 'none' });
    const result = await codecall.execute(
      'import venv_inside, venv_local\nprint(venv_local.plus_one(venv_inside.ANSWER))',
    );
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: 'success', stdout: '42\n', isolation: 'bubblewrap' });
  }, 60_000);

  it('runs the script\'s own interpreter as "python" and "python3" in a subprocess', async () => {
    const codecall = codecallWith({ python: SYSTEM_PYTHON, workspaceMount: 'none' });
    const result = await codecall.execute(
      [
        'import subprocess, sys',
        'for command in ("python", "python3"):',
        '    done = subprocess.run([command, "-c", "import os, sys; print(os.path.realpath(sys.executable))"],',
        '                          capture_output=True, text=True, check=True)',
        '    print(done.stdout.strip() == sys.executable)',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('True\nTrue\n');
    expect(realpathSync(SYSTEM_PYTHON)).toMatch(/python3/);
  }, 60_000);

  it('binds readOnlyPaths read-only, and nothing else of the host', async () => {
    const data = join(scratch, 'shared-data');
    mkdirSync(data);
    writeFileSync(join(data, 'table.csv'), 'a,b\n1,2\n');
    const script = [
      'import os',
      `path = ${JSON.stringify(join(data, 'table.csv'))}`,
      'print(os.path.exists(path) and open(path).read().splitlines()[1])',
      'try:',
      '    open(path, "a").write("x")',
      'except OSError as error:',
      '    print(type(error).__name__)',
    ].join('\n');
    const bound = await codecallWith({ readOnlyPaths: [data], workspaceMount: 'none' }).execute(script);
    expect(bound.error).toBeUndefined();
    expect(bound.stdout).toMatch(/^1,2\n(OSError|PermissionError)\n$/);
    const unbound = await codecallWith({ workspaceMount: 'none' }).execute(script);
    expect(unbound.stdout).toBe('False\nFileNotFoundError\n');
  }, 60_000);
});
