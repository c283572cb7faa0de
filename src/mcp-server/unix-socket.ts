import type { Stats } from 'node:fs';
import { connect, type Server } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { filePromises } from '../core/file-promises.js';

/** Permission bits of the socket file: only its owner (and root) may connect. */
export const UNIX_SOCKET_MODE = 0o600;

/** The umask while the socket is bound: the kernel creates it with 0777 minus this, so 0600 from the start. */
const SOCKET_UMASK = 0o777 & ~UNIX_SOCKET_MODE;

/** Longest socket path the kernel takes (`sun_path` holds 108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

/** Mode bits: written by the group or by others; the sticky bit. */
const WRITABLE_BY_OTHERS = 0o022;
const STICKY = 0o1000;

/**
 * Makes `server` listen on a Unix domain socket at `path` that only this user (and root) can connect to:
 * - the socket is created by `bind` with a narrowed umask, so it has mode 0600 from its first instant, and is checked
 *   afterwards (a socket, ours, nothing for group or others);
 * - an existing path is never replaced unless it is a dead socket of ours (a server that stopped without removing
 *   it); anything else — a file, a link, a live socket — is refused, and `bind` itself never follows or overwrites;
 * - every folder above it must belong to this user or root and be writable by no one else (or sticky, like /tmp),
 *   so no other user can move the socket away and put a listener of theirs in its place.
 * The path is bound with its folder resolved (no links followed at bind time). Resolves with that path.
 * @throws CodecallError `INVALID_CONFIG` naming the path and what is wrong with it.
 */
export async function listenOnUnixSocket(server: Server, path: string): Promise<string> {
  const requested = resolve(path);
  let folder: string;
  try {
    folder = await filePromises().realpath(dirname(requested));
  } catch (error) {
    throw socketError(requested, `its folder cannot be used (${(error as NodeJS.ErrnoException).code})`);
  }
  const socketPath = join(folder, basename(requested));
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw socketError(socketPath, `the path is longer than the ${MAX_SOCKET_PATH_BYTES} bytes a socket path may have`);
  }
  await checkFolders(socketPath, folder);
  await removeDeadSocket(socketPath);
  await bind(server, socketPath);
  try {
    await checkBoundSocket(socketPath);
  } catch (error) {
    await new Promise<void>((settle) => server.close(() => settle()));
    throw error;
  }
  return socketPath;
}

function socketError(path: string, reason: string): CodecallError {
  return new CodecallError('INVALID_CONFIG', `serveHttp: cannot listen on the Unix socket ${path}: ${reason}`, {
    key: 'socketPath',
    value: path,
  });
}

async function checkFolders(socketPath: string, folder: string): Promise<void> {
  const uid = process.getuid?.();
  for (let current = folder; ; current = dirname(current)) {
    const stats = await filePromises().lstat(current);
    if (stats.uid !== 0 && stats.uid !== uid) {
      throw socketError(socketPath, `the folder ${current} belongs to another user (uid ${stats.uid})`);
    }
    if ((stats.mode & WRITABLE_BY_OTHERS) !== 0 && (stats.mode & STICKY) === 0) {
      throw socketError(
        socketPath,
        `other users can write to the folder ${current} (mode ${(stats.mode & 0o7777).toString(8)}) and could replace the socket; use a private folder such as $XDG_RUNTIME_DIR`,
      );
    }
    if (current === dirname(current)) return;
  }
}

async function removeDeadSocket(socketPath: string): Promise<void> {
  let stats: Stats;
  try {
    stats = await filePromises().lstat(socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw socketError(socketPath, `it cannot be inspected (${(error as NodeJS.ErrnoException).code})`);
  }
  if (!stats.isSocket()) {
    throw socketError(socketPath, 'the path exists and is not a socket; remove it or choose another path');
  }
  if (stats.uid !== process.getuid?.()) {
    throw socketError(socketPath, `a socket of another user (uid ${stats.uid}) is there`);
  }
  if (await acceptsConnections(socketPath)) {
    throw socketError(socketPath, 'another server is listening on it');
  }
  await filePromises().unlink(socketPath);
}

function acceptsConnections(socketPath: string): Promise<boolean> {
  return new Promise((settle) => {
    const probe = connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      settle(true);
    });
    probe.once('error', () => settle(false));
  });
}

async function bind(server: Server, socketPath: string): Promise<void> {
  let listening: Promise<void>;
  // The umask is process-wide: narrowed only around listen(), which binds synchronously, and restored at once.
  const previousUmask = process.umask(SOCKET_UMASK);
  try {
    listening = new Promise<void>((settle, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        settle();
      });
    });
  } finally {
    process.umask(previousUmask);
  }
  try {
    await listening;
  } catch (error) {
    throw socketError(socketPath, (error as Error).message);
  }
}

async function checkBoundSocket(socketPath: string): Promise<void> {
  const stats = await filePromises().lstat(socketPath);
  if (!stats.isSocket() || stats.uid !== process.getuid?.() || (stats.mode & 0o077) !== 0) {
    throw socketError(
      socketPath,
      `the bound socket is not a private socket of ours (mode ${(stats.mode & 0o7777).toString(8)}, uid ${stats.uid})`,
    );
  }
}
