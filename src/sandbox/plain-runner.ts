import type { LaunchRequest, PreparedLaunch, SandboxRunner } from './runner.js';

/**
 * Isolation level `none`: the interpreter runs as a plain child process with an allowlisted environment, a private
 * working directory, resource limits and its own session. It is not a security boundary; use bubblewrap for that.
 */
export function createPlainRunner(): SandboxRunner {
  return {
    isolation: 'none',
    async prepare(request: LaunchRequest): Promise<PreparedLaunch> {
      return {
        plan: {
          command: request.interpreter.executable,
          args: request.pythonArguments,
          environment: request.environment,
          cwd: request.workDir,
        },
      };
    },
  };
}
