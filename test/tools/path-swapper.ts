import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';

// Exchanges two names atomically (renameat2 RENAME_EXCHANGE) as fast as it can, like an attacker racing the host's
// check and open; prints one line once it has started.
const SWAPPER_SOURCE = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
first, second = sys.argv[1].encode(), sys.argv[2].encode()
started = False
while True:
    if libc.renameat2(-100, first, -100, second, 2) != 0:
        sys.exit('renameat2 failed: errno %d' % ctypes.get_errno())
    if not started:
        started = True
        print('swapping', flush=True)
`;

/** A process exchanging two paths in a loop until stopped. */
export interface PathSwapper {
  stop(): Promise<void>;
}

/** Starts exchanging `first` and `second` (both must exist) in a concurrent process; resolves once it runs. */
export async function startPathSwapper(first: string, second: string): Promise<PathSwapper> {
  const python = await resolvePythonInterpreter('python3');
  const child: ChildProcess = spawn(python.executable, ['-I', '-S', '-c', SWAPPER_SOURCE, first, second], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await Promise.race([
    once(child.stdout as NodeJS.ReadableStream, 'data'),
    once(child, 'exit').then(() => {
      throw new Error('the path swapper exited before it started');
    }),
  ])) as [Buffer];
  if (!line.toString().startsWith('swapping')) throw new Error(`unexpected output from the swapper: ${line}`);
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
  };
}
