import { closeSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Duplex } from 'node:stream';
import { canonicalPath } from '../core/canonical-path.js';
import { CodecallError } from '../core/errors.js';
import { BootVariable, FIRST_INHERITED_FILE_DESCRIPTOR } from '../core/launch-layout.js';
import { isInside } from '../core/paths.js';
import { signalProcess } from '../core/processes.js';
import {
  etcArguments,
  groupContent,
  hostIsRoot,
  isolationArguments,
  passwdContent,
  type SandboxUser,
  scratchArguments,
  systemDirectoryArguments,
} from './bubblewrap-arguments.js';
import { probeSandbox, type SandboxProbe, type SandboxProbeOptions } from './bubblewrap-probe.js';
import { CGROUP_JOIN_AND_EXEC_SCRIPT, createRunCgroups, type RunCgroups, warmUpCgroupMigration } from './cgroups.js';
import { interpreterRoots, outermost } from './interpreter-roots.js';
import { configuredRunUidRange, handRunTo, type RunUidLease, type RunUidOptions, runUidAllocator } from './run-uids.js';
import type { LaunchPlan, LaunchRequest, PreparedLaunch, RunContainment, RunsAhead, SandboxRunner } from './runner.js';
import { chooseSandboxFilesDirectory, writeContentAddressedFile } from './sandbox-files.js';
import { openSeccompProgram } from './seccomp.js';
import { sweepLeftoverStagesOnce } from './stage-leftovers.js';
import {
  directoryIdentity,
  findNsenter,
  isReachableBy,
  type StagingNamespace,
  StagingPlan,
  type StagingRoot,
} from './staging-namespace.js';

/**
 * Processes of bwrap itself in a run's pids cgroup, on top of the script's `maxProcesses`: the sandbox's pid 1, and
 * bwrap's monitor when the launcher joined the cgroups itself (it becomes the monitor).
 */
export const BUBBLEWRAP_SUPERVISOR_PROCESSES = { launcher: 2, host: 1 } as const;
/** How much later than the run's CPU limit RLIMIT_CPU stops a process, when the cgroup watchdog enforces the limit. */
export const RLIMIT_CPU_BACKSTOP_SECONDS = 2;
/** How long bwrap may take to report its sandbox process on the control channel. */
export const CONTROL_CHANNEL_TIMEOUT_MS = 10_000;
/** Options of the bubblewrap runner. */
export interface BubblewrapRunnerOptions extends SandboxProbeOptions {
  /** Use per-run cgroups where this host allows them (default true); without them runs have rlimits only. */
  readonly cgroups?: boolean | undefined;
  /** More host paths the script may read (e.g. a shared library outside the interpreter's prefix). */
  readonly extraReadOnlyPaths?: readonly string[] | undefined;
  /**
   * How a run's processes get into its cgroups: `launcher` (cgroup v1 only, the default there: the launcher moves
   * itself in before it starts bwrap) or `host` (the default on v2: the host moves bwrap's first sandbox process).
   */
  readonly cgroupJoin?: 'launcher' | 'host' | undefined;
  /** The range and lock folder of the per-run uids used when the host is root. */
  readonly runUids?: RunUidOptions | undefined;
}

/** One bind mount: `source` on the host (what bwrap opens), `destination` inside the sandbox. */
interface Mount {
  readonly source: string;
  readonly destination: string;
  /** Only the run directory and a writable workspace are. */
  readonly writable: boolean;
  /** The run directory, the workspace (its own or its copy in the run directory), or a read-only path. */
  readonly kind: 'run' | 'workspace' | 'workspace-copy' | 'read-only';
}

/**
 * Probes the machine and returns the bubblewrap runner.
 * @throws CodecallError `SANDBOX_UNAVAILABLE` naming the cause (bwrap missing, user namespaces disabled, ...).
 */
export async function createBubblewrapRunner(options: BubblewrapRunnerOptions = {}): Promise<BubblewrapRunner> {
  const probe = await probeSandbox(options);
  if (!probe.bubblewrap.available || probe.bubblewrap.path === undefined) {
    throw new CodecallError(
      'SANDBOX_UNAVAILABLE',
      `sandbox "bubblewrap" cannot run here: ${probe.bubblewrap.reason ?? 'unknown reason'}`,
      { probe },
    );
  }
  return new BubblewrapRunner(probe, options);
}

