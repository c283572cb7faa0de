import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeOutputsRetention } from '../../src/cli/doctor.js';
import { createCodecall } from '../../src/engine/codecall.js';
import { DEFAULT_OUTPUTS_RETENTION } from '../../src/engine/result/outputs-retention.js';

const stateDir = mkdtempSync(join(tmpdir(), 'codecall-outputs-option-'));

afterAll(() => {
  rmSync(stateDir, { recursive: true, force: true });
});

describe('the outputs option', () => {
  it('prunes the outputs folder after runs: at most maxRuns entries are left once the codecall is closed', async () => {
    const codecall = createCodecall({ sandbox: 'none', stateDir, outputs: { maxRuns: 2 } });
    let outputRoot = '';
    for (let run = 0; run < 5; run++) {
      const result = await codecall.execute(
        `from codecall_runtime import save_artifact\nsave_artifact("run.txt", "${run}")`,
      );
      expect(result.status).toBe('success');
      outputRoot = dirname(dirname(result.artifacts?.[0]?.path ?? ''));
    }
    await codecall.close();
    expect(readdirSync(outputRoot).length).toBeLessThanOrEqual(2);
  });

  it('a codecall whose runs saved nothing skips the prune another one did within the interval', async () => {
    const sharedState = mkdtempSync(join(tmpdir(), 'codecall-outputs-shared-'));
    try {
      const outputRoot = join(sharedState, 'outputs');
      const first = createCodecall({ sandbox: 'none', stateDir: sharedState, outputs: { maxRuns: 2 } });
      expect((await first.execute('print(1)')).status).toBe('success');
      await first.close();
      // Left by someone else after that prune: more entries than maxRuns.
      for (let index = 0; index < 4; index++) {
        mkdirSync(join(outputRoot, `other${index}`));
        writeFileSync(join(outputRoot, `other${index}`, 'a.png'), 'x');
      }
      const second = createCodecall({ sandbox: 'none', stateDir: sharedState, outputs: { maxRuns: 2 } });
      expect((await second.execute('print(1)')).status).toBe('success');
      await second.close();
      expect(readdirSync(outputRoot)).toHaveLength(4);
      const saving = createCodecall({ sandbox: 'none', stateDir: sharedState, outputs: { maxRuns: 2 } });
      const saved = await saving.execute('from codecall_runtime import save_artifact\nsave_artifact("run.txt", "x")');
      expect(saved.artifacts).toHaveLength(1);
      await saving.close();
      expect(readdirSync(outputRoot)).toHaveLength(2);
    } finally {
      rmSync(sharedState, { recursive: true, force: true });
    }
  });

  it('refuses unknown fields and bad values when the codecall is created', () => {
    expect(() => createCodecall({ stateDir, outputs: { maxRun: 2 } as never })).toThrow(/maxRun/);
    expect(() => createCodecall({ stateDir, outputs: { maxBytes: -1 } })).toThrow(/outputs.maxBytes/);
  });

  it('is described by doctor', () => {
    expect(describeOutputsRetention(DEFAULT_OUTPUTS_RETENTION)).toBe(
      'kept 1 day / 512 MiB / 500 runs (whichever is reached first)',
    );
  });
});
