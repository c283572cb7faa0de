import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostIsRoot } from '../../src/sandbox/bubblewrap-arguments.js';
import { createBubblewrapRunner } from '../../src/sandbox/bubblewrap-runner.js';
import { readCgroupLayout } from '../../src/sandbox/cgroups.js';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';
import { configuredRunUidRange } from '../../src/sandbox/run-uids.js';
import { isReachableBy } from '../../src/sandbox/staging-namespace.js';
import { launchWithRunner } from './support/launch-plan.js';
import {
  bubblewrapUsable,
  cgroupsActive,
  eventually,
  isRunUid,
  lastJson,
  sandboxProbe,
} from './support/sandbox-fixture.js';

/** Where this process's run cgroups are created: one directory per v1 hierarchy, or the v2 parent. */
function hierarchyRoots(): string[] {
  const layout = readCgroupLayout();
  if (layout === undefined) return [];
  if (layout.version === 2) return [layout.mountPoint];
  return layout.hierarchies
    .filter((hierarchy) =>
      hierarchy.controllers.some((controller) => sandboxProbe.cgroups.controllers.includes(controller)),
    )
    .map((hierarchy) => hierarchy.ownDirectory);
}

/** The executable of a process, or '' once it is gone. */
function commandOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
  } catch {
    return '';
  }
}

/** Directories of the run cgroups of `runId` (found by name under the hierarchies). */
function runCgroupDirectories(runId: string): string[] {
  const name = `codecall-${process.pid}-${runId}`;
  const layout = readCgroupLayout();
  const candidates =
    layout?.version === 2
      ? [join(layout.mountPoint, 'codecall', name), join(dirname(layout.ownDirectory), name)]
      : hierarchyRoots().map((root) => join(root, name));
  return candidates.filter((directory) => existsSync(directory));
}

/** The bubblewrap runner below the public API: launch plans, cgroup life cycle, staging, rlimit-only mode. */