/**
 * Isolation level `bubblewrap`: the interpreter runs in a bwrap sandbox started with an empty environment, in new
 * user, pid, network, ipc, uts and cgroup namespaces, without capabilities, as an unprivileged user (a uid of its own
 * when the host is root, see `run-uids.ts`), under a seccomp filter, seeing read-only /usr, its interpreter, the runtime and a minimal /etc,
 * with only its run directory and sized tmpfs writable, inside per-run cgroups where the host allows them.
 */
export class BubblewrapRunner implements SandboxRunner {
  readonly isolation = 'bubblewrap' as const;
  /** What the probe found (bwrap version, cgroups, seccomp). */
  readonly probe: SandboxProbe;
  private readonly bubblewrapPath: string;
  /**
   * Whom reachability is checked for: the host's own user, or as root the first uid of the run range (every uid of
   * it reaches the same paths: none owns anything outside its run directory).
   */
  private readonly user: SandboxUser;
  private readonly runUids: RunUidOptions | undefined;
  private readonly filesDirectory: string;
  private readonly useCgroups: boolean;
  private readonly extraReadOnlyPaths: readonly string[];
  private readonly cgroupJoin: 'launcher' | 'host' | undefined;
  private readonly fixedArguments = new Map<boolean, readonly string[]>();
  private readonly realPaths = new Map<string, string>();
  private readonly reachable = new Map<string, boolean>();
  private staging: StagingState | undefined;
  /** Every staging plan made, whose stage directories {@link close} removes. */
  private readonly plans: StagingPlan[] = [];
  /** Identity of each staged root when first needed, before a script of this runner could have run. */
  private readonly rootIdentities = new Map<string, string>();
  /** Whether a launch was prepared: from then on a script may have run, and staging is checked (held), not inline. */
  private launched = false;
  private devNull: number | undefined;
  private readonly accounts = new Map<number, { readonly passwd: string; readonly group: string }>();

  /** Use {@link createBubblewrapRunner}, which probes first. */
  constructor(probe: SandboxProbe, options: BubblewrapRunnerOptions = {}) {
    if (probe.bubblewrap.path === undefined) {
      throw new CodecallError('SANDBOX_UNAVAILABLE', 'BubblewrapRunner needs a probe that found bwrap', { probe });
    }
    this.probe = probe;
    this.bubblewrapPath = probe.bubblewrap.path;
    this.runUids = options.runUids;
    const first = hostIsRoot() ? (options.runUids?.range ?? configuredRunUidRange()).first : undefined;
    this.user = first !== undefined ? { uid: first, gid: first } : probe.sandboxUser;
    this.filesDirectory = chooseSandboxFilesDirectory(
      options.filesDirectory,
      (directory) => !hostIsRoot() || isReachableBy(directory, this.user.uid, this.user.gid),
    );
    this.useCgroups = (options.cgroups ?? true) && probe.cgroups.writable;
    this.extraReadOnlyPaths = options.extraReadOnlyPaths ?? [];
    this.cgroupJoin = options.cgroupJoin;
  }

  /** Whether runs get per-run cgroups. */
  get cgroupsActive(): boolean {
    return this.useCgroups;
  }

