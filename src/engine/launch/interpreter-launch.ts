import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Duplex, Readable, Writable } from 'node:stream';
import { CodecallError } from '../../core/errors.js';
import { BootVariable, CHANNEL_FILE_DESCRIPTOR, FIRST_INHERITED_FILE_DESCRIPTOR } from '../../core/launch-layout.js';
import type { Limits } from '../../core/limits.js';
import { randomHex } from '../../core/random-bytes.js';
import { nextTurn } from '../../core/waiting.js';
import type { WorkspaceMount } from '../../core/workspace-mount.js';
import { openDirectChannel } from '../../rpc/channel-end.js';
import type { ToolLookup } from '../../rpc/tool-call-server.js';
import { buildScriptEnvironment } from '../../sandbox/environment.js';
import type { PythonInterpreter } from '../../sandbox/interpreter.js';
import type { PreparedLaunch, RunContainment, SandboxRunner } from '../../sandbox/runner.js';
import {
  copyWorkspace,
  WORKSPACE_COPY_FOLDER,
  WORKSPACE_VARIABLE,
  type WorkspaceView,
} from '../../sandbox/workspace-view.js';
import type { ApproveToolCall } from '../../tools/tool-approval.js';
import type { HintContext } from '../result/failure-hints.js';
import { forgetProcessGroup, signalProcessGroup, trackProcessGroup } from './process-registry.js';
import {
  createRunDirectory,
  detachRunDirectory,
  type RunDirectory,
  removeDetachedOffThread,
  removeRunDirectory,
  removeSmallTree,
  SCRIPT_FILE_NAME,
} from './run-directory.js';
import { isRunInFlight } from './runs-in-flight.js';

export { SCRIPT_FILE_NAME } from './run-directory.js';

/** How a cold run's interpreter starts: import the boot module (its bytecode is cached, a script file's never is). */
export const BOOT_COMMAND = 'import codecall_boot; codecall_boot.main()';
/** How a warm-pool interpreter starts: prepared like a cold run, then it waits for its script on the channel. */
export const POOLED_BOOT_COMMAND = 'import codecall_boot; codecall_boot.main_pooled()';
/** How a session interpreter starts: it runs the cells sent on the channel until the host goes away. */
export const SESSION_BOOT_COMMAND = 'import codecall_session; codecall_session.main()';

/** How the boot runs the code: a script file (cold), a script sent later (pool), or cells (session). */
export type BootMode = 'cold' | 'pooled' | 'session';

const BOOT_ARGUMENTS: Readonly<Record<BootMode, readonly string[]>> = {
  cold: ['-S', '-c', BOOT_COMMAND, SCRIPT_FILE_NAME],
  pooled: ['-S', '-c', POOLED_BOOT_COMMAND, SCRIPT_FILE_NAME],
  session: ['-S', '-c', SESSION_BOOT_COMMAND],
};

/** How long a release waits for the killed process to be gone (a process stuck in the kernel is not waited for). */
export const EXIT_WAIT_MS = 2_000;

/** Everything about a codecall instance that a run needs; fixed between runs. */
export interface RunEnvironment {
  readonly interpreter: PythonInterpreter;
  readonly runner: SandboxRunner;
  readonly tools: ToolLookup;
  /** Directories for `sys.path` before the interpreter's site paths (generated modules, runtime). */
  readonly modulePaths: readonly string[];
  /** Directory of the shipped Python runtime (boot script and `codecall_runtime`). */
  readonly runtimeDir: string;
  /** Folder with `python` and `python3` linked to the interpreter: first on the script's PATH, read-only. */
  readonly interpreterCommandsDir?: string | undefined;
  /** The workspace (host path) and how the script sees it; without it, the script does not see it. */
  readonly workspace?: { readonly root: string; readonly mount: WorkspaceMount } | undefined;
  readonly runsRoot: string;
  /** Where full outputs and artifacts are kept after a run. */
  readonly outputRoot: string;
  readonly environmentExtra?: Readonly<Record<string, string>> | undefined;
  readonly environmentPassthrough?: readonly string[] | undefined;
  readonly network: boolean;
  readonly hintContext: Omit<HintContext, 'limits'>;
  /** Mask secret-shaped tokens in what the result carries (the `redactSecrets` option; default true). */
  readonly redactSecrets?: boolean | undefined;
  /** The `approveToolCall` hook, asked about calls of tools that need approval. */
  readonly approveToolCall?: ApproveToolCall | undefined;
}

