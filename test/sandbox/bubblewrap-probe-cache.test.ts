import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { hostCacheDirectory } from '../../src/core/host-cache.js';
import { findBubblewrap } from '../../src/sandbox/bubblewrap-probe.js';

const bubblewrap = findBubblewrap();
if (bubblewrap === undefined) console.log('skipped: bubblewrap (bwrap) is not installed');

/** A fresh copy of the probe module, as a new host process would load it. */
async function freshProbe() {
  vi.resetModules();
  return (await import('../../src/sandbox/bubblewrap-probe.js')).probeSandbox;
}

describe.skipIf(bubblewrap === undefined)('bubblewrap probe cached across processes', () => {
  let root: string;
  let wrapper: string;
  let log: string;
  let cacheDirectory: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'codecall-probe-cache-'));
    // As root the trial sandbox starts as an unprivileged user: it must reach the wrapper and its log.
    chmodSync(root, 0o755);
    log = join(root, 'starts.log');
    writeFileSync(log, '');
    chmodSync(log, 0o666);
    // bwrap behind a wrapper that logs each start (its --version and its trial sandbox).
    wrapper = join(root, 'bwrap');
    writeFileSync(wrapper, `#!/bin/sh\necho "$1" >> '${log}'\nexec '${bubblewrap}' "$@"\n`);
    chmodSync(wrapper, 0o755);
    cacheDirectory = hostCacheDirectory(join(root, 'state')) ?? '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));
  const starts = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0);

  it('runs the trial sandbox once, and again when bwrap changes', async () => {
    const options = { bubblewrapPath: wrapper, filesDirectory: join(root, 'files'), cacheDirectory };
    const first = await (await freshProbe())(options);
    expect(first.bubblewrap).toMatchObject({ available: true });
    const probed = starts();
    expect(probed).toBeGreaterThanOrEqual(2);

    const second = await (await freshProbe())(options);
    expect(starts()).toBe(probed);
    expect(second.bubblewrap).toEqual(first.bubblewrap);
    expect(second.seccomp).toBe(first.seccomp);

    writeFileSync(wrapper, `${readFileSync(wrapper, 'utf8')}\n`);
    await (await freshProbe())(options);
    expect(starts()).toBeGreaterThan(probed);
  });

  it('never caches a failed probe', async () => {
    const failing = join(root, 'failing-bwrap');
    writeFileSync(
      failing,
      `#!/bin/sh\necho "$1" >> '${log}'\n[ "$1" = --version ] && echo 'bubblewrap 0.8.0'\nexit 1\n`,
    );
    chmodSync(failing, 0o755);
    const options = { bubblewrapPath: failing, filesDirectory: join(root, 'files'), cacheDirectory };
    expect((await (await freshProbe())(options)).bubblewrap.available).toBe(false);
    const probed = starts();
    expect((await (await freshProbe())(options)).bubblewrap.available).toBe(false);
    expect(starts()).toBeGreaterThan(probed);
  });
});