  async prepare(request: LaunchRequest): Promise<PreparedLaunch> {
    const { limits } = request;
    const firstLaunch = !this.launched;
    this.launched = true;
    // cgroup v1: the launch joins the run itself, cheaply, before it starts bwrap (see RunCgroups.selfJoinFiles).
    const launcherJoins = this.cgroupJoin !== 'host' && this.probe.cgroups.version === 1;
    let cgroups: RunCgroups | undefined;
    let seccomp: number | undefined;
    let lease: RunUidLease | undefined;
    let releaseStaging: (() => void) | undefined;
    try {
      // As root, a uid of the run's own: no other process on the machine may reach its processes or its channel.
      lease = hostIsRoot() ? await runUidAllocator(this.runUids).claim() : undefined;
      const user: SandboxUser = lease ?? this.user;
      if (lease !== undefined) {
        handRunTo(request, lease);
      }
      const mounts = this.mountsFor(request);
      const staging = await this.stagingFor(mounts, firstLaunch ? 'inline' : 'held');
      // An inline staging's shell is root until the drop: it joins the cgroups itself, so no second shell (of the
      // run's user, who then needs no write access to the `tasks` files) runs after the drop.
      const stagesInline = staging !== undefined && staging.namespace === undefined;
      const joinsAsUser = launcherJoins && hostIsRoot() && !stagesInline;
      cgroups = this.useCgroups
        ? this.createCgroups(request, launcherJoins, joinsAsUser ? user : undefined)
        : undefined;
      const selfJoinFiles = launcherJoins ? cgroups?.selfJoinFiles : undefined;
      const viaControlChannel = cgroups !== undefined && selfJoinFiles === undefined;
      const warmUp = viaControlChannel ? warmUpCgroupMigration() : undefined;
      // A host path as bwrap sees it: through the staged mount points when there are some.
      const sourceOf = (path: string) => staging?.plan.reachable(path) ?? path;
      seccomp = this.probe.seccomp ? openSeccompProgram(this.filesDirectory) : undefined;
      // Held at the user namespace until it is inside its cgroups, unless the engine holds the script itself.
      const holdSandbox = viaControlChannel && request.scriptGated !== true;
      const descriptors: number[] = [];
      if (seccomp !== undefined) descriptors.push(seccomp);
      const infoPosition = FIRST_INHERITED_FILE_DESCRIPTOR + descriptors.length;
      if (holdSandbox) descriptors.push(this.nullDescriptor());
      const stagingPosition = FIRST_INHERITED_FILE_DESCRIPTOR + descriptors.length;
      if (staging?.namespace !== undefined) descriptors.push(staging.namespace.descriptor);
      const controlPosition = FIRST_INHERITED_FILE_DESCRIPTOR + descriptors.length;

      const environment = { ...request.environment };
      const rlimits = environment[BootVariable.resourceLimits];
      if (cgroups !== undefined && rlimits !== undefined) {
        environment[BootVariable.resourceLimits] = cgroupAwareRlimits(rlimits, cgroups, limits.cpuSeconds);
      }
      const accounts = this.accountFiles(user);
      const disk = runDiskLayout({
        request,
        environment,
        otherDestinations: mounts.filter((mount) => mount.kind !== 'run').map((mount) => mount.destination),
        scriptSource: request.scriptFile === undefined ? undefined : sourceOf(canonicalPath(request.scriptFile)),
      });
      const bubblewrapArguments = [
        ...this.fixedArgumentsFor(request.network),
        '--ro-bind',
        sourceOf(accounts.passwd),
        '/etc/passwd',
        '--ro-bind',
        sourceOf(accounts.group),
        '/etc/group',
        ...scratchArguments(
          Math.min(limits.maxFileBytes, limits.maxDiskBytes),
          disk.tmp === 'link' ? undefined : limits.maxDiskBytes,
        ),
        ...mounts.flatMap((mount) =>
          mount.kind === 'run'
            ? disk.runArguments
            : [mount.writable ? '--bind' : '--ro-bind', sourceOf(mount.source), mount.destination],
        ),
        ...(disk.tmp === 'link' ? ['--symlink', disk.tmpTarget, '/tmp'] : []),
        '--remount-ro',
        '/',
        '--chdir',
        request.workDir,
        ...(seccomp !== undefined ? ['--seccomp', String(FIRST_INHERITED_FILE_DESCRIPTOR)] : ['--disable-userns']),
        // The sandbox's first pid comes on the status channel. To hold the sandbox, bwrap needs --info-fd with
        // --userns-block-fd but closes it before blocking: the info goes to /dev/null, and the status channel, which
        // stays open, doubles as the block descriptor.
        ...(viaControlChannel ? ['--json-status-fd', String(controlPosition)] : []),
        ...(holdSandbox ? ['--info-fd', String(infoPosition), '--userns-block-fd', String(controlPosition)] : []),
        '--clearenv',
        ...Object.entries(environment).flatMap(([name, value]) => ['--setenv', name, value]),
        '--',
        request.interpreter.executable,
        ...request.pythonArguments,
      ];
      const shellJoins = selfJoinFiles !== undefined && !stagesInline;
      const dropped = [
        ...(shellJoins ? ['/bin/sh', '-c', CGROUP_JOIN_AND_EXEC_SCRIPT, 'sh', ...selfJoinFiles, '--'] : []),
        this.bubblewrapPath,
        ...bubblewrapArguments,
      ];
      const drop = hostIsRoot() ? ['-S', String(user.uid), '-G', String(user.gid)] : [];
      // Started as: inline staging (unshare, a root shell mounting and joining the cgroups, nsenter dropping to the
      // sandbox user) bwrap; or [held staging (nsenter into the namespace, dropping)] [sh joining the cgroups] bwrap.
      let command: string[] = dropped;
      if (staging?.namespace !== undefined) {
        command = [findNsenter(), `--mount=/proc/self/fd/${stagingPosition}`, ...drop, '--', ...dropped];
      } else if (staging !== undefined) {
        const messageDescriptor = viaControlChannel ? controlPosition : undefined;
        command = staging.plan.inlineCommand(
          [findNsenter(), ...drop, '--', ...dropped],
          messageDescriptor,
          selfJoinFiles ?? [],
        );
        releaseStaging = () => staging.plan.release();
      }
      const plan: LaunchPlan = {
        command: command[0] as string,
        args: command.slice(1),
        environment: {},
        cwd: '/',
        inheritedFileDescriptors: descriptors,
        controlChannel: viaControlChannel,
        ...(hostIsRoot() && staging === undefined ? { uid: user.uid, gid: user.gid } : {}),
      };
      return {
        plan,
        containment: new BubblewrapContainment({
          cgroups,
          seccomp,
          user,
          lease,
          warmUp,
          releaseStaging,
          // Leftovers of killed processes beside the stages go once the launch is on its way, not before it.
          afterSpawned: staging === undefined ? undefined : () => void sweepLeftoverStagesOnce(this.filesDirectory),
          mode:
            cgroups === undefined ? 'none' : selfJoinFiles !== undefined ? 'self-join' : holdSandbox ? 'held' : 'gated',
        }),
      };
    } catch (error) {
      releaseStaging?.();
      if (seccomp !== undefined) closeQuietly(seccomp);
      await cgroups?.dispose();
      await lease?.release();
      throw error;
    }
  }