/** Options of {@link launchInterpreter}. */
export interface LaunchOptions {
  /** Id of the run (names its directory; safe as a file name). */
  readonly runId: string;
  /** Limits the process is started with (rlimits, cgroups, frame size). */
  readonly limits: Limits;
  readonly mode: BootMode;
  /** The script, written to the run directory before the launch (cold runs only). */
  readonly script?: string | undefined;
}

/** How the interpreter process ended. */
export type ProcessExit =
  | { readonly code: number | null; readonly signal: NodeJS.Signals | null }
  | { readonly error: Error };

/** An interpreter started in its sandbox, with its private directory, pipes and channel. */
export interface LaunchedInterpreter {
  readonly runId: string;
  readonly directory: RunDirectory;
  readonly child: ChildProcess;
  /** Pid of the spawned process, which leads its own process group. */
  readonly pid: number;
  /** Host end of the tool channel (fd 3 in the child). */
  readonly channel: Duplex;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /**
   * Cold and pooled runs: the nonce of the end marker the boot writes on stdout and stderr when the script is over
   * (see `outputEndMarker`). Sessions mark each cell with a nonce of its own.
   */
  readonly outputNonce: string | undefined;
  /** Sessions only: the interrupt pipe (the child's stdin, which the boot swaps for /dev/null). */
  readonly stdin: Writable | undefined;
  readonly containment: RunContainment | undefined;
  /** Settles once, when the process has exited. */
  readonly exited: Promise<ProcessExit>;
  /** The exit, once it happened. */
  readonly exit: ProcessExit | undefined;
  /** Signals the process group (a group that is gone already is not an error). */
  signal(signal: NodeJS.Signals): void;
  /** Kills every process of the run: SIGKILL to the group, and the runner's `killAll` for processes that left it. */
  killAll(): Promise<void>;
  /** Keeps the host's event loop alive for this process (while a run or cell uses it) or not (idle). */
  holdEventLoop(hold: boolean): void;
  /**
   * Kills what is left, takes the run directory out of its place (a rename) and deletes it, then releases the
   * runner's resources; safe to call twice.
   */
  release(): Promise<void>;
  /** Settles once {@link release} has taken the run directory away (its deletion and the runner's cleanup may go on). */
  readonly directoryRemoved: Promise<void>;
}

/**
 * Starts an interpreter in its sandbox: private run directory, allowlisted environment, `runner.prepare`, spawn with
 * stdio 0..3 (3 is the tool channel socketpair) plus the runner's descriptors, then the runner's `afterSpawn`.
 * Cold runs, warm-pool interpreters and sessions all start here, so they get the same limits and isolation.
 * @throws CodecallError `SPAWN_FAILED` when the process cannot start, or what the runner throws.
 */
