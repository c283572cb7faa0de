import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { describeSandboxProbe, probeSandbox } from '../../src/sandbox/bubblewrap-probe.js';
import { createSandboxRunner } from '../../src/sandbox/select-runner.js';
import { bubblewrapUsable, cgroupsActive, sandboxProbe } from './support/sandbox-fixture.js';

/** Choosing the runner (H8: bubblewrap missing or without user namespaces is a hard error) and the probe. */

const scratch = mkdtempSync(join(tmpdir(), 'codecall-select-'));
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A stand-in for bwrap that fails like bwrap does where user namespaces are disabled. */
function fakeBubblewrap(name: string, message: string): string {
  const path = join(scratch, name);
  writeFileSync(
    path,
    `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "bubblewrap 0.8.0"; exit 0; fi\necho "${message}" >&2\nexit 1\n`,
    { mode: 0o755 },
  );
  return path;
}

async function rejection(promise: Promise<unknown>): Promise<CodecallError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(CodecallError);
    return error as CodecallError;
  }
  throw new Error('expected a rejection');
}

describe('createSandboxRunner', () => {
  it('"none" gives the plain runner', async () => {
    expect((await createSandboxRunner('none')).isolation).toBe('none');
  });

  it('H8: "bubblewrap" without bwrap is a thrown SANDBOX_UNAVAILABLE naming the cause', async () => {
    const error = await rejection(createSandboxRunner('bubblewrap', { bubblewrapPath: join(scratch, 'missing') }));
    expect(error.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error.message).toContain('bubblewrap not found at');
  });

  it('H8: "bubblewrap" where user namespaces are disabled is a thrown error saying so', async () => {
    const bwrap = fakeBubblewrap(
      'bwrap-no-userns',
      'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.',
    );
    const error = await rejection(createSandboxRunner('bubblewrap', { bubblewrapPath: bwrap }));
    expect(error.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error.message).toContain('No permissions to creating new namespace');
    expect(error.message).toContain('user namespaces are not available');
  });

  it('"auto" falls back to the plain runner where bubblewrap cannot run, says so, and the probe says why', async () => {
    const bwrap = fakeBubblewrap('bwrap-broken', 'bwrap: Creating new namespace failed: Operation not permitted');
    const warnings: string[] = [];
    const runner = await createSandboxRunner('auto', { bubblewrapPath: bwrap, warn: (text) => warnings.push(text) });
    expect(runner.isolation).toBe('none');
    expect(warnings).toEqual([runner.isolationWarning]);
    expect(runner.isolationWarning).toContain('NO SANDBOX');
    expect(runner.isolationWarning).toContain('Creating new namespace failed');
    const probe = await probeSandbox({ bubblewrapPath: bwrap });
    expect(probe.bubblewrap.available).toBe(false);
    expect(describeSandboxProbe(probe)[0]).toContain('bubblewrap: unavailable');
  });

  it('"auto" without bwrap at all warns on stderr once per process, naming the cause', async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const first = await createSandboxRunner('auto', { bubblewrapPath: join(scratch, 'no-bwrap-here') });
      const second = await createSandboxRunner('auto', { bubblewrapPath: join(scratch, 'no-bwrap-either') });
      expect(first.isolationWarning).toContain('bubblewrap not found at');
      expect(second.isolationWarning).toContain('bubblewrap not found at');
    } finally {
      spy.mockRestore();
    }
    const warnings = written.filter((text) => text.includes('NO SANDBOX'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^codecall: warning: NO SANDBOX: bubblewrap is not usable here \(bubblewrap not found at /,
    );
  });

  it('explicit "none" and a working "auto" carry no warning', async () => {
    expect((await createSandboxRunner('none')).isolationWarning).toBeUndefined();
    if (bubblewrapUsable) expect((await createSandboxRunner('auto')).isolationWarning).toBeUndefined();
  });

  it('refuses a bubblewrap older than the options it needs', async () => {
    const path = join(scratch, 'bwrap-old');
    writeFileSync(path, '#!/bin/sh\necho "bubblewrap 0.4.1"\n', { mode: 0o755 });
    const error = await rejection(createSandboxRunner('bubblewrap', { bubblewrapPath: path }));
    expect(error.message).toContain('too old');
  });

  it.skipIf(!bubblewrapUsable)('"auto" picks bubblewrap where it runs', async () => {
    expect((await createSandboxRunner('auto')).isolation).toBe('bubblewrap');
  });
});

describe.skipIf(!bubblewrapUsable)('probeSandbox on this machine', () => {
  it('reports bubblewrap, seccomp and (where writable) cgroups active, for codecall doctor', () => {
    const lines = describeSandboxProbe(sandboxProbe);
    expect(lines[0]).toMatch(/^bubblewrap: active \(\d+\.\d+/);
    expect(sandboxProbe.userNamespaces).toBe(true);
    expect(lines).toContain('seccomp: active');
    if (cgroupsActive) expect(lines.find((line) => line.startsWith('cgroups:'))).toMatch(/^cgroups: active \(v[12]: /);
    else expect(lines.find((line) => line.startsWith('cgroups:'))).toMatch(/^cgroups: not used, rlimits only/);
  });
});