  /** The sandbox's /etc/passwd and /etc/group for a user, written once per uid into the sandbox files directory. */
  private accountFiles(user: SandboxUser): { readonly passwd: string; readonly group: string } {
    let files = this.accounts.get(user.uid);
    if (files === undefined) {
      files = {
        passwd: writeContentAddressedFile(this.filesDirectory, 'passwd', passwdContent(user)),
        group: writeContentAddressedFile(this.filesDirectory, 'group', groupContent(user)),
      };
      this.accounts.set(user.uid, files);
    }
    return files;
  }

  /** A descriptor of /dev/null held for the runner's life, handed to every run (its offset means nothing). */
  private nullDescriptor(): number {
    this.devNull ??= openSync('/dev/null', 'w');
    return this.devNull;
  }

  /** `selfJoinUser`: the run's user when its own launcher writes itself into the v1 `tasks` files. */
  private createCgroups(
    request: LaunchRequest,
    launcherJoins: boolean,
    selfJoinUser: SandboxUser | undefined,
  ): RunCgroups | undefined {
    try {
      return createRunCgroups(
        request.runId,
        {
          memoryBytes: request.limits.memoryBytes,
          maxTasks: request.limits.maxProcesses + BUBBLEWRAP_SUPERVISOR_PROCESSES[launcherJoins ? 'launcher' : 'host'],
          cpuSeconds: request.limits.cpuSeconds,
        },
        // A launcher running as the sandbox user may write itself into the run's `tasks` files.
        selfJoinUser !== undefined ? { selfJoinUser } : {},
      );
    } catch (cause) {
      throw new CodecallError(
        'SANDBOX_UNAVAILABLE',
        `cannot create the cgroups of run ${request.runId} (${(cause as Error).message}); ` +
          'check that /sys/fs/cgroup is writable or disable cgroups for the sandbox',
        { runId: request.runId },
        { cause },
      );
    }
  }

  private fixedArgumentsFor(network: boolean): readonly string[] {
    let fixed = this.fixedArguments.get(network);
    if (fixed === undefined) {
      fixed = [...isolationArguments(network), ...systemDirectoryArguments(), ...etcArguments(network)];
      this.fixedArguments.set(network, fixed);
    }
    return fixed;
  }

  /**
   * Prepares the staging that the runs of an environment will need (when the host is root and some of what they
   * mount is out of the sandbox user's reach), while the engine still writes the module and the run directory: its
   * plan before the first launch (which stages inline), the held namespace once a launch has happened (a pool's next
   * interpreter, a server's next run). The run's own {@link stagingFor} then finds it made or being made; a failure
   * is left to the run to report.
   */
  prepareAhead(environment: RunsAhead): void {
    if (!hostIsRoot()) return;
    try {
      const workDir = join(this.realPath(environment.runsRoot), 'next-run');
      const mounts: Mount[] = [
        ...this.readOnlyMounts([...interpreterRoots(environment.interpreter), ...environment.readOnlyPaths], workDir),
        // A run directory is staged through its parent, the runs root: this one need not exist.
        { source: workDir, destination: workDir, writable: true, kind: 'run' },
      ];
      if (environment.workspace !== undefined) {
        const { source, writable } = environment.workspace;
        mounts.push({ source: this.realPath(source), destination: source, writable, kind: 'workspace' });
      }
      this.stagingFor(mounts, 'ahead').catch(() => undefined);
    } catch {
      // A path that cannot be resolved now fails the run, which says why.
    }
  }

