import { mkdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { isInside } from '../core/paths.js';
import { CGROUP_JOIN_AND_EXEC_SCRIPT } from './cgroups.js';
import { firstExecutable } from './executables.js';
import { holdMountNamespace } from './mount-namespace-holder.js';
import { writeMountTable } from './mount-table.js';
import { stageDirectoryName } from './stage-leftovers.js';

/**
 * bwrap resolves every bind source as the sandbox user, so when the host is root and the sandbox user is 65534, a
 * directory under a private parent (pyenv in /root/.pyenv, a project in /root/app) cannot be mounted into the
 * sandbox. Staging fixes that without touching the host: in a private mount namespace those directories are
 * bind-mounted (read-only, but the runs root) under a directory the sandbox user can reach. The first launch makes
 * that namespace inline, in its own process chain (unshare, mount, then the drop to the run's user), so a one-shot
 * command starts no other process; later launches enter a namespace made once and held by a descriptor
 * (`nsenter --mount`). Both read the same {@link StagingPlan}, so paths map the same way.
 */

/** How long making the staging namespace may take (generous: under a saturated CPU it has been seen past 10 s). */
const STAGING_TIMEOUT_MS = 30_000;
interface PermissionBits {
  readonly owner: number;
  readonly group: number;
  readonly other: number;
}
const EXECUTE_BITS: PermissionBits = { owner: 0o100, group: 0o010, other: 0o001 };
const READ_BITS: PermissionBits = { owner: 0o400, group: 0o040, other: 0o004 };

/** A directory to stage; only a run directory's parent (the runs root) stays writable. */
export interface StagingRoot {
  readonly path: string;
  readonly writable: boolean;
}

/** A private mount namespace, made by {@link StagingPlan.hold}, in which a plan's roots are reachable. */
export interface StagingNamespace {
  /** Open descriptor of the mount namespace (`/proc/<pid>/ns/mnt`), held for the life of the host process. */
  readonly descriptor: number;
  /** The staged directories. */
  readonly roots: readonly StagingRoot[];
  /** Where `path` (inside a staged root) is reachable inside the namespace, or undefined when it is not staged. */
  reachable(path: string): string | undefined;
}

function allows(
  mode: number,
  uid: number,
  gid: number,
  fileUid: number,
  fileGid: number,
  bits: PermissionBits,
): boolean {
  if (uid === fileUid) return (mode & bits.owner) !== 0;
  if (gid === fileGid) return (mode & bits.group) !== 0;
  return (mode & bits.other) !== 0;
}

/**
 * Whether a user could reach `path` (an absolute real path): every parent directory searchable, the path itself
 * readable. Permission bits only (no ACLs): a false answer costs a staging mount, never a failed run.
 */
export function isReachableBy(path: string, uid: number, gid: number): boolean {
  try {
    const own = statSync(path);
    const needed = own.isDirectory() ? EXECUTE_BITS : READ_BITS;
    if (!allows(own.mode, uid, gid, own.uid, own.gid, needed)) return false;
    for (let parent = dirname(path); ; parent = dirname(parent)) {
      const stats = statSync(parent);
      if (!allows(stats.mode, uid, gid, stats.uid, stats.gid, EXECUTE_BITS)) return false;
      if (parent === dirname(parent)) return true;
    }
  } catch {
    return false;
  }
}

/**
 * The outermost directory above `path` (an absolute real path) that a user cannot traverse, or undefined when every
 * directory above it lets them through. Permission bits only, like {@link isReachableBy}.
 */
export function outermostBlockingAncestor(path: string, uid: number, gid: number): string | undefined {
  const ancestors: string[] = [];
  for (let parent = dirname(path); ; parent = dirname(parent)) {
    ancestors.unshift(parent);
    if (parent === dirname(parent)) break;
  }
  for (const ancestor of ancestors) {
    try {
      const stats = statSync(ancestor);
      if (!allows(stats.mode, uid, gid, stats.uid, stats.gid, EXECUTE_BITS)) return ancestor;
    } catch {
      return ancestor;
    }
  }
  return undefined;
}

/**
 * Path of a util-linux tool (`unshare`, `mount`, `nsenter`) in the system directories.
 * @throws CodecallError `SANDBOX_UNAVAILABLE` when it is not installed.
 */
export function findTool(name: string): string {
  const found = firstExecutable(['/usr/bin', '/bin', '/usr/sbin', '/sbin'].map((directory) => join(directory, name)));
  if (found !== undefined) return found;
  throw new CodecallError(
    'SANDBOX_UNAVAILABLE',
    `"${name}" (util-linux) is needed to mount directories the sandbox user cannot reach; install util-linux`,
    { tool: name },
  );
}

/** Path of `nsenter`, which runs enter the staging namespace with. */
export function findNsenter(): string {
  return findTool('nsenter');
}

/** Stage directories of this process: empty mount points (and tables) on the host, removed when it exits. */
const stageDirectories = new Set<string>();
let exitListenerInstalled = false;

/** Removes `directory` when this process exits (unless removed before); one exit listener for every plan. */
function removeAtExit(directory: string): void {
  if (!exitListenerInstalled) {
    exitListenerInstalled = true;
    process.once('exit', () => {
      for (const stage of stageDirectories) rmSync(stage, { recursive: true, force: true });
    });
  }
  stageDirectories.add(directory);
}

/** A directory's identity, `device:inode` (a bind mount shows its source's); follows links. */
export function directoryIdentity(path: string): string {
  const stats = statSync(path, { bigint: true });
  return `${stats.dev}:${stats.ino}`;
}

/** The message of a staging that failed: which roots, why, and what to do. */
function stagingFailureMessage(roots: readonly StagingRoot[], why: string): string {
  return (
    `cannot make the staging mount namespace for ${stagedPaths(roots)} (${why}); ` +
    'make these directories reachable by other users or run codecall as a non-root user'
  );
}

/**
 * The roots quoted as JSON strings: the message may travel on the control channel, where the host looks for bwrap's
 * `"child-pid": N`, and a quote or a line break in a path must not read as one.
 */
function stagedPaths(roots: readonly StagingRoot[]): string {
  return roots.map((root) => JSON.stringify(root.path)).join(', ');
}

/**
 * The staged layout of a set of roots, made on the host before any namespace: a stage directory (root's, 0711) in the
 * sandbox files directory with one empty mount point per root, and the mount table that binds each root on its mount
 * point. Both ways of staging read it: a launch that stages inline in its own process chain, and the holder of a
 * namespace that later launches enter. The table stays while one of them may still read it.
 */
export class StagingPlan {
  /** The staged directories. */
  readonly roots: readonly StagingRoot[];
  /** The mount table (mode 0600, in the stage directory), read by mount(8) as root. */
  readonly mountTable: string;
  private readonly stageDirectory: string;
  private readonly mountPoints: readonly string[];
  private readonly identities: readonly string[];
  private readers = 0;
  private retired = false;

  /**
   * Makes the stage directory, its mount points and the mount table under `filesDirectory` (root's own, see
   * sandbox-files.ts); they go when this process exits. `identityOf` gives a root's identity as first seen (see
   * {@link directoryIdentity}), which a held namespace must show at its mount point.
   * @throws CodecallError `SANDBOX_UNAVAILABLE` when util-linux is missing.
   */
  constructor(roots: readonly StagingRoot[], filesDirectory: string, identityOf: (path: string) => string) {
    findTool('unshare');
    findTool('mount');
    this.roots = roots;
    this.identities = roots.map((root) => identityOf(root.path));
    const stageDirectory = join(filesDirectory, stageDirectoryName());
    mkdirSync(stageDirectory, { mode: 0o711 });
    removeAtExit(stageDirectory);
    this.stageDirectory = stageDirectory;
    this.mountPoints = roots.map((_, index) => join(stageDirectory, String(index)));
    for (const mountPoint of this.mountPoints) mkdirSync(mountPoint, { mode: 0o755 });
    // One mount(8) makes every bind from a mount table, with its flags: one process, not one per root.
    this.mountTable = join(stageDirectory, 'mounts');
    writeMountTable(
      this.mountTable,
      roots.map((root, index) => ({
        source: root.path,
        target: this.mountPoints[index] ?? '',
        type: 'none',
        options: `bind,${root.writable ? 'rw' : 'ro'},nosuid,nodev`,
      })),
    );
  }

  /** Where `path` (inside a staged root) is reachable inside a staged namespace, or undefined when it is not staged. */
  reachable(path: string): string | undefined {
    for (const [index, root] of this.roots.entries()) {
      if (isInside(path, root.path)) return `${this.mountPoints[index]}${path.slice(root.path.length)}`;
    }
    return undefined;
  }

  /**
   * The command that stages inline, then runs `command`: `unshare` makes a private mount namespace, a shell (root)
   * mounts the table in it, joins the run's cgroups by writing `0` to each of `joinFiles` (cgroup v1 `tasks` files,
   * which root may write), and execs `command`, which must drop to the run's user itself (nsenter -S -G): one shell
   * does what would otherwise take a second one after the drop. Nothing checks what got mounted, so only a launch that
   * no script of this host ran before may stage inline (see {@link hold}). On a failed mount the shell prints a
   * `codecall:` message naming the roots on stderr, and on `messageDescriptor` when given (the control channel the
   * host reads), and exits 125; on a failed join it says which file and exits 125. Call {@link release} once the
   * launch can no longer read the table (its processes are gone).
   */
  inlineCommand(
    command: readonly string[],
    messageDescriptor: number | undefined,
    joinFiles: readonly string[] = [],
  ): string[] {
    this.readers += 1;
    return [
      findTool('unshare'),
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      INLINE_STAGING_SCRIPT,
      'sh',
      findTool('mount'),
      this.mountTable,
      `codecall: ${stagingFailureMessage(this.roots, 'mount(8) failed')}`,
      messageDescriptor === undefined ? '' : String(messageDescriptor),
      ...joinFiles,
      '--',
      ...command,
    ];
  }

  /**
   * Makes a private mount namespace with the table mounted, held by a descriptor, for the launches after the first.
   * The plan takes no inline launch after this (made or failed, the runner moves on), so the table goes once read.
   * @throws CodecallError `SANDBOX_UNAVAILABLE` when the namespace cannot be made.
   */
  async hold(): Promise<StagingNamespace> {
    this.readers += 1;
    try {
      const descriptor = await holdMountNamespace({
        unshare: findTool('unshare'),
        script: HOLDER_SCRIPT,
        scriptArguments: [this.mountTable],
        timeoutMs: STAGING_TIMEOUT_MS,
        // mount(8), as root, follows links on the way to a source: a script that ran since the roots were first seen
        // could have put one there (a directory it may write), so what got mounted must be what was seen.
        verify: (pid) => {
          for (const [index, root] of this.roots.entries()) {
            const mounted = directoryIdentity(`/proc/${pid}/root${this.mountPoints[index]}`);
            if (mounted !== this.identities[index]) return `${root.path} is no longer the directory first seen there`;
          }
          return undefined;
        },
        failure: (why) =>
          new CodecallError('SANDBOX_UNAVAILABLE', stagingFailureMessage(this.roots, why), { roots: this.roots }),
      });
      return { descriptor, roots: this.roots, reachable: (path) => this.reachable(path) };
    } finally {
      this.retired = true;
      this.release();
    }
  }

  /** One reader of the table (an inline launch, a holder) is done with it. */
  release(): void {
    this.readers = Math.max(0, this.readers - 1);
    this.removeTableWhenUnused();
  }

  /** No new reader will come (a namespace is held, or another plan replaced this one): the table may go. */
  retire(): void {
    this.retired = true;
    this.removeTableWhenUnused();
  }

  /**
   * Removes the stage directory now, when no launch will read the plan again (a namespace held from it loses its
   * mounts): a few synchronous calls, cheaper than the thread pool's round trips. What cannot be removed now goes when
   * the process exits.
   */
  remove(): void {
    this.retired = true;
    try {
      rmSync(this.mountTable, { force: true });
      for (const mountPoint of this.mountPoints) rmdirSync(mountPoint);
      rmdirSync(this.stageDirectory);
      stageDirectories.delete(this.stageDirectory);
    } catch {
      // Left for the removal at exit.
    }
  }

  private removeTableWhenUnused(): void {
    if (this.retired && this.readers === 0) rmSync(this.mountTable, { force: true });
  }
}

/**
 * The shell of an inline staging, as root in the new mount namespace: `$1` mount(8), `$2` the table, `$3` the failure
 * message, `$4` a descriptor to copy it to (or empty), then the cgroup files to join, `--`, then the command. Fixed
 * text, absolute tools, everything else as arguments (the environment is empty).
 */
const INLINE_STAGING_SCRIPT = [
  // mount(8) prints nothing on success; whatever it says goes to stderr, never into the script's stdout.
  'if ! "$1" -a -T "$2" >&2; then',
  '  printf "%s\\n" "$3" >&2',
  '  if [ -n "$4" ]; then printf "%s\\n" "$3" >&"$4"; fi',
  '  exit 125',
  'fi',
  'shift 4',
  // The cgroups after the mount, so mount(8) is not charged to the run; before the command, so all of the run is inside.
  CGROUP_JOIN_AND_EXEC_SCRIPT,
].join('\n');

/** The holder's shell: mounts the table, says `ready`, then waits until the host closes stdin (no further process). */
const HOLDER_SCRIPT = ['set -e', 'mount -a -T "$1"', 'echo ready', 'read -r _ || :'].join('\n');
