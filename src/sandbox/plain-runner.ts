import { dirname } from 'node:path';
import { canonicalPath } from '../core/canonical-path.js';
import { BootVariable } from '../core/launch-layout.js';
import { isInside } from '../core/paths.js';
import { forgetRunUid, holdRunUid, killRunUidProcesses, releaseRunUid } from './host-watchdog.js';
import { interpreterRoots } from './interpreter-roots.js';
import {
  createReachableNamespace,
  isOpenToOthers,
  type ReachableNamespace,
  type ReachableRoot,
  unreachableRoots,
} from './reachable-namespace.js';
import {
  configuredRunUidRange,
  handRunTo,
  killEveryProcessOf,
  type RunUidOptions,
  runUidAllocator,
  runUidsAvailable,
} from './run-uids.js';
import type { LaunchRequest, PreparedLaunch, RunsAhead, SandboxRunner } from './runner.js';
import { defaultSandboxFilesDirectory, ensureSandboxFilesDirectory } from './sandbox-files.js';
import { findNsenter } from './staging-namespace.js';

/** First descriptor number of `inheritedFileDescriptors` in the child. */
const FIRST_INHERITED_DESCRIPTOR = 4;

/** Options of {@link createPlainRunner}. */
export interface PlainRunnerOptions {
  /**
   * Why this run has no sandbox although one was asked for (`sandbox: "auto"` where bubblewrap is not usable): stated
   * in every result and in the tool description.
   */
  readonly isolationWarning?: string | undefined;
  /** The range and lock folder of the per-run uids used when the host is root. */
  readonly runUids?: RunUidOptions | undefined;
}

/**
 * Isolation level `none`: the interpreter runs as a plain child process with an allowlisted environment, a private
 * working directory, resource limits and its own session. As root it runs as an unprivileged uid of its own (see
 * `run-uids.ts`), entering a mount namespace where the directories it needs are reachable when some lie under a
 * private parent; the host watchdog kills everything of that uid when the run ends or the host dies. Otherwise the
 * interpreter dies with the host through `PR_SET_PDEATHSIG`. It is not a security boundary; use bubblewrap for that.
 */