  private realPath(path: string): string {
    let real = this.realPaths.get(path);
    if (real === undefined) {
      real = canonicalPath(path);
      this.realPaths.set(path, real);
    }
    return real;
  }

  /**
   * Everything bound into the sandbox: the interpreter and the read-only paths, then the run directory (the one
   * writable). A read-only path holding the run directory is left out: it would show the other runs.
   */
  private mountsFor(request: LaunchRequest): Mount[] {
    const mounts = this.readOnlyMounts(
      [...interpreterRoots(request.interpreter), ...request.readOnlyPaths],
      request.workDir,
    );
    mounts.push({ source: canonicalPath(request.workDir), destination: request.workDir, writable: true, kind: 'run' });
    const workspace = workspaceMount(request);
    if (workspace !== undefined) mounts.push(workspace);
    // Parents before what lies inside them, or a later bind would hide an earlier one.
    return mounts.sort((left, right) => (left.destination < right.destination ? -1 : 1));
  }

  /** The read-only binds of `paths` and the runner's extra paths, less one holding the run directory `workDir`. */
  private readOnlyMounts(paths: readonly string[], workDir: string): Mount[] {
    return outermost([...paths, ...this.extraReadOnlyPaths])
      .filter((path) => !isInside(workDir, path))
      .map((destination) => ({
        source: this.realPath(destination),
        destination,
        writable: false,
        kind: 'read-only' as const,
      }));
  }

  private isReachable(path: string): boolean {
    let reachable = this.reachable.get(path);
    if (reachable === undefined) {
      reachable = isReachableBy(path, this.user.uid, this.user.gid);
      this.reachable.set(path, reachable);
    }
    return reachable;
  }

  /**
   * How a launch reaches the sources out of the sandbox user's reach (only when the host is root), or undefined when
   * none is: planned once per set of roots. The runner's first launch (`inline`) stages in its own process chain;
   * the later ones (`held`) enter the namespace held for them, made by the second launch (or by
   * {@link prepareAhead} after the first), which checks what it mounted. `ahead` makes only what a coming launch
   * would wait for. A run directory is staged through its parent, the runs root, so later runs reuse it.
   */
  private async stagingFor(
    mounts: readonly Mount[],
    use: 'inline' | 'held' | 'ahead',
  ): Promise<LaunchStaging | undefined> {
    if (!hostIsRoot()) return undefined;
    const needed = this.unreachableRoots(mounts);
    if (needed.length === 0) return undefined;
    let state = this.staging;
    const covered = (root: StagingRoot) =>
      state?.plan.roots.some((staged) => isInside(root.path, staged.path) && (staged.writable || !root.writable)) ===
      true;
    if (state === undefined || !needed.every(covered)) {
      const roots = outermostRoots([...(state?.plan.roots ?? []), ...needed]);
      state?.plan.retire();
      state = { plan: new StagingPlan(roots, this.filesDirectory, this.rootIdentity), namespace: undefined };
      this.staging = state;
      this.plans.push(state.plan);
    }
    if (use === 'inline' && state.namespace === undefined) return { plan: state.plan, namespace: undefined };
    if (use === 'ahead' && !this.launched) return undefined;
    state.namespace ??= this.holdStaging(state);
    return { plan: state.plan, namespace: await state.namespace };
  }

  /**
   * Removes the stage directories of the plans made so far (no launch is in progress), at once: a one-shot command
   * removes them while the kernel still tears its run's processes down, instead of after its run's cleanup, at exit.
   * A later launch plans afresh.
   */
  async close(): Promise<void> {
    this.staging = undefined;
    for (const plan of this.plans.splice(0)) plan.remove();
  }

  /** A root's identity as first seen (see {@link directoryIdentity}); recorded when the root is first needed. */
  private readonly rootIdentity = (path: string): string => {
    let identity = this.rootIdentities.get(path);
    if (identity === undefined) {
      identity = directoryIdentity(path);
      this.rootIdentities.set(path, identity);
    }
    return identity;
  };

  /** Starts the held namespace of a plan; on failure the next launch plans afresh (and says why again). */
  private holdStaging(state: StagingState): Promise<StagingNamespace> {
    const namespace = state.plan.hold();
    namespace.catch(() => {
      if (this.staging === state) this.staging = undefined;
    });
    return namespace;
  }

