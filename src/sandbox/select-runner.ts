import { CodecallError } from '../core/errors.js';
import type { SandboxMode } from '../core/isolation.js';
import { probeSandbox } from './bubblewrap-probe.js';
import { type BubblewrapRunnerOptions, createBubblewrapRunner } from './bubblewrap-runner.js';
import { createPlainRunner } from './plain-runner.js';
import { runUidsAvailable } from './run-uids.js';
import type { SandboxRunner } from './runner.js';

/** Options of {@link createSandboxRunner}: those of the bubblewrap runner (bwrap path, cgroups, extra paths, uids). */
export interface SandboxRunnerOptions extends BubblewrapRunnerOptions {
  /**
   * Where the warning of a fallback from `auto` to `none` goes, once per process (default: a line on stderr). The
   * warning is in every result and in the tool description either way.
   */
  readonly warn?: ((warning: string) => void) | undefined;
}

let warnedUnsandboxed = false;

/** Writes the fallback warning to stderr, the first time in this process only. */
function warnOnStderr(warning: string): void {
  if (warnedUnsandboxed) return;
  warnedUnsandboxed = true;
  process.stderr.write(`codecall: warning: ${warning}\n`);
}

/** The warning of a fallback from `auto` to `none`: why bubblewrap is not used and what the scripts can do instead. */
export function unsandboxedWarning(reason: string): string {
  const user = runUidsAvailable() ? 'an unprivileged uid of their own' : 'this user';
  return (
    `NO SANDBOX: bubblewrap is not usable here (${reason}), so sandbox "auto" runs scripts as plain processes ` +
    `(isolation "none"), as ${user}: they can read every file and use every service and network that uid can. ` +
    'Install bubblewrap to sandbox them, or choose sandbox "none" to accept this.'
  );
}

/**
 * The runner for a sandbox mode: `none` → the plain runner; `bubblewrap` → the bubblewrap runner, or a thrown
 * `SANDBOX_UNAVAILABLE` naming the cause when it cannot run here (never a silent fallback); `auto` → bubblewrap when
 * the probe finds it usable, else the plain runner with an `isolationWarning` (in every result and the tool
 * description) and a warning on stderr once per process.
 */
export async function createSandboxRunner(
  mode: SandboxMode,
  options: SandboxRunnerOptions = {},
): Promise<SandboxRunner> {
  switch (mode) {
    case 'none':
      return createPlainRunner({ runUids: options.runUids });
    case 'bubblewrap':
      return createBubblewrapRunner(options);
    case 'auto': {
      const probe = await probeSandbox(options);
      if (probe.bubblewrap.available) return createBubblewrapRunner(options);
      const warning = unsandboxedWarning(probe.bubblewrap.reason ?? 'unknown reason');
      (options.warn ?? warnOnStderr)(warning);
      return createPlainRunner({ isolationWarning: warning, runUids: options.runUids });
    }
    default:
      throw new CodecallError('INVALID_CONFIG', `unknown sandbox mode ${JSON.stringify(mode)}`, { mode });
  }
}