export function createPlainRunner(options: PlainRunnerOptions = {}): SandboxRunner {
  const asRoot = runUidsAvailable();
  let namespace:
    | {
        readonly needed: readonly { readonly root: ReachableRoot; readonly cover: string }[];
        readonly value: Promise<ReachableNamespace>;
      }
    | undefined;
  let nsenter: string | undefined;
  const nsenterPath = (): string => {
    nsenter ??= findNsenter();
    return nsenter;
  };
  const realPaths = new Map<string, string>();
  const realPath = (path: string): string => {
    let real = realPaths.get(path);
    if (real === undefined) {
      real = canonicalPath(path);
      realPaths.set(path, real);
    }
    return real;
  };
  // Per root: the blocking parent to cover, or null when the run uids reach it (same for every uid of the range).
  const covers = new Map<string, { readonly root: ReachableRoot; readonly cover: string } | null>();
  const neededOf = (root: ReachableRoot, user: { readonly uid: number; readonly gid: number }) => {
    const key = `${root.writable ? 'rw' : 'ro'}:${root.path}`;
    let entry = covers.get(key);
    if (entry === undefined) {
      entry = unreachableRoots([root], user)[0] ?? null;
      covers.set(key, entry);
    }
    return entry;
  };

  /** The namespace in which every root is reachable by the run uids, or undefined when they all are already. */
  const namespaceFor = (
    roots: readonly ReachableRoot[],
    user: { readonly uid: number; readonly gid: number },
  ): Promise<ReachableNamespace> | undefined => {
    const needed = roots.flatMap((root) => neededOf(root, user) ?? []);
    if (needed.length === 0) return undefined;
    const known = namespace?.needed ?? [];
    const covered = (root: ReachableRoot) =>
      known.some((entry) => isInside(root.path, entry.root.path) && (entry.root.writable || !root.writable));
    if (namespace !== undefined && needed.every((entry) => covered(entry.root))) return namespace.value;
    const all = [...new Map([...known, ...needed].map((entry) => [entry.root.path, entry])).values()];
    const value = createReachableNamespace(all, ensureSandboxFilesDirectory(defaultSandboxFilesDirectory()));
    const current = { needed: all, value };
    namespace = current;
    value.catch(() => {
      if (namespace === current) namespace = undefined;
    });
    return value;
  };

  return {
    isolation: 'none',
    isolationWarning: options.isolationWarning,
    /**
     * Starts the mount namespace the runs of an environment will enter (when some of what they need lies under a
     * private parent) while the engine still writes the module and the run directory, instead of on the first run's
     * critical path. Its roots hold each run's (the modules folder holds the module folders), so runs reuse it.
     */
    prepareAhead(environment: RunsAhead): void {
      if (!asRoot) return;
      try {
        const { first } = options.runUids?.range ?? configuredRunUidRange();
        const roots: ReachableRoot[] = [
          ...interpreterRoots(environment.interpreter).map((path) => ({ path: realPath(path), writable: false })),
          ...environment.readOnlyPaths.map((path) => ({ path: realPath(path), writable: false })),
          { path: realPath(environment.runsRoot), writable: true },
          ...(environment.workspace !== undefined && isOpenToOthers(environment.workspace.source)
            ? [{ path: realPath(environment.workspace.source), writable: environment.workspace.writable }]
            : []),
        ];
        namespaceFor(roots, { uid: first, gid: first })?.catch(() => undefined);
      } catch {
        // A path that cannot be resolved or reached now fails the run, which says why.
      }
    },
    async prepare(request: LaunchRequest): Promise<PreparedLaunch> {
      if (!asRoot) {
        return {
          plan: {
            command: request.interpreter.executable,
            args: request.pythonArguments,
            environment: { ...request.environment, [BootVariable.parentPid]: String(process.pid) },
            cwd: request.workDir,
          },
        };
      }
      const environment = request.environment;
      const lease = await runUidAllocator(options.runUids).claim();
      const python = request.interpreter.executable;
      try {
        // Before anything runs as the uid: a host killed from here on still has it killed.
        holdRunUid(python, lease.uid);
        handRunTo(request, lease);
        const roots: ReachableRoot[] = [
          ...interpreterRoots(request.interpreter).map((path) => ({ path: realPath(path), writable: false })),
          ...request.readOnlyPaths.map((path) => ({ path: realPath(path), writable: false })),
          { path: realPath(dirname(request.workDir)), writable: true },
          ...workspaceRoots(request, realPath),
        ];
        const reachable = await namespaceFor(roots, lease);
        const plan =
          reachable === undefined
            ? {
                command: request.interpreter.executable,
                args: request.pythonArguments,
                environment,
                cwd: request.workDir,
                uid: lease.uid,
                gid: lease.gid,
              }
            : {
                command: nsenterPath(),
                args: [
                  `--mount=/proc/self/fd/${FIRST_INHERITED_DESCRIPTOR}`,
                  '-S',
                  String(lease.uid),
                  '-G',
                  String(lease.gid),
                  '--',
                  request.interpreter.executable,
                  ...request.pythonArguments,
                ],
                // nsenter opens a `--wd` before it enters, which leaves no path inside: the boot changes to it.
                environment: { ...environment, [BootVariable.workDirectory]: request.workDir },
                cwd: '/',
                inheritedFileDescriptors: [reachable.descriptor],
              };
        // Set once every process of the uid was killed: none can start again (only the host runs as it), so the
        // release at the end need not kill a second time.
        let killedAll = false;
        return {
          plan,
          containment: {
            // A daemon the script left (setsid, out of the process group) goes before the host deletes the run's
            // directory: alive, it could swap a folder there for a link while the removal walks it.
            killAll: async () => {
              killedAll =
                (await killRunUidProcesses(python, lease.uid)) || (await killEveryProcessOf(lease.uid)) || killedAll;
            },
            // Everything still running as the run's uid goes (a daemon the script left), then the uid is free.
            dispose: async () => {
              const killed = killedAll ? await forgetRunUid(python, lease.uid) : await releaseRunUid(python, lease.uid);
              await lease.release({ killRemaining: !killed });
            },
          },
        };
      } catch (error) {
        const killed = await releaseRunUid(python, lease.uid);
        await lease.release({ killRemaining: !killed });
        throw error;
      }
    },
  };
}

/**
 * The workspace as a directory the script must reach at its own path (`read-only` and `read-write`; a copy lies in
 * the run directory). A workspace whose own permission bits shut other users out is left as it is, as under
 * bubblewrap: the boot then says on stderr that it cannot enter it (so does it for a workspace that is gone).
 */
function workspaceRoots(request: LaunchRequest, realPath: (path: string) => string): ReachableRoot[] {
  const view = request.workspace;
  if (view === undefined || view.copied) return [];
  try {
    if (!isOpenToOthers(view.source)) return [];
    return [{ path: realPath(view.source), writable: view.writable }];
  } catch {
    // Gone: the boot says so on stderr, as for any workspace it cannot enter.
    return [];
  }
}