  /** The roots a launch of `mounts` needs staged: sources (or the runs root) the sandbox user cannot reach. */
  private unreachableRoots(mounts: readonly Mount[]): StagingRoot[] {
    const needed: StagingRoot[] = [];
    if (!this.isReachable(this.filesDirectory)) needed.push({ path: this.filesDirectory, writable: false });
    for (const mount of mounts) {
      // A copy of the workspace lies in the run directory: the runs root below covers it.
      if (mount.kind === 'workspace-copy') continue;
      if (mount.kind === 'workspace') {
        if (!this.isReachable(mount.source)) needed.push({ path: mount.source, writable: mount.writable });
        continue;
      }
      // A run directory is new every run but belongs to the sandbox user: what matters is its parent, the runs root.
      if (mount.writable) {
        const runsRoot = dirname(mount.source);
        if (!this.isReachable(runsRoot)) needed.push({ path: runsRoot, writable: true });
      } else if (!this.isReachable(mount.source)) {
        needed.push({ path: mount.source, writable: false });
      }
    }
    // Seen now, while no script of this runner may have run yet (the environment's roots are needed ahead or at the
    // first launch).
    for (const root of needed) this.rootIdentity(root.path);
    return needed;
  }
}

/** The runner's staging: the plan for the roots staged so far and its held namespace, once made. */
interface StagingState {
  readonly plan: StagingPlan;
  namespace: Promise<StagingNamespace> | undefined;
}

/** How one launch is staged: inline from the plan (no namespace), or by entering the held namespace. */
interface LaunchStaging {
  readonly plan: StagingPlan;
  readonly namespace: StagingNamespace | undefined;
}

/**
 * The workspace's bind, when the request mounts it: read-only, or writable (`read-write`, or its copy bound over the
 * workspace's path). All workspace arguments come from here, so other changes to the mounts merge cleanly.
 * @throws CodecallError `INVALID_CONFIG` when the workspace holds the run directory (the script would see other runs).
 */
function workspaceMount(request: LaunchRequest): Mount | undefined {
  const view = request.workspace;
  if (view === undefined) return undefined;
  if (!view.copied && isInside(request.workDir, view.source)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `the workspace ${view.source} holds codecall's state folder, so scripts would see other runs; ` +
        'set stateDir outside the workspace, or workspaceMount "none"',
      { workspace: view.source },
    );
  }
  return {
    source: canonicalPath(view.source),
    destination: view.destination,
    writable: view.writable,
    kind: view.copied ? 'workspace-copy' : 'workspace',
  };
}

/** Staging roots with the ones inside another removed; a root is writable when any root it absorbs was. */
function outermostRoots(roots: readonly StagingRoot[]): StagingRoot[] {
  const paths = outermost(roots.map((root) => root.path));
  return paths.map((path) => ({
    path,
    writable: roots.some((root) => root.writable && isInside(root.path, path)),
  }));
}

/**
 * The rlimits of a run under cgroups. RLIMIT_NPROC goes: the pids cgroup caps this run alone, where the rlimit would
 * count every process of the uid. RLIMIT_CPU becomes a backstop: the cgroup watchdog enforces the CPU time of the
 * whole run and records why it stopped it, while RLIMIT_CPU, per process and counted in scheduler ticks, can fire
 * when the run's precise CPU time is still 10 % short of the limit (measured under load), leaving no accounting
 * that says "cpu".
 */
function cgroupAwareRlimits(specification: string, cgroups: RunCgroups, cpuSeconds: number): string {
  return specification
    .split(',')
    .filter((item) => !(item.startsWith('nproc=') && cgroups.limitsProcesses))
    .map((item) =>
      item.startsWith('cpu=') && cgroups.accountsCpu ? `cpu=${cpuSeconds + RLIMIT_CPU_BACKSTOP_SECONDS}` : item,
    )
    .join(',');
}

/** Where /tmp is in a run: the run's disk tmpfs itself, a link to the run's TMPDIR on it, or a tmpfs of its own. */
type TmpPlacement = 'disk' | 'link' | 'own';

/** The run's writable places under bubblewrap: the bwrap arguments at the run directory's place, and /tmp. */
interface RunDiskLayout {
  readonly runArguments: readonly string[];
  readonly tmp: TmpPlacement;
  /** Where /tmp links to when {@link tmp} is `link`. */
  readonly tmpTarget: string;
}

