import { lstatSync, readlinkSync } from 'node:fs';

/**
 * The fixed part of every bwrap command line: namespaces, privileges, and the read-only system directories. The
 * per-run part (interpreter, run directory, environment) is added by the bubblewrap runner.
 */

/** The unprivileged user scripts run as when the host runs as root (`nobody`/`nogroup` on Debian). */
export const ROOT_HOST_SANDBOX_USER_ID = 65534;
/** Group of {@link ROOT_HOST_SANDBOX_USER_ID}. */
export const ROOT_HOST_SANDBOX_GROUP_ID = 65534;
/** Host name inside the sandbox (the host's own name is not the script's business). */
export const SANDBOX_HOST_NAME = 'codecall';

/** The uid and gid a script runs as. */
export interface SandboxUser {
  readonly uid: number;
  readonly gid: number;
}

/**
 * The user scripts run as: `nobody` (65534) when the host is root — a sandbox mapped to uid 0 can read root-only
 * files and is exempt from RLIMIT_NPROC — else the host's own user, mapped to itself.
 */
export function sandboxUserForHost(): SandboxUser {
  const uid = process.getuid?.() ?? ROOT_HOST_SANDBOX_USER_ID;
  if (uid === 0) return { uid: ROOT_HOST_SANDBOX_USER_ID, gid: ROOT_HOST_SANDBOX_GROUP_ID };
  return { uid, gid: process.getgid?.() ?? uid };
}

/** Whether the host runs as root (then scripts run as another user). */
export function hostIsRoot(): boolean {
  return process.getuid?.() === 0;
}

/**
 * Namespaces and privileges: every namespace new (the network one too unless asked for), the sandbox dies with its
 * parent, a new terminal session (TIOCSTI), no capabilities (as root, bwrap would otherwise keep them).
 */
export function isolationArguments(network: boolean): string[] {
  return [
    '--unshare-all',
    '--unshare-user',
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--hostname',
    SANDBOX_HOST_NAME,
  ];
}

/** Top-level directories that are links into /usr on merged-/usr systems, or real directories on older ones. */
const USR_COMPANIONS = ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'] as const;

/**
 * Files of /etc a Python script needs: the dynamic linker's cache, the time zone, name resolution basics, and Debian's
 * alternatives (shared libraries such as libblas.so.3, which numpy and matplotlib load, are links through it) and
 * Debian's matplotlibrc (its matplotlib does not start without it), and fontconfig's configuration (without it,
 * matplotlib's font search prints "Fontconfig error" on stderr and scans every font on each run).
 */
export const ETC_FILES: readonly string[] = Object.freeze([
  '/etc/ld.so.cache',
  '/etc/alternatives',
  '/etc/matplotlibrc',
  '/etc/fonts',
  '/etc/localtime',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
]);

/** More of /etc when the script may use the network: DNS and TLS certificates. */
export const NETWORK_ETC_FILES: readonly string[] = Object.freeze([
  '/etc/resolv.conf',
  '/etc/gai.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
  '/etc/crypto-policies',
]);

/**
 * Read-only /usr and its companions as on the host (links stay links), read once per process: `/usr` is bound,
 * `/lib` → `usr/lib` becomes the same link inside.
 */
export function systemDirectoryArguments(): string[] {
  const argumentsList = ['--ro-bind', '/usr', '/usr'];
  for (const name of USR_COMPANIONS) {
    const path = `/${name}`;
    try {
      const stats = lstatSync(path);
      if (stats.isSymbolicLink()) argumentsList.push('--symlink', readlinkSync(path), path);
      else if (stats.isDirectory()) argumentsList.push('--ro-bind', path, path);
    } catch {
      // Absent on this system.
    }
  }
  return argumentsList;
}

/** Directories that are the system itself: paths inside them need no bind of their own. */
export function systemRoots(): string[] {
  const roots = ['/usr'];
  for (const name of USR_COMPANIONS) roots.push(`/${name}`);
  return roots;
}

/**
 * Minimal /etc: the files above when present; the runner adds a passwd and group that name only root, the sandbox
 * user and `nobody` (the host's account list is not the script's business).
 */
export function etcArguments(network: boolean): string[] {
  const argumentsList: string[] = [];
  for (const path of [...ETC_FILES, ...(network ? NETWORK_ETC_FILES : [])]) {
    argumentsList.push('--ro-bind-try', path, path);
  }
  return argumentsList;
}

/** Content of the sandbox's /etc/passwd. */
export function passwdContent(user: SandboxUser): string {
  const lines = ['root:x:0:0:root:/root:/usr/sbin/nologin'];
  if (user.uid !== 0 && user.uid !== ROOT_HOST_SANDBOX_USER_ID) {
    lines.push(`codecall:x:${user.uid}:${user.gid}:codecall sandbox:/nonexistent:/usr/sbin/nologin`);
  }
  lines.push(
    `nobody:x:${ROOT_HOST_SANDBOX_USER_ID}:${ROOT_HOST_SANDBOX_GROUP_ID}:nobody:/nonexistent:/usr/sbin/nologin`,
  );
  return `${lines.join('\n')}\n`;
}

/** Content of the sandbox's /etc/group. */
export function groupContent(user: SandboxUser): string {
  const lines = ['root:x:0:'];
  if (user.gid !== 0 && user.gid !== ROOT_HOST_SANDBOX_GROUP_ID) lines.push(`codecall:x:${user.gid}:`);
  lines.push(`nogroup:x:${ROOT_HOST_SANDBOX_GROUP_ID}:`);
  return `${lines.join('\n')}\n`;
}

/**
 * Kernel interfaces and scratch space: a new /proc for the new pid namespace, a minimal /dev made read-only, a sized
 * tmpfs for /dev/shm, and one for /tmp when `tmpBytes` is given (bwrap's tmpfs is otherwise unlimited host RAM).
 */
export function scratchArguments(sharedMemoryBytes: number, tmpBytes?: number): string[] {
  return [
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--size',
    String(sharedMemoryBytes),
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev',
    ...(tmpBytes === undefined ? [] : ['--size', String(tmpBytes), '--tmpfs', '/tmp']),
  ];
}
