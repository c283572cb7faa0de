import { closeSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { isInside } from '../core/paths.js';
import { randomHex } from '../core/random-bytes.js';
import { holdMountNamespace } from './mount-namespace-holder.js';
import { type MountTableEntry, writeMountTable } from './mount-table.js';
import { findTool, outermostBlockingAncestor } from './staging-namespace.js';

/**
 * Isolation `none` as root runs each script as a uid of its own, which cannot reach directories under a private
 * parent (a pyenv interpreter in /root/.pyenv, a state folder made 0700 by mkdtemp). Without bubblewrap there is no
 * bind to put them elsewhere, so the script must find them at their own paths: one private mount namespace, made once
 * per set of directories, in which each blocking parent is covered by an empty read-only tmpfs (mode 0755, so it
 * hides what the parent held) and the directories the script needs are bound back at their own paths — read-only,
 * but the runs folder. Runs enter it with `nsenter --mount` and drop to their uid there. The host's mount table is
 * never touched, and the namespace lives as long as the descriptor codecall holds.
 */

/** How long making the namespace may take (generous: under a saturated CPU it has been seen past 10 s). */
const NAMESPACE_TIMEOUT_MS = 30_000;
/** Size of each covering tmpfs: it holds only the empty directories the binds need. */
const COVER_TMPFS_BYTES = 64 * 1024;
const OTHERS_EXECUTE = 0o001;
/** Where mount points are prepared when the files directory lies under a covered parent (root's own tmpfs). */
const FALLBACK_STAGE_PARENT = '/run/codecall/reach';
const OTHERS_READ = 0o004;

/** A directory (or file) the script needs at its own path. */
export interface ReachableRoot {
  readonly path: string;
  readonly writable: boolean;
}

/** A private mount namespace where `roots` are reachable by any uid at their own paths. */
export interface ReachableNamespace {
  /** Open descriptor of the mount namespace (`/proc/<pid>/ns/mnt`), held for the life of the host process. */
  readonly descriptor: number;
  /** The directories bound back (those that needed it). */
  readonly roots: readonly ReachableRoot[];
}

/** Whether other users may use `path` by its own permission bits: enter a directory, read a file. */
export function isOpenToOthers(path: string): boolean {
  const stats = statSync(path);
  return (stats.mode & (stats.isDirectory() ? OTHERS_EXECUTE : OTHERS_READ)) !== 0;
}

/**
 * The roots a user cannot reach with the parents they lie in, each with its outermost blocking parent. A root whose
 * own permission bits shut other users out cannot be helped by a bind.
 * @throws CodecallError `SANDBOX_UNAVAILABLE` naming such a root.
 */
export function unreachableRoots(
  roots: readonly ReachableRoot[],
  user: { readonly uid: number; readonly gid: number },
): { readonly root: ReachableRoot; readonly cover: string }[] {
  const found: { root: ReachableRoot; cover: string }[] = [];
  for (const root of roots) {
    if (!isOpenToOthers(root.path)) {
      const stats = statSync(root.path);
      throw new CodecallError(
        'SANDBOX_UNAVAILABLE',
        `${root.path} is closed to other users (mode ${(stats.mode & 0o777).toString(8)}), so a script running as ` +
          'a uid of its own cannot use it; allow others to read it (chmod o+rX) or run codecall as a non-root user',
        { path: root.path },
      );
    }
    const cover = outermostBlockingAncestor(root.path, user.uid, user.gid);
    if (cover !== undefined) found.push({ root, cover });
  }
  return found;
}

/**
 * Makes the namespace for `needed` (from {@link unreachableRoots}), with temporary mount points under
 * `filesDirectory` (root's own).
 * @throws CodecallError `SANDBOX_UNAVAILABLE` when util-linux is missing or the namespace cannot be made.
 */
export async function createReachableNamespace(
  entries: readonly { readonly root: ReachableRoot; readonly cover: string }[],
  filesDirectory: string,
): Promise<ReachableNamespace> {
  const unshare = findTool('unshare');
  findTool('mount');
  // A root inside another is reached through it (a bind inside a bind would write its mount point into the host's
  // directory); the outer one is writable when an inner one was.
  const needed = entries
    .filter(
      (entry) =>
        !entries.some((other) => other.root.path !== entry.root.path && isInside(entry.root.path, other.root.path)),
    )
    .map((entry) => ({
      cover: entry.cover,
      root: {
        path: entry.root.path,
        writable: entries.some((other) => other.root.writable && isInside(other.root.path, entry.root.path)),
      },
    }));
  const covers = [...new Set(needed.map((entry) => entry.cover))];
  const outermostCovers = covers.filter((cover) => !covers.some((other) => other !== cover && isInside(cover, other)));
  // The stages must stay visible once the covers are mounted: a files directory under a cover (a state folder in a
  // private TMPDIR) would be hidden by its tmpfs, so the stages go to root's own run-time folder instead.
  const stageParent = [filesDirectory, FALLBACK_STAGE_PARENT].find(
    (candidate) => !outermostCovers.some((cover) => isInside(candidate, cover)),
  );
  if (stageParent === undefined) {
    throw new CodecallError(
      'SANDBOX_UNAVAILABLE',
      `no folder outside ${outermostCovers.join(', ')} to prepare the mount namespace in; ` +
        'make these directories reachable by other users or run codecall as a non-root user',
      { covers: outermostCovers },
    );
  }
  mkdirSync(stageParent, { recursive: true, mode: 0o700 });
  const stageDirectory = join(stageParent, `reach-${process.pid}-${randomHex(4)}`);
  mkdirSync(stageDirectory, { mode: 0o700 });
  const stages = needed.map((entry, index) => {
    const stage = join(stageDirectory, String(index));
    const directory = statSync(entry.root.path).isDirectory();
    if (directory) mkdirSync(stage);
    else closeSync(openSync(stage, 'w'));
    return { stage, directory, entry };
  });
  const backAtItsPath = ({ stage, entry }: (typeof stages)[number]): MountTableEntry => ({
    source: stage,
    target: entry.root.path,
    type: 'none',
    // X-mount.mkdir makes the mount point (and its parents) in the covering tmpfs.
    options: `bind,X-mount.mkdir=0755,${entry.root.writable ? 'rw' : 'ro'},nosuid,nodev`,
  });
  // Two mount tables, one mount(8) each, instead of one mount(8) per step: the first holds every root at its stage
  // while the parents are still visible, covers the parents and binds the directories back at their own paths; the
  // second, once the shell made the mount points of roots that are files, binds those back and makes the covers
  // read-only.
  const firstTable = join(stageDirectory, 'mounts-1');
  writeMountTable(firstTable, [
    ...stages.map(({ stage, entry }) => ({ source: entry.root.path, target: stage, type: 'none', options: 'bind' })),
    ...outermostCovers.map((cover) => ({
      source: 'codecall',
      target: cover,
      type: 'tmpfs',
      options: `mode=0755,size=${COVER_TMPFS_BYTES},nosuid,nodev`,
    })),
    ...stages.filter((stage) => stage.directory).map(backAtItsPath),
  ]);
  const secondTable = join(stageDirectory, 'mounts-2');
  writeMountTable(secondTable, [
    ...stages.filter((stage) => !stage.directory).map(backAtItsPath),
    ...outermostCovers.map((cover) => ({
      source: 'none',
      target: cover,
      type: 'none',
      options: 'remount,ro,nosuid,nodev',
    })),
  ]);
  const script = [
    'set -e',
    'mount -a -T "$1"',
    'shift',
    'while [ "$1" != -- ]; do mkdir -p -- "$(dirname -- "$1")"; : >"$1"; shift; done',
    'shift',
    'mount -a -T "$1"',
    'shift',
    // The stages are left empty: the host removes them.
    'umount -- "$@"',
    'echo ready',
    // Waits until the host closes stdin (the shell's own read: no further process to start).
    'read -r _ || :',
  ].join('\n');
  const scriptArguments = [
    firstTable,
    ...stages.filter((stage) => !stage.directory).map(({ entry }) => entry.root.path),
    '--',
    secondTable,
    ...stages.map(({ stage }) => stage),
  ];
  try {
    const descriptor = await holdMountNamespace({
      unshare,
      script,
      scriptArguments,
      timeoutMs: NAMESPACE_TIMEOUT_MS,
      failure: (why) =>
        new CodecallError(
          'SANDBOX_UNAVAILABLE',
          `cannot make the mount namespace that lets scripts reach ${needed.map((entry) => entry.root.path).join(', ')} ` +
            `(${why}); make these directories reachable by other users or run codecall as a non-root user`,
          { roots: needed.map((entry) => entry.root) },
        ),
    });
    return { descriptor, roots: needed.map((entry) => entry.root) };
  } finally {
    // The mount points were unmounted inside the namespace and never mounted outside it: empty, and no longer needed.
    rmSync(stageDirectory, { recursive: true, force: true });
  }
}