/**
 * One tmpfs of `maxDiskBytes` holds everything the script can write (besides a writable workspace and /dev/shm): its
 * run directory, made fresh inside the sandbox (nothing the script writes reaches the host's disk, and the host reads
 * nothing of it), with TMPDIR and the artifacts folder in it, and /tmp. When the run directory lies inside /tmp (the
 * default state folder), /tmp is that tmpfs; otherwise it is mounted on the run directory and /tmp is a link to the
 * run's TMPDIR — unless another mount lies inside /tmp, which then gets a tmpfs of its own of the same size. The cold
 * script, written by the engine, is bound read-only at its place.
 */
function runDiskLayout(options: {
  readonly request: LaunchRequest;
  readonly environment: Readonly<Record<string, string>>;
  readonly otherDestinations: readonly string[];
  readonly scriptSource: string | undefined;
}): RunDiskLayout {
  const { request, environment } = options;
  const workDir = request.workDir;
  const tmpDirectory = environment.TMPDIR;
  const insideRun = (path: string | undefined): path is string =>
    path !== undefined && path !== workDir && isInside(path, workDir);
  const tmp: TmpPlacement = isInside(workDir, '/tmp')
    ? 'disk'
    : insideRun(tmpDirectory) && !options.otherDestinations.some((destination) => isInside(destination, '/tmp'))
      ? 'link'
      : 'own';
  const runArguments = [
    ...(tmp === 'disk' ? ['--dir', workDir] : ['--size', String(request.limits.maxDiskBytes), '--tmpfs', workDir]),
    ...[tmpDirectory, environment[BootVariable.artifactsDirectory]]
      .filter(insideRun)
      .flatMap((path) => ['--dir', path]),
    ...(options.scriptSource !== undefined && request.scriptFile !== undefined
      ? ['--ro-bind', options.scriptSource, request.scriptFile]
      : []),
  ];
  return { runArguments, tmp, tmpTarget: tmpDirectory ?? workDir };
}

function closeQuietly(descriptor: number): void {
  try {
    closeSync(descriptor);
  } catch {
    // Closed already.
  }
}

/**
 * How a run's processes get into its cgroups. `self-join` (cgroup v1): the launcher moves itself in before it starts
 * bwrap. `held` (v2): bwrap waits (`--userns-block-fd`) right after making the user namespace, before it sets
 * anything up or starts a process; the host moves that first sandbox process in, writes the namespace's id maps, then
 * lets it go. `gated` (v2, the engine holds the script until `afterSpawn` resolves): bwrap runs on while the host
 * moves its first process and what that process forked already, so the move's wait for an RCU grace period overlaps
 * the interpreter's start. In every mode no script code runs outside the cgroups.
 */
type ContainmentMode = 'none' | 'self-join' | 'held' | 'gated';

/** The per-run side of the sandbox: descriptors to close, the run's cgroups to join, watch, kill and remove. */
class BubblewrapContainment implements RunContainment {
  private readonly cgroups: RunCgroups | undefined;
  private readonly user: SandboxUser;
  private readonly lease: RunUidLease | undefined;
  private readonly warmUp: Promise<void> | undefined;
  private readonly mode: ContainmentMode;
  private releaseStaging: (() => void) | undefined;
  private readonly afterSpawned: (() => void) | undefined;
  private seccompDescriptor: number | undefined;
  private sandboxPid: number | undefined;
  private controlChannel: Duplex | undefined;

  constructor(options: {
    readonly cgroups: RunCgroups | undefined;
    readonly seccomp: number | undefined;
    readonly user: SandboxUser;
    readonly lease: RunUidLease | undefined;
    readonly warmUp: Promise<void> | undefined;
    /** An inline staging's: its launch no longer reads the mount table. */
    readonly releaseStaging: (() => void) | undefined;
    /** Background work started once the launch is spawned. */
    readonly afterSpawned?: (() => void) | undefined;
    readonly mode: ContainmentMode;
  }) {
    this.cgroups = options.cgroups;
    this.seccompDescriptor = options.seccomp;
    this.user = options.user;
    this.lease = options.lease;
    this.warmUp = options.warmUp;
    this.mode = options.mode;
    this.releaseStaging = options.releaseStaging;
    this.afterSpawned = options.afterSpawned;
  }

  private closeDescriptors(): void {
    if (this.seccompDescriptor !== undefined) closeQuietly(this.seccompDescriptor);
    this.seccompDescriptor = undefined;
  }