export async function launchInterpreter(
  environment: RunEnvironment,
  options: LaunchOptions,
): Promise<LaunchedInterpreter> {
  const { limits } = options;
  const directory = createRunDirectory(environment.runsRoot, options.runId);
  let prepared: PreparedLaunch | undefined;
  try {
    if (options.script !== undefined) {
      writeFileSync(join(directory.root, SCRIPT_FILE_NAME), options.script, { mode: 0o600 });
    }
    const scriptEnvironment = buildScriptEnvironment({
      workDir: directory.root,
      tmpDir: directory.tmp,
      artifactsDir: directory.artifacts,
      pythonPath: [...environment.modulePaths, environment.runtimeDir, ...environment.interpreter.sitePaths],
      commandsDir: environment.interpreterCommandsDir,
      limits,
      extra: environment.environmentExtra,
      passthrough: environment.environmentPassthrough,
    });
    const workspace = workspaceViewFor(environment, directory.root);
    if (workspace !== undefined) scriptEnvironment[WORKSPACE_VARIABLE] = workspace.destination;
    const outputNonce = options.mode === 'session' ? undefined : randomHex(12);
    if (outputNonce !== undefined) scriptEnvironment[BootVariable.outputNonce] = outputNonce;
    prepared = await environment.runner.prepare({
      runId: options.runId,
      interpreter: environment.interpreter,
      pythonArguments: BOOT_ARGUMENTS[options.mode],
      workDir: directory.root,
      scriptFile: options.script !== undefined ? join(directory.root, SCRIPT_FILE_NAME) : undefined,
      readOnlyPaths: [
        ...new Set([
          ...environment.modulePaths,
          environment.runtimeDir,
          ...(environment.interpreterCommandsDir === undefined ? [] : [environment.interpreterCommandsDir]),
        ]),
      ],
      environment: scriptEnvironment,
      limits,
      network: environment.network,
      workspace,
      // Pooled and session interpreters run no script code before `$run` / `$cell`, sent after `afterSpawn`.
      scriptGated: options.mode !== 'cold',
    });
    return await spawnPrepared(prepared, directory, options, outputNonce);
  } catch (error) {
    await prepared?.containment?.dispose?.();
    await removeRunDirectory(directory.root);
    throw error;
  }
}

/**
 * How this run sees the workspace. `copy` copies it into the run directory now (a session keeps its copy for its
 * life); under a sandbox the copy is bound over the workspace's path, without one the script starts in the copy.
 */
function workspaceViewFor(environment: RunEnvironment, runDirectory: string): WorkspaceView | undefined {
  const workspace = environment.workspace;
  if (workspace === undefined || workspace.mount === 'none') return undefined;
  const { root, mount } = workspace;
  if (mount !== 'copy') return { source: root, destination: root, writable: mount === 'read-write', copied: false };
  const copy = join(runDirectory, WORKSPACE_COPY_FOLDER);
  copyWorkspace(root, copy);
  const destination = environment.runner.isolation === 'none' ? copy : root;
  return { source: copy, destination, writable: true, copied: true };
}

