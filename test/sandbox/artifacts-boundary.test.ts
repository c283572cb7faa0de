import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bubblewrapUsable, useSandboxedCodecalls } from './support/sandbox-fixture.js';

const scratch = mkdtempSync(join(tmpdir(), 'codecall-sandbox-canaries-'));

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A root-only host folder with a file: the host once followed a link to it and moved its files into outputs. */
function canaryFolder(name: string): string {
  const folder = join(scratch, name);
  mkdirSync(folder, { mode: 0o700 });
  writeFileSync(join(folder, 'secret.txt'), 'host only');
  chmodSync(join(folder, 'secret.txt'), 0o600);
  return folder;
}

describe.skipIf(!bubblewrapUsable)('artifacts under bubblewrap', () => {
  describe.each([
    ['a cold run', 0],
    ['a pooled run', 1],
  ])('in %s', (_name, size) => {
    const codecall = useSandboxedCodecalls()({ pool: { size } });

    it('returns save_artifact data and a file of the artifacts folder with their bytes', async () => {
      const result = await codecall.execute(
        [
          'import os',
          'from codecall_runtime import save_artifact',
          'save_artifact("report.txt", "made inside")',
          'open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "raw.bin"), "wb").write(bytes(range(256)))',
        ].join('\n'),
      );
      expect(result).toMatchObject({ status: 'success', isolation: 'bubblewrap' });
      const byName = new Map(result.artifacts?.map((artifact) => [basename(artifact.path), artifact.path]));
      expect([...byName.keys()].sort()).toEqual(['raw.bin', 'report.txt']);
      expect(readFileSync(byName.get('report.txt') ?? '', 'utf8')).toBe('made inside');
      expect(
        readFileSync(byName.get('raw.bin') ?? '').equals(Buffer.from(Array.from({ length: 256 }, (_, i) => i))),
      ).toBe(true);
    });

    it('moves nothing out of a host folder its artifacts folder links to', async () => {
      const canary = canaryFolder(`canary-${size}`);
      const result = await codecall.execute(
        [
          'import os, shutil',
          'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
          'shutil.rmtree(artifacts)',
          `os.symlink(${JSON.stringify(canary)}, artifacts)`,
          'print("swapped")',
        ].join('\n'),
      );
      expect(result).toMatchObject({ status: 'success', stdout: 'swapped\n' });
      expect(readdirSync(canary)).toEqual(['secret.txt']);
      expect(readFileSync(join(canary, 'secret.txt'), 'utf8')).toBe('host only');
      expect(result.artifacts).toBeUndefined();
    });
  });
});
