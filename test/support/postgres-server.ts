import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Name and password of the superuser of the temporary cluster. */
export const POSTGRES_ADMIN = { user: 'codecall_admin', password: 'admin-secret-4c6f' } as const;

/** A PostgreSQL server started for a test file in a temporary folder, on a free port of 127.0.0.1. */
export interface PostgresServer {
  readonly port: number;
  /** A `postgres://` URL for `user` (the admin by default) on `database` (`postgres` by default). */
  url(options?: { user?: string; password?: string; database?: string }): string;
  /** Stops the server (fast shutdown) and removes its folder. */
  stop(): Promise<void>;
}

/**
 * Where Debian's `postgresql` package (or another install, on PATH) put `initdb`, `pg_ctl` and `postgres`, or the
 * reason there is no server to test against. Synchronous, so test files can skip at collection time.
 */
export function findPostgresBinaries(): { readonly directory: string } | { readonly missing: string } {
  const candidates = (process.env.PATH ?? '').split(delimiter).filter((directory) => directory !== '');
  const debianRoot = '/usr/lib/postgresql';
  if (existsSync(debianRoot)) {
    const versions = readdirSync(debianRoot)
      .filter((name) => /^\d+$/.test(name))
      .sort((left, right) => Number(right) - Number(left));
    candidates.push(...versions.map((version) => join(debianRoot, version, 'bin')));
  }
  const directory = candidates.find((candidate) =>
    ['initdb', 'pg_ctl', 'postgres'].every((name) => existsSync(join(candidate, name))),
  );
  if (directory === undefined) {
    return { missing: 'PostgreSQL server binaries not found (apt-get install postgresql); PostgreSQL tests skipped' };
  }
  try {
    serverUser();
  } catch {
    return { missing: 'running as root without a "postgres" user to run the server as; PostgreSQL tests skipped' };
  }
  return { directory };
}

/** A TCP port nobody listens on at the moment. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject()));
    });
  });
}

/** The user the server runs as: root may not run PostgreSQL, so as root it is `postgres` (Debian's package user). */
function serverUser(): { readonly uid: number; readonly gid: number; readonly name: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = execFileSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' }).trim();
  const [name, , uid, gid] = line.split(':');
  return { name: name ?? 'postgres', uid: Number(uid), gid: Number(gid) };
}

/**
 * Starts a throwaway cluster: `initdb` in a temporary folder (scram-sha-256 password authentication), then `pg_ctl
 * start` listening on 127.0.0.1 at a free port, with its Unix socket inside the folder.
 */
export async function startPostgresServer(binaries: { readonly directory: string }): Promise<PostgresServer> {
  const root = mkdtempSync(join(tmpdir(), 'codecall-postgres-'));
  const data = join(root, 'data');
  const sockets = join(root, 'sockets');
  mkdirSync(sockets);
  const passwordFile = join(root, 'password');
  writeFileSync(passwordFile, `${POSTGRES_ADMIN.password}\n`);
  const user = serverUser();
  if (user !== undefined) {
    for (const path of [root, sockets, passwordFile]) chownSync(path, user.uid, user.gid);
  }
  const runAsServer = (command: string, args: readonly string[]) =>
    user === undefined
      ? run(join(binaries.directory, command), [...args])
      : run('runuser', ['-u', user.name, '--', join(binaries.directory, command), ...args]);
  const port = await freePort();
  try {
    await runAsServer('initdb', [
      '-D',
      data,
      '-U',
      POSTGRES_ADMIN.user,
      '--auth=scram-sha-256',
      `--pwfile=${passwordFile}`,
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    await runAsServer('pg_ctl', [
      '-D',
      data,
      '-l',
      join(root, 'server.log'),
      '-w',
      '-t',
      '120',
      '-o',
      `-p ${port} -k ${sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`,
      'start',
    ]);
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url: (options = {}) => {
      const name = encodeURIComponent(options.user ?? POSTGRES_ADMIN.user);
      const password = encodeURIComponent(options.password ?? POSTGRES_ADMIN.password);
      return `postgres://${name}:${password}@127.0.0.1:${port}/${options.database ?? 'postgres'}`;
    },
    stop: async () => {
      try {
        await runAsServer('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}
