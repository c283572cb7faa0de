import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { isInside } from '../core/paths.js';
import { randomHex } from '../core/random-bytes.js';
import { firstExecutable } from './executables.js';
import { holdMountNamespace } from './mount-namespace-holder.js';
import { writeMountTable } from './mount-table.js';

/**
 * bwrap resolves every bind source as the sandbox user, so when the host is root and the sandbox user is 65534, a
 * directory under a private parent (pyenv in /root/.pyenv, a project in /root/app) cannot be mounted into the
 * sandbox. The staging namespace fixes that without touching the host: one private mount namespace, made once per
 * host process, in which those directories are bind-mounted (read-only) under a directory the sandbox user can
 * reach; runs enter it with `nsenter --mount` before starting bwrap. It lives as long as the descriptor we hold.
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

/** A private mount namespace in which directories unreachable by the sandbox user are reachable. */
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

/**
 * Makes a staging namespace for `roots` (absolute real paths of directories), with mount points under
 * `filesDirectory`. Runs once per set of roots; the caller caches it.
 * @throws CodecallError `SANDBOX_UNAVAILABLE` when the namespace cannot be made.
 */
export async function createStagingNamespace(
  roots: readonly StagingRoot[],
  filesDirectory: string,
): Promise<StagingNamespace> {
  const unshare = findTool('unshare');
  findTool('mount');
  const stageDirectory = join(filesDirectory, `stage-${process.pid}-${randomHex(4)}`);
  mkdirSync(stageDirectory, { mode: 0o711 });
  const mountPoints = roots.map((_, index) => join(stageDirectory, String(index)));
  for (const mountPoint of mountPoints) mkdirSync(mountPoint, { mode: 0o755 });
  // The mount points are empty directories on the host; they go when this process exits.
  process.once('exit', () => rmSync(stageDirectory, { recursive: true, force: true }));
  // One mount(8) makes every bind from a mount table, with its flags: one process, not one per root.
  const mountTable = join(stageDirectory, 'mounts');
  writeMountTable(
    mountTable,
    roots.map((root, index) => ({
      source: root.path,
      target: mountPoints[index] ?? '',
      type: 'none',
      options: `bind,${root.writable ? 'rw' : 'ro'},nosuid,nodev`,
    })),
  );
  const script = [
    'set -e',
    'mount -a -T "$1"',
    'echo ready',
    // Waits until the host closes stdin (the shell's own read: no further process to start).
    'read -r _ || :',
  ].join('\n');
  const descriptor = await holdMountNamespace({
    unshare,
    script,
    scriptArguments: [mountTable],
    timeoutMs: STAGING_TIMEOUT_MS,
    failure: (why) =>
      new CodecallError(
        'SANDBOX_UNAVAILABLE',
        `cannot make the staging mount namespace for ${roots.map((root) => root.path).join(', ')} (${why}); ` +
          'make these directories reachable by other users or run codecall as a non-root user',
        { roots },
      ),
  }).finally(() => rmSync(mountTable, { force: true }));
  return {
    descriptor,
    roots,
    reachable(path: string): string | undefined {
      for (const [index, root] of roots.entries()) {
        if (isInside(path, root.path)) return `${mountPoints[index]}${path.slice(root.path.length)}`;
      }
      return undefined;
    },
  };
}