  async afterSpawn(pid: number, controlChannel?: Duplex): Promise<void> {
    // The child has its own copy now.
    this.closeDescriptors();
    this.afterSpawned?.();
    if (this.cgroups === undefined) return;
    if (this.mode === 'self-join') {
      this.cgroups.startWatchdog();
      return;
    }
    if (controlChannel === undefined) {
      signalProcess(pid, 'SIGKILL');
      throw new CodecallError(
        'SANDBOX_UNAVAILABLE',
        'the bubblewrap runner asked for a control channel (plan.controlChannel) and the engine did not pass one',
        { pid },
      );
    }
    this.controlChannel = controlChannel;
    try {
      const sandboxPid = await readSandboxPid(controlChannel);
      this.sandboxPid = sandboxPid;
      await this.warmUp;
      // Only the sandbox's first process and what it forked: the script descends from it. bwrap's monitor stays out.
      this.cgroups.join([sandboxPid]);
      if (this.mode === 'held') {
        writeIdentityMaps(sandboxPid, this.user);
        controlChannel.write('1');
      } else {
        // It is inside now: whatever it forks from here on is born inside; what it forked before is listed.
        this.cgroups.join(childrenOf(sandboxPid));
      }
      // bwrap reports the exit status on the channel later: keep reading, or its write could block or SIGPIPE it.
      controlChannel.resume();
      (controlChannel as Duplex & { unref?: () => void }).unref?.();
      this.cgroups.startWatchdog();
    } catch (cause) {
      controlChannel.destroy();
      signalProcess(pid, 'SIGKILL');
      if (this.sandboxPid !== undefined) signalProcess(this.sandboxPid, 'SIGKILL');
      throw new CodecallError(
        'SANDBOX_UNAVAILABLE',
        `cannot put the sandbox into its cgroups (${(cause as Error).message})`,
        { pid },
        { cause },
      );
    }
  }

  /**
   * The engine kills the process group (bwrap's monitor; its death takes the sandbox down with it); this kills what
   * is in the run's cgroups, by their current list, so a recycled pid is never hit.
   */
  async killAll(): Promise<void> {
    await this.cgroups?.killAll();
  }

  limitReason() {
    return this.cgroups?.limitReason();
  }

  async dispose(): Promise<void> {
    this.closeDescriptors();
    // The run's processes are gone: its inline staging mounted the table, or never will.
    this.releaseStaging?.();
    this.releaseStaging = undefined;
    this.controlChannel?.destroy();
    await this.cgroups?.dispose();
    // The engine calls this once the run's processes were killed: the sandbox's pid namespace is gone or going, and
    // what is left of it can reach no process outside it, so the uid is free for another run.
    await this.lease?.release();
  }
}

/** Children of a process (all its threads'), from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const thread of readdirSync(`/proc/${pid}/task`)) {
    const text = readFileSync(`/proc/${pid}/task/${thread}/children`, 'utf8').trim();
    if (text !== '') children.push(...text.split(/\s+/).map(Number));
  }
  return children;
}

/** Reads `"child-pid": N` from bwrap's `--json-status-fd` JSON: the sandbox's first process, as the host sees it. */
function readSandboxPid(channel: Duplex): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const finish = (error: Error | undefined, pid?: number) => {
      clearTimeout(timer);
      channel.off('data', onData);
      channel.off('end', onEnd);
      channel.off('error', onError);
      if (error !== undefined || pid === undefined) reject(error);
      else resolve(pid);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const match = /"child-pid"\s*:\s*(\d+)\D/.exec(text);
      if (match) finish(undefined, Number(match[1]));
    };
    const onEnd = () => finish(new Error(`bwrap ended before reporting its sandbox process: ${text.trim()}`));
    const onError = (error: Error) => finish(error);
    const timer = setTimeout(
      () => finish(new Error(`bwrap did not report its sandbox process within ${CONTROL_CHANNEL_TIMEOUT_MS} ms`)),
      CONTROL_CHANNEL_TIMEOUT_MS,
    );
    channel.on('data', onData);
    channel.once('end', onEnd);
    channel.once('error', onError);
  });
}

/** The sandbox user mapped to itself: with `--userns-block-fd` bwrap leaves the id maps to the caller. */
function writeIdentityMaps(pid: number, user: SandboxUser): void {
  writeFileSync(`/proc/${pid}/uid_map`, `${user.uid} ${user.uid} 1\n`);
  writeFileSync(`/proc/${pid}/setgroups`, 'deny');
  writeFileSync(`/proc/${pid}/gid_map`, `${user.gid} ${user.gid} 1\n`);
}
