import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
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
  const filesDirectories: string[] = [];
  afterAll(() => {
    for (const directory of [scratch, ...filesDirectories]) rmSync(directory, { recursive: true, force: true });
  });

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

  /** A folder the run uids cannot reach holding a module, a runs root and a sandbox files folder of its own. */
  function privateLayout(name: string, moduleName: string, value: number) {
    const privateDirectory = join(scratch, name);
    const library = join(privateDirectory, 'modules', 'library');
    mkdirSync(library, { recursive: true });
    chmodSync(privateDirectory, 0o700);
    writeFileSync(join(library, `${moduleName}.py`), `VALUE = ${value}\n`);
    const runsRoot = join(privateDirectory, 'runs');
    mkdirSync(runsRoot, { mode: 0o711 });
    // Reachable by the run uids, like the folder the runner picks itself (the scratch folder is not).
    const filesDirectory = mkdtempSync(join(tmpdir(), `codecall-${name}-files-`));
    chmodSync(filesDirectory, 0o711);
    filesDirectories.push(filesDirectory);
    const stages = () => readdirSync(filesDirectory).filter((entry) => entry.startsWith(`stage-${process.pid}-`));
    const code = `import sys\nsys.path.insert(0, ${JSON.stringify(library)})\nimport ${moduleName}\nprint(${moduleName}.VALUE)`;
    return { privateDirectory, library, runsRoot, filesDirectory, stages, code };
  }

  /** Mount namespaces this process holds a descriptor of (a held staging namespace is one). */
  function heldMountNamespaces(): number {
    return readdirSync('/proc/self/fd').filter((descriptor) => {
      try {
        return readlinkSync(join('/proc/self/fd', descriptor)).startsWith('mnt:');
      } catch {
        return false;
      }
    }).length;
  }

  it.skipIf(!hostIsRoot())(
    'as root, the first launch stages inline in its own chain, the next ones enter one namespace held for them',
    async () => {
      const layout = privateLayout('private-inline', 'inline_helper', 5);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      const held = heldMountNamespaces();
      const commands: string[][] = [];
      const launch = () =>
        launchWithRunner({
          runner,
          runsRoot: layout.runsRoot,
          readOnlyPaths: [layout.library],
          code: layout.code,
          onPlan: (plan) => commands.push([plan.command, ...plan.args]),
        });
      const first = await launch();
      expect(first.stderr).toBe('');
      expect(first.stdout).toBe('5\n');
      // No holder: the run's own process made the namespace (unshare), and nothing is held for later.
      expect(commands[0]?.[0]).toMatch(/\/unshare$/);
      expect(commands[0]?.some((argument) => argument.startsWith('--mount=/proc/self/fd/'))).toBe(false);
      expect(heldMountNamespaces()).toBe(held);
      const [stage] = layout.stages();
      expect(readdirSync(join(layout.filesDirectory, stage ?? ''))).toContain('mounts');
      for (const expected of ['6\n', '6\n']) {
        writeFileSync(join(layout.library, 'inline_helper.py'), 'VALUE = 6\n');
        const later = await launch();
        expect(later.stderr).toBe('');
        expect(later.stdout).toBe(expected);
      }
      for (const command of commands.slice(1)) {
        expect(command[0]).toMatch(/\/nsenter$/);
        expect(command[1]).toMatch(/^--mount=\/proc\/self\/fd\/\d+$/);
      }
      // One namespace for both later launches, the same plan (one stage), and its table gone once read.
      expect(heldMountNamespaces()).toBe(held + 1);
      expect(layout.stages()).toEqual([stage]);
      expect(readdirSync(join(layout.filesDirectory, stage ?? ''))).not.toContain('mounts');
    },
  );

  it.skipIf(!hostIsRoot())(
    'as root, close() removes the stage folders before the process exits; a launch after it stages afresh',
    async () => {
      const layout = privateLayout('private-close', 'close_helper', 8);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      const launch = () =>
        launchWithRunner({ runner, runsRoot: layout.runsRoot, readOnlyPaths: [layout.library], code: layout.code });
      expect((await launch()).stdout).toBe('8\n');
      // A second launch holds a namespace made from the plan: its mount points go too.
      expect((await launch()).stdout).toBe('8\n');
      const [stage] = layout.stages();
      expect(stage).toBeDefined();
      await runner.close();
      expect(layout.stages()).toEqual([]);
      const after = await launch();
      expect(after.stderr).toBe('');
      expect(after.stdout).toBe('8\n');
      expect(layout.stages()).toHaveLength(1);
      expect(layout.stages()).not.toContain(stage);
      await runner.close();
      expect(layout.stages()).toEqual([]);
    },
  );

  it.skipIf(!hostIsRoot())(
    'as root, plans the staging ahead of the first run, which stages inline; ahead of the next it holds the namespace',
    async () => {
      const layout = privateLayout('private-ahead', 'ahead_helper', 7);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      const ahead = {
        interpreter: await resolvePythonInterpreter('python3'),
        readOnlyPaths: [dirname(layout.library)],
        runsRoot: layout.runsRoot,
      };
      const held = heldMountNamespaces();
      runner.prepareAhead(ahead);
      expect(layout.stages()).toHaveLength(1);
      const outcome = await launchWithRunner({
        runner,
        runsRoot: layout.runsRoot,
        readOnlyPaths: [layout.library],
        code: layout.code,
      });
      expect(outcome.stderr).toBe('');
      expect(outcome.stdout).toBe('7\n');
      expect(layout.stages()).toHaveLength(1);
      expect(heldMountNamespaces()).toBe(held);
      runner.prepareAhead(ahead);
      expect(await eventually(() => heldMountNamespaces() === held + 1)).toBe(true);
      expect(layout.stages()).toHaveLength(1);
    },
  );

  describe.skipIf(!hostIsRoot()).each([
    ['by its launcher', 'launcher'],
    ['by the host', 'host'],
  ] as const)('as root, an inline staging that cannot mount (cgroups joined %s)', (_, cgroupJoin) => {
    const applies = cgroupJoin === 'host' || sandboxProbe.cgroups.version === 1 || !cgroupsActive;
    it.skipIf(!applies)('says so, naming the roots and what to do', async () => {
      const layout = privateLayout(`private-failing-${cgroupJoin}`, 'failing_helper', 1);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory, cgroupJoin });
      const launched = launchWithRunner({
        runner,
        runsRoot: layout.runsRoot,
        readOnlyPaths: [layout.library],
        code: layout.code,
        // The root is gone by the time the chain mounts it.
        onPlan: () => renameSync(layout.library, `${layout.library}-gone`),
      });
      const message = new RegExp(
        `codecall: cannot make the staging mount namespace for .*"${layout.library}".*\\(mount\\(8\\) failed\\); ` +
          'make these directories reachable by other users or run codecall as a non-root user',
      );
      if (cgroupsActive && cgroupJoin === 'host') {
        // The host waits for bwrap on the control channel: it reads the message there and fails the launch.
        await expect(launched).rejects.toMatchObject({ code: 'SANDBOX_UNAVAILABLE', message });
      } else {
        const outcome = await launched;
        expect(outcome.exitCode).toBe(125);
        expect(outcome.stdout).toBe('');
        expect(outcome.stderr).toMatch(message);
      }
    });
  });

  const rootOnCgroupV1 = hostIsRoot() && cgroupsActive && sandboxProbe.cgroups.version === 1;

  it.skipIf(!rootOnCgroupV1)(
    'as root on cgroup v1, the inline staging shell joins the cgroups as root: no shell after the drop, no tasks file for the run uid',
    async () => {
      const layout = privateLayout('private-root-join', 'root_join_helper', 8);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      let command: string[] = [];
      let directories: string[] = [];
      let tasksOwners: number[] = [];
      let interpreters = 0;
      const outcome = await launchWithRunner({
        runner,
        runsRoot: layout.runsRoot,
        readOnlyPaths: [layout.library],
        code: `${layout.code}
import json, time
print(json.dumps(open("/proc/self/cgroup").read().splitlines()))
time.sleep(1)`,
        onPlan: (plan) => {
          command = [plan.command, ...plan.args];
        },
        whileRunning: async (runId) => {
          await eventually(() => {
            directories = runCgroupDirectories(runId);
            const commands = directories.flatMap((directory) =>
              readFileSync(join(directory, 'cgroup.procs'), 'utf8').trim().split('\n').filter(Boolean).map(commandOf),
            );
            interpreters = commands.filter((name) => name.includes('python')).length;
            return directories.length > 0 && interpreters === directories.length;
          });
          tasksOwners = directories.map((directory) => statSync(join(directory, 'tasks')).uid);
        },
      });
      expect(outcome.stderr).toBe('');
      expect(outcome.stdout.split('\n')[0]).toBe('8');
      expect(command[0]).toMatch(/\/unshare$/);
      // The staging shell got the tasks files; nsenter then becomes bwrap directly.
      const nsenter = command.findIndex((argument) => argument.endsWith('/nsenter'));
      expect(command.slice(0, nsenter).filter((argument) => argument.endsWith('/tasks'))).toHaveLength(
        directories.length,
      );
      const afterDrop = command.slice(nsenter + 1);
      expect(afterDrop[afterDrop.indexOf('--') + 1]).toBe(sandboxProbe.bubblewrap.path);
      expect(afterDrop).not.toContain('/bin/sh');
      expect(directories.length).toBe(new Set(hierarchyRoots()).size);
      expect(interpreters).toBe(directories.length);
      expect(tasksOwners.every((uid) => uid === 0)).toBe(true);
      // Joined before bwrap made the cgroup namespace: the script sees its run cgroup as the root.
      expect(lastJson<string[]>(outcome.stdout).every((line) => line.endsWith(':/'))).toBe(true);
    },
  );

  it.skipIf(!rootOnCgroupV1)(
    "as root on cgroup v1, a staged folder named like the staging shell's separator (--) does not cut its list of cgroups short",
    async () => {
      const layout = privateLayout('private-separator', 'separator_helper', 4);
      const separator = join(dirname(layout.library), '--');
      renameSync(layout.library, separator);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      let directories: string[] = [];
      let interpreters = 0;
      const outcome = await launchWithRunner({
        runner,
        runsRoot: layout.runsRoot,
        readOnlyPaths: [separator],
        code: `import sys, time\nsys.path.insert(0, ${JSON.stringify(separator)})\nimport separator_helper\nprint(separator_helper.VALUE)\ntime.sleep(1)`,
        whileRunning: async (runId) => {
          await eventually(() => {
            directories = runCgroupDirectories(runId);
            interpreters = directories.filter((directory) =>
              readFileSync(join(directory, 'cgroup.procs'), 'utf8')
                .trim()
                .split('\n')
                .filter(Boolean)
                .some((pid) => commandOf(pid).includes('python')),
            ).length;
            return directories.length > 0 && interpreters === directories.length;
          });
        },
      });
      expect(outcome.stderr).toBe('');
      expect(outcome.stdout).toBe('4\n');
      expect(directories.length).toBe(new Set(hierarchyRoots()).size);
      expect(interpreters).toBe(directories.length);
    },
  );

  it.skipIf(!rootOnCgroupV1)(
    'as root on cgroup v1, a first launch that cannot join a cgroup says which and runs nothing of the script',
    async () => {
      const layout = privateLayout('private-root-join-failing', 'root_join_failing_helper', 9);
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      let missing = '';
      const outcome = await launchWithRunner({
        runner,
        runsRoot: layout.runsRoot,
        readOnlyPaths: [layout.library],
        code: layout.code,
        // One cgroup of the run is gone (still empty: nothing joined yet) by the time the shell joins it.
        onPlan: (plan) => {
          const tasks = plan.args.filter((argument) => argument.endsWith('/tasks'));
          missing = tasks[tasks.length - 1] ?? '';
          rmdirSync(dirname(missing));
        },
      });
      expect(missing).not.toBe('');
      expect(outcome.exitCode).toBe(125);
      expect(outcome.stdout).toBe('');
      expect(outcome.stderr).toContain(`codecall: cannot join the run cgroup ${missing}`);
    },
  );

  it.skipIf(!hostIsRoot())(
    'as root, a staged root replaced by a link after the first run is not mounted for the next ones',
    async () => {
      const layout = privateLayout('private-swapped', 'swapped_helper', 3);
      // What a script of the first run could reach if a link made root bind it: a folder it must never see.
      const secret = join(layout.privateDirectory, 'secret');
      mkdirSync(secret, { mode: 0o700 });
      writeFileSync(join(secret, 'swapped_helper.py'), 'VALUE = "secret"\n');
      const runner = await createBubblewrapRunner({ filesDirectory: layout.filesDirectory });
      const launch = () =>
        launchWithRunner({ runner, runsRoot: layout.runsRoot, readOnlyPaths: [layout.library], code: layout.code });
      expect((await launch()).stdout).toBe('3\n');
      renameSync(layout.library, `${layout.library}-moved`);
      symlinkSync(secret, layout.library);
      await expect(launch()).rejects.toMatchObject({
        code: 'SANDBOX_UNAVAILABLE',
        message: expect.stringContaining(`${layout.library} is no longer the directory first seen there`),
      });
    },
  );
});
