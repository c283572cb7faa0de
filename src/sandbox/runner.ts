import type { Duplex } from 'node:stream';
import type { IsolationLevel, LimitReason } from '../core/isolation.js';
import type { Limits } from '../core/limits.js';
import type { PythonInterpreter } from './interpreter.js';
import type { WorkspaceView } from './workspace-view.js';

/** What the engine asks a runner to start: the interpreter with its arguments, in a private working directory. */
export interface LaunchRequest {
  /** Unique id of the run (safe as a file name). */
  readonly runId: string;
  /** The resolved real interpreter. */
  readonly interpreter: PythonInterpreter;
  /** Arguments after the interpreter executable (flags, boot script, script path). */
  readonly pythonArguments: readonly string[];
  /** The run's private, writable working directory: the script's cwd and HOME. */
  readonly workDir: string;
  /**
   * The script file the engine wrote into `workDir` before the launch (cold runs). A sandbox that gives the run a
   * fresh working directory of its own shows this file there, read-only.
   */
  readonly scriptFile?: string | undefined;
  /** Directories the script must be able to read (runtime, generated modules); never writable inside a sandbox. */
  readonly readOnlyPaths: readonly string[];
  /** The environment of the script, already built from the allowlist. */
  readonly environment: Readonly<Record<string, string>>;
  /** Limits of the run. */
  readonly limits: Limits;
  /** Whether the script may use the network (sandboxed runs have none by default). */
  readonly network: boolean;
  /** The workspace as the script sees it (bound at `destination`), when it is mounted. */
  readonly workspace?: WorkspaceView | undefined;
  /**
   * True when the interpreter runs no script code until the engine hands the script over on the channel, and the
   * engine does that only after `containment.afterSpawn` resolved (pooled and session boots). The runner may then
   * let the sandbox start while it finishes containing it (e.g. moving it into cgroups), instead of holding it.
   */
  readonly scriptGated?: boolean | undefined;
}

/** How to start a run: the engine spawns `command` with `args` in a new session, stdio 0..3 set up by the engine. */
export interface LaunchPlan {
  readonly command: string;
  readonly args: readonly string[];
  /** Environment of the spawned process itself (for bubblewrap: empty, the script's goes through its arguments). */
  readonly environment: Readonly<Record<string, string>>;
  /** Working directory of the spawned process. */
  readonly cwd: string;
  /**
   * Open file descriptors to hand to the child at positions 4, 5, ... (e.g. a seccomp program for `bwrap --seccomp 4`).
   * The runner owns them: close them in `containment.afterSpawn` or `dispose`.
   */
  readonly inheritedFileDescriptors?: readonly number[] | undefined;
  /** Run the spawned process as this uid/gid (the run's own uid when the host is root); default the host's own. */
  readonly uid?: number | undefined;
  readonly gid?: number | undefined;
  /**
   * Ask for one more `'pipe'` stdio slot (a socketpair) right after the inherited descriptors, at position
   * `4 + inheritedFileDescriptors.length`; its host end is passed to `containment.afterSpawn`. The bubblewrap runner
   * uses it on cgroup v2 to learn the sandbox's first process and hold it until it is inside the run's cgroups.
   */
  readonly controlChannel?: boolean | undefined;
}

/** Per-run resources a runner holds beyond the process (e.g. cgroups); all methods are safe to call twice. */
export interface RunContainment {
  /**
   * Called right after spawn with the spawned process id, and the host end of the control channel when the plan
   * asked for one. A rejection means the run could not be set up: kill the process group, `killAll`, `dispose`.
   */
  afterSpawn?(pid: number, controlChannel?: Duplex): void | Promise<void>;
  /** Kills every process of the run, including ones that left the process group. */
  killAll?(): void | Promise<void>;
  /** After exit: which limit stopped the run, read from the kernel's accounting (e.g. a cgroup OOM kill). */
  limitReason?(): LimitReason | undefined | Promise<LimitReason | undefined>;
  /** Releases the resources (removes the cgroups). */
  dispose?(): void | Promise<void>;
}

/** A prepared launch: the command to spawn and what to call around it. */
export interface PreparedLaunch {
  readonly plan: LaunchPlan;
  readonly containment?: RunContainment | undefined;
}

/** One isolation level. The engine owns spawning, pipes, the channel, timeouts and killing the process group. */
export interface SandboxRunner {
  /** Isolation this runner gives; reported in every result. */
  readonly isolation: IsolationLevel;
  /**
   * Set when the isolation is less than was asked for (`sandbox: "auto"` fell back to `none`): why, and what it
   * means. Reported in every result and in the tool description.
   */
  readonly isolationWarning?: string | undefined;
  /** Builds the launch of one run. May create per-run resources, released by `containment.dispose`. */
  prepare(request: LaunchRequest): Promise<PreparedLaunch>;
  /**
   * Starts, in the background, what every run of an environment needs and a first run would otherwise wait for
   * (the bubblewrap runner: its staging namespace). Never throws: a failure is met again, and reported, by the run.
   */
  prepareAhead?(environment: RunsAhead): void;
  /**
   * Removes what the runner keeps on disk for later launches (the bubblewrap runner's staging folders), once no
   * launch is in progress; processes of earlier runs may still be dying. A launch after it sets up afresh. Never
   * rejects: what cannot be removed now goes when the process exits.
   */
  close?(): Promise<void>;
}

/** What the runs of an environment will use, known before the first of them: see {@link SandboxRunner.prepareAhead}. */
export interface RunsAhead {
  readonly interpreter: PythonInterpreter;
  /** Folders holding every read-only path runs will get (the module, runtime and command folders). */
  readonly readOnlyPaths: readonly string[];
  /** The folder run directories are made in. */
  readonly runsRoot: string;
  /** The workspace as runs will see it, unless they do not see it or see a copy of it. */
  readonly workspace?: { readonly source: string; readonly writable: boolean } | undefined;
}
