import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Limits } from '../../src/core/limits.js';
import { preparedOf } from '../../src/engine/codecall.js';
import { launchInterpreter, type RunEnvironment } from '../../src/engine/launch/interpreter-launch.js';
import { createRunId } from '../../src/engine/launch/run-directory.js';
import type { RunContainment, SandboxRunner } from '../../src/sandbox/runner.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();

/** The environment of a codecall whose runner's containment notes, in `order`, when it is asked to kill everything. */
async function environmentNotingKills(order: string[]): Promise<{ environment: RunEnvironment; limits: Limits }> {
  const codecall = codecallWith();
  const { environment } = await preparedOf(codecall);
  const runner = environment.runner;
  const noting: SandboxRunner = {
    isolation: runner.isolation,
    isolationWarning: runner.isolationWarning,
    async prepare(request) {
      const prepared = await runner.prepare(request);
      const own = prepared.containment;
      const containment: RunContainment = {
        afterSpawn: own?.afterSpawn?.bind(own),
        limitReason: own?.limitReason?.bind(own),
        dispose: own?.dispose?.bind(own),
        async killAll() {
          order.push('killAll');
          await own?.killAll?.();
        },
      };
      return { ...prepared, containment };
    },
  };
  return { environment: { ...environment, runner: noting }, limits: codecall.limits };
}

describe('releasing an interpreter after its run', () => {
  it('takes the run directory away before it asks the runner to kill what the run left, and ends with both', async () => {
    const order: string[] = [];
    const { environment, limits } = await environmentNotingKills(order);
    const launched = await launchInterpreter(environment, {
      runId: createRunId(),
      limits,
      mode: 'cold',
      script: 'print(1)',
    });
    await launched.exited;
    const released = launched.release();
    void launched.directoryRemoved.then(() => order.push('directory removed'));
    await released;
    // The caller's result goes back at `directoryRemoved`: the runner's kill (a watchdog's fork) comes after it.
    expect(order).toEqual(['directory removed', 'killAll']);
    expect(existsSync(launched.directory.root)).toBe(false);
  });
});
