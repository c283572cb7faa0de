import { spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import type { CodecallError } from '../core/errors.js';

/** Options of {@link holdMountNamespace}. */
export interface HoldMountNamespaceOptions {
  /** `unshare` of util-linux. */
  readonly unshare: string;
  /** Shell script run in the new mount namespace: it sets the mounts up, prints `ready`, then waits on stdin. */
  readonly script: string;
  readonly scriptArguments: readonly string[];
  /** Variables of the script besides PATH. */
  readonly environment?: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  /**
   * Checks the namespace while the holder still lives (`pid`: its process, whose `/proc/<pid>/root` shows the
   * namespace's files) and says why it is wrong, or undefined when it is right.
   */
  verify?(pid: number): string | undefined;
  /** The error thrown on failure, given why it failed. */
  failure(why: string): CodecallError;
}

/**
 * Makes a private mount namespace with a shell script and returns an open descriptor of it
 * (`/proc/<pid>/ns/mnt`): the namespace lives on through the descriptor, and the holding process may go.
 * @throws the error `failure` builds when the script fails, exits early or takes longer than `timeoutMs`.
 */
export function holdMountNamespace(options: HoldMountNamespaceOptions): Promise<number> {
  const holder = spawn(
    options.unshare,
    ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', options.script, 'sh', ...options.scriptArguments],
    {
      env: { PATH: '/usr/bin:/bin:/usr/sbin:/sbin', ...options.environment },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  return new Promise<number>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const fail = (why: string) => {
      clearTimeout(timer);
      holder.kill('SIGKILL');
      reject(options.failure(why.trim()));
    };
    const timer = setTimeout(() => fail('timed out'), options.timeoutMs);
    holder.once('error', (error) => fail(error.message));
    holder.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    holder.once('exit', (code) => fail(`exited with status ${code}: ${stderr}`));
    holder.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (!stdout.includes('ready\n') || holder.pid === undefined) return;
      clearTimeout(timer);
      holder.removeAllListeners('exit');
      try {
        const wrong = options.verify?.(holder.pid);
        if (wrong !== undefined) {
          fail(wrong);
          return;
        }
        resolve(openSync(`/proc/${holder.pid}/ns/mnt`, 'r'));
      } catch (error) {
        fail((error as Error).message);
      }
      holder.stdin.end();
    });
  });
}
