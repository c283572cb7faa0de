import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The built command line the worker processes run (tests of the fleet need `npm run build` first). */
export const CLI_PATH = join(repositoryRoot, 'dist', 'cli', 'main.js');

/** Where `redis-server` is, or why the fleet tests are skipped. */
export function findRedisServer(): { readonly path: string } | { readonly missing: string } {
  for (const candidate of ['/usr/bin/redis-server', '/usr/local/bin/redis-server']) {
    if (existsSync(candidate)) return { path: candidate };
  }
  try {
    return { path: execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim() };
  } catch {
    return { missing: 'redis-server not found (apt-get install redis-server); worker fleet tests skipped' };
  }
}

/** A TCP port nobody listens on at the moment. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolvePort(address.port) : reject()));
    });
  });
}

async function waitUntil(check: () => Promise<boolean> | boolean, what: string, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((wait) => setTimeout(wait, 50));
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((answer) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      answer(true);
    });
    socket.once('error', () => answer(false));
  });
}

/** A redis-server of a test file: its own folder (append-only persistence, so a restart keeps the queue). */
export interface RedisServer {
  readonly url: string;
  readonly port: number;
  /** Stops the server (it saves its data first) and starts it again on the same port. */
  restart(options?: { downMs?: number }): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedisServer(binary: { readonly path: string }): Promise<RedisServer> {
  const folder = mkdtempSync(join(tmpdir(), 'codecall-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      binary.path,
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', folder, '--appendonly', 'yes', '--save', ''],
      { stdio: 'ignore' },
    );
    await waitUntil(() => accepts(port), `redis-server on port ${port}`);
  };
  const halt = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((done) => running.once('exit', done));
    running.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async restart(options = {}) {
      await halt();
      await new Promise((wait) => setTimeout(wait, options.downMs ?? 500));
      await start();
    },
    async stop() {
      await halt();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** A `codecall worker` process. */
export interface WorkerProcess {
  readonly id: string;
  readonly child: ChildProcess;
  /** What it wrote on stderr so far. */
  log(): string;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
}

/** Starts `codecall worker` (sandbox none) and waits for the line that says it takes runs. */
export async function startWorkerProcess(
  redisUrl: string,
  options: { concurrency?: number; queue?: string } = {},
): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [
      CLI_PATH,
      'worker',
      '--redis',
      redisUrl,
      '--sandbox',
      'none',
      '--concurrency',
      String(options.concurrency ?? 2),
      ...(options.queue ? ['--queue', options.queue] : []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  await waitUntil(() => /takes runs/.test(log) || child.exitCode !== null, 'the worker to start');
  const match = /worker (\S+) takes runs/.exec(log);
  if (match?.[1] === undefined) throw new Error(`the worker did not start: ${log}`);
  const ended = new Promise<void>((done) => child.once('exit', () => done()));
  return {
    id: match[1],
    child,
    log: () => log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await ended;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await ended;
    },
  };
}

/** Waits until `check` holds, polling; throws naming `what` past the limit (a bound on the behaviour, not a timing). */
export { waitUntil };
