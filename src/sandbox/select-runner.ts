import { CodecallError } from '../core/errors.js';
import type { SandboxMode } from '../core/isolation.js';
import { probeSandbox } from './bubblewrap-probe.js';
import { type BubblewrapRunnerOptions, createBubblewrapRunner } from './bubblewrap-runner.js';
import { createPlainRunner } from './plain-runner.js';
import type { SandboxRunner } from './runner.js';

/** Options of {@link createSandboxRunner}: those of the bubblewrap runner (bwrap path, cgroups, extra paths). */
export type SandboxRunnerOptions = BubblewrapRunnerOptions;

/**
 * The runner for a sandbox mode: `none` → the plain runner; `bubblewrap` → the bubblewrap runner, or a thrown
 * `SANDBOX_UNAVAILABLE` naming the cause when it cannot run here (never a silent fallback); `auto` → bubblewrap when
 * the probe finds it usable, else the plain runner (the result's `isolation` says which).
 */
export async function createSandboxRunner(
  mode: SandboxMode,
  options: SandboxRunnerOptions = {},
): Promise<SandboxRunner> {
  switch (mode) {
    case 'none':
      return createPlainRunner();
    case 'bubblewrap':
      return createBubblewrapRunner(options);
    case 'auto': {
      const probe = await probeSandbox(options);
      return probe.bubblewrap.available ? createBubblewrapRunner(options) : createPlainRunner();
    }
    default:
      throw new CodecallError('INVALID_CONFIG', `unknown sandbox mode ${JSON.stringify(mode)}`, { mode });
  }
}