async function spawnPrepared(
  prepared: PreparedLaunch,
  directory: RunDirectory,
  options: LaunchOptions,
  outputNonce: string | undefined,
): Promise<LaunchedInterpreter> {
  const { plan, containment } = prepared;
  const inherited = plan.inheritedFileDescriptors ?? [];
  const controlSlot = plan.controlChannel ? FIRST_INHERITED_FILE_DESCRIPTOR + inherited.length : undefined;
  let child: ChildProcess;
  try {
    child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      env: plan.environment,
      detached: true,
      stdio: [
        options.mode === 'session' ? 'pipe' : 'ignore',
        'pipe',
        'pipe',
        'pipe',
        ...inherited,
        ...(controlSlot !== undefined ? ['pipe' as const] : []),
      ],
      uid: plan.uid,
      gid: plan.gid,
    });
  } catch (cause) {
    throw spawnError(plan.command, cause);
  }
  let exit: ProcessExit | undefined;
  const exited = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      exit ??= { code, signal };
      resolve(exit);
    });
    child.once('error', (error) => {
      exit ??= { error };
      resolve(exit);
    });
  });
  const pid = child.pid;
  if (pid === undefined) {
    const failure = await exited;
    throw spawnError(plan.command, 'error' in failure ? failure.error : undefined);
  }
  trackProcessGroup(pid);
  // Calls are read into one reused buffer and replies written straight to the descriptor (see openDirectChannel).
  const channel = openDirectChannel(child.stdio[CHANNEL_FILE_DESCRIPTOR] as Duplex);
  // stdout and stderr the same way: a script printing megabytes costs the host no fresh memory per read.
  const stdout = openDirectChannel(child.stdout as Duplex);
  const stderr = openDirectChannel(child.stderr as Duplex);
  // The script may close its end or die at any time: errors on the pipes are the end of the stream, not a crash.
  for (const stream of [channel, stdout, stderr]) stream.on('error', () => {});
  child.stdin?.on('error', () => {});
  let killedAfterExit = false;
  const killAll = async (): Promise<void> => {
    // Once everything was killed after the exit, nothing of the run can be left: the cleanup skips a second round.
    if (killedAfterExit) return;
    const exitedBefore = exit !== undefined;
    signalProcessGroup(pid, 'SIGKILL');
    await containment?.killAll?.();
    if (exitedBefore) killedAfterExit = true;
  };
  if (containment?.afterSpawn !== undefined) {
    try {
      await containment.afterSpawn(pid, controlSlot !== undefined ? (child.stdio[controlSlot] as Duplex) : undefined);
    } catch (error) {
      await killAll();
      forgetProcessGroup(pid);
      destroyStreams(child, [channel, stdout, stderr]);
      throw error;
    }
  }
  let released: Promise<void> | undefined;
  let directoryRemoved!: () => void;
  const removed = new Promise<void>((resolve) => {
    directoryRemoved = resolve;
  });
  const launched: LaunchedInterpreter = {
    runId: options.runId,
    directory,
    child,
    pid,
    channel,
    stdout,
    stderr,
    outputNonce,
    stdin: child.stdin ?? undefined,
    containment,
    exited,
    get exit() {
      return exit;
    },
    signal: (signal) => signalProcessGroup(pid, signal),
    killAll,
    holdEventLoop(hold) {
      for (const handle of [child, stdout, stderr, channel, child.stdin]) {
        const target = handle as { ref?: () => void; unref?: () => void } | null;
        if (hold) target?.ref?.();
        else target?.unref?.();
      }
    },
    directoryRemoved: removed,
    release() {
      released ??= (async () => {
        // The run's path goes first (one rename); what is left is killed, deleted and released after.
        const detached = detachRunDirectory(directory.root);
        try {
          if (detached === directory.root) {
            await killAll();
            await removeRunDirectory(directory.root);
          }
        } finally {
          directoryRemoved();
        }
        // The result goes back first: the runner's kill wakes its helpers (a watchdog that forks), which took the CPU
        // from the host for milliseconds before the caller had it. The process group was killed when the run ended.
        await nextTurn();
        await killAll();
        // The detached directory goes while the kernel tears the killed processes down, which the host waits for next:
        // a process of the run can add nothing to a directory once it is removed, and what one added meanwhile is
        // removed after the exit. With another run in flight (runs back to back) the host's thread is not idle: the
        // removal then waits on the disk in the thread pool instead of in that run's time.
        const removedEarly =
          detached === directory.root ||
          (isRunInFlight() ? removeDetachedOffThread(detached) : removeSmallTree(detached));
        // Gone for good before the release settles (close() waits for it), not merely sent a signal.
        await settledWithin(exited, EXIT_WAIT_MS);
        forgetProcessGroup(pid);
        destroyStreams(child, [channel, stdout, stderr]);
        // The run's processes are gone: what is left of its directory and the runner's resources go side by side.
        const [, disposed] = await Promise.allSettled([
          Promise.resolve(removedEarly).then((removed) => (removed ? undefined : removeRunDirectory(detached))),
          containment?.dispose?.(),
        ]);
        if (disposed.status === 'rejected') throw disposed.reason;
      })();
      return released;
    },
  };
  return launched;
}

/** Waits for `promise` to settle, for at most `milliseconds`; never rejects. */
export function settledWithin(promise: Promise<unknown>, milliseconds: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(resolve, milliseconds);
  });
  return Promise.race([promise.catch(() => undefined), timeout]).finally(() => clearTimeout(timer));
}

function destroyStreams(child: ChildProcess, direct: readonly Duplex[]): void {
  for (const stream of direct) stream.destroy();
  for (const stream of child.stdio) stream?.destroy();
}

function spawnError(command: string, cause: unknown): CodecallError {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  return new CodecallError(
    'SPAWN_FAILED',
    `cannot start "${command}"${code ? ` (${code})` : ''}; check that it is installed and executable`,
    { command },
    { cause },
  );
}
