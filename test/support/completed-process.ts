import { spawn } from 'node:child_process';

/** What a finished child process left: its exit status and everything it printed. */
export interface Completed {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end with `input` on stdin (/dev/null for null), collecting its output. */
export function runToCompletion(
  command: string,
  args: readonly string[],
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly input?: string | null },
): Promise<Completed> {
  return new Promise((resolve, reject) => {
    const { cwd, env } = options;
    const child =
      options.input === null
        ? spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn(command, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin?.end(options.input ?? '');
  });
}