describe.skipIf(!bubblewrapUsable)('bubblewrap runner', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'codecall-runner-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('starts bwrap with an empty environment and no host uid, and lists what it mounts', async () => {
    const runner = await createBubblewrapRunner();
    const outcome = await launchWithRunner({
      runner,
      code: 'import os, json\nprint(json.dumps({"cwd": os.getcwd(), "uid": os.getuid(), "home": os.environ["HOME"]}))',
    });
    expect(outcome.exitCode).toBe(0);
    const seen = lastJson<{ cwd: string; uid: number; home: string }>(outcome.stdout);
    // The run directory is mounted at its host path, so the engine's paths stay valid inside.
    expect(seen.cwd).toBe(outcome.workDir);
    expect(seen.home).toBe(outcome.workDir);
    expect(isRunUid(seen.uid)).toBe(true);
  });

  describe.skipIf(!cgroupsActive).each([
    ['by its launcher (cgroup v1 default)', 'launcher', false],
    ['by the host, holding bwrap at its user namespace (v2 default)', 'host', false],
    ['by the host while the engine holds the script (gated)', 'host', true],
  ] as const)('joins the run to its cgroups %s', (_, cgroupJoin, gated) => {
    const applies = cgroupJoin === 'host' || sandboxProbe.cgroups.version === 1;
    it.skipIf(!applies)('before the script runs, and removes them after', async () => {
      const runner = await createBubblewrapRunner({ cgroupJoin });
      let directories: string[] = [];
      let commands: string[] = [];
      const outcome = await launchWithRunner({
        runner,
        gated,
        code: 'import os, time, json\nprint(json.dumps(open("/proc/self/cgroup").read().splitlines()))\ntime.sleep(1)',
        whileRunning: async (runId) => {
          await eventually(() => {
            directories = runCgroupDirectories(runId);
            commands = directories.flatMap((directory) =>
              readFileSync(join(directory, 'cgroup.procs'), 'utf8').trim().split('\n').filter(Boolean).map(commandOf),
            );
            const interpreters = commands.filter((command) => command.includes('python'));
            return directories.length > 0 && interpreters.length === directories.length;
          });
        },
      });
      expect(outcome.exitCode).toBe(0);
      expect(directories.length).toBe(sandboxProbe.cgroups.version === 1 ? new Set(hierarchyRoots()).size : 1);
      // The interpreter is in every cgroup of the run.
      expect(commands.filter((command) => command.includes('python'))).toHaveLength(directories.length);
      // The launcher joined before bwrap made the cgroup namespace: the script sees its run cgroup as the root.
      if (cgroupJoin === 'launcher')
        expect(lastJson<string[]>(outcome.stdout).every((line) => line.endsWith(':/'))).toBe(true);
      for (const directory of directories) expect(existsSync(directory)).toBe(false);
    });
  });

  it('without cgroups, RLIMIT_NPROC still caps each run (its user namespace has its own count)', async () => {
    const runner = await createBubblewrapRunner({ cgroups: false });
    expect(runner.cgroupsActive).toBe(false);
    const fork = [
      'import os, time, errno',
      'children = 0',
      'try:',
      '    for _ in range(100):',
      '        if os.fork() == 0:',
      '            time.sleep(3)',
      '            os._exit(0)',
      '        children += 1',
      'except OSError as error:',
      '    print(errno.errorcode[error.errno], children)',
    ].join('\n');
    const outcomes = await Promise.all([
      launchWithRunner({ runner, code: fork, limits: { maxProcesses: 8 } }),
      launchWithRunner({ runner, code: fork, limits: { maxProcesses: 8 } }),
    ]);
    for (const outcome of outcomes) {
      // The cap counts threads too: the interpreter's stdout flusher thread takes one of the 8.
      expect(outcome.stdout).toMatch(/^EAGAIN [5-7]\n$/);
      expect(outcome.reason).toBeUndefined();
    }
  });

  it.skipIf(!hostIsRoot())(
    'as root, mounts directories the sandbox user cannot reach through the staging namespace',
    async () => {
      const privateDirectory = join(scratch, 'private');
      const library = join(privateDirectory, 'library');
      mkdirSync(library, { recursive: true });
      chmodSync(privateDirectory, 0o700);
      writeFileSync(join(library, 'secret_helper.py'), 'VALUE = 42\n');
      const { first } = configuredRunUidRange();
      expect(isReachableBy(library, first, first)).toBe(false);
      const runsRoot = join(privateDirectory, 'runs');
      mkdirSync(runsRoot, { mode: 0o711 });
      const runner = await createBubblewrapRunner();
      const outcome = await launchWithRunner({
        runner,
        runsRoot,
        readOnlyPaths: [library],
        code: `import sys\nsys.path.insert(0, ${JSON.stringify(library)})\nimport secret_helper\nprint(secret_helper.VALUE)\nopen("written.txt", "w").write("ok")\ntry:\n    open(${JSON.stringify(join(library, 'x'))}, "w")\nexcept OSError as error:\n    print(error.strerror)`,
      });
      expect(outcome.stderr).toBe('');
      expect(outcome.stdout).toBe('42\nRead-only file system\n');
    },
  );

  it.skipIf(!hostIsRoot())(
    'as root, makes the staging namespace ahead of the first run, and the run uses that one',
    async () => {
      const privateDirectory = join(scratch, 'private-ahead');
      const library = join(privateDirectory, 'modules', 'library');
      mkdirSync(library, { recursive: true });
      chmodSync(privateDirectory, 0o700);
      writeFileSync(join(library, 'ahead_helper.py'), 'VALUE = 7\n');
      const runsRoot = join(privateDirectory, 'runs');
      mkdirSync(runsRoot, { mode: 0o711 });
      const filesDirectory = mkdtempSync(join(tmpdir(), 'codecall-ahead-files-'));
      chmodSync(filesDirectory, 0o711);
      const stages = () => readdirSync(filesDirectory).filter((name) => name.startsWith(`stage-${process.pid}-`));
      try {
        const runner = await createBubblewrapRunner({ filesDirectory });
        runner.prepareAhead({
          interpreter: await resolvePythonInterpreter('python3'),
          readOnlyPaths: [dirname(library)],
          runsRoot,
        });
        expect(stages()).toHaveLength(1);
        const outcome = await launchWithRunner({
          runner,
          runsRoot,
          readOnlyPaths: [library],
          code: `import sys\nsys.path.insert(0, ${JSON.stringify(library)})\nimport ahead_helper\nprint(ahead_helper.VALUE)`,
        });
        expect(outcome.stderr).toBe('');
        expect(outcome.stdout).toBe('7\n');
        expect(stages()).toHaveLength(1);
      } finally {
        rmSync(filesDirectory, { recursive: true, force: true });
      }
    },
  );
});
