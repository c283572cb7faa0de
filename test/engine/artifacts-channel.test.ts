import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExecuteResult } from '../../src/core/result.js';
import type { WorkspaceMount } from '../../src/core/workspace-mount.js';
import { formatResultForModel } from '../../src/engine/result/format-result.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();
const scratch = mkdtempSync(join(tmpdir(), 'codecall-artifact-canaries-'));
chmodSync(scratch, 0o755);
let canaries = 0;

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A host folder with files every user can read (the script could read them anyway): none may move or change. */
function canaryFolder(): { folder: string; check: () => void } {
  canaries += 1;
  const folder = join(scratch, `canary-${canaries}`);
  mkdirSync(folder, { mode: 0o755 });
  const files = { 'keep.png': 'canary png', 'keep.txt': 'canary text' };
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(folder, name), text);
    chmodSync(join(folder, name), 0o644);
  }
  return {
    folder,
    check: () => {
      expect(readdirSync(folder).sort()).toEqual(Object.keys(files).sort());
      for (const [name, text] of Object.entries(files)) expect(readFileSync(join(folder, name), 'utf8')).toBe(text);
    },
  };
}

/** Lines of Python replacing the artifacts folder by a link to `target`. */
function swapArtifactsFor(target: string): string[] {
  return [
    'import os, shutil',
    'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
    'shutil.rmtree(artifacts)',
    `os.symlink(${JSON.stringify(target)}, artifacts)`,
  ];
}

const bytesOf = (path: string) => readFileSync(path);
const namesOf = (result: { artifacts?: readonly { path: string }[] | undefined }) =>
  (result.artifacts ?? []).map((artifact) => basename(artifact.path)).sort();

describe.each([
  ['a cold run', 0],
  ['a pooled run', 1],
])('artifacts through the channel in %s', (_name, size) => {
  const codecall = codecallWith({ pool: { size } });

  it('returns save_artifact data (bytes and str) and a file of the artifacts folder with their exact bytes', async () => {
    const result = await codecall.execute(
      [
        'import os',
        'from codecall_runtime import save_artifact',
        'print(save_artifact("data.bin", bytes(range(256)) * 4000))',
        'print(save_artifact("data.bin", "second"))',
        'with open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "notes.md"), "w") as file:',
        '    file.write("# notes\\n")',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'data.bin\ndata-2.bin\n' });
    expect(namesOf(result)).toEqual(['data-2.bin', 'data.bin', 'notes.md']);
    const byName = new Map(result.artifacts?.map((artifact) => [basename(artifact.path), artifact]));
    const pattern = Buffer.from(Array.from({ length: 256 }, (_, index) => index));
    // Compared with equals(): a deep toEqual of a megabyte takes seconds.
    expect(bytesOf(byName.get('data.bin')?.path ?? '').equals(Buffer.concat(Array(4000).fill(pattern)))).toBe(true);
    expect(byName.get('data.bin')).toMatchObject({ mimeType: 'application/octet-stream', bytes: 256 * 4000 });
    expect(bytesOf(byName.get('data-2.bin')?.path ?? '').toString()).toBe('second');
    expect(byName.get('notes.md')).toMatchObject({ mimeType: 'text/markdown', bytes: 8 });
    // The host's copy is in its own outputs folder, not in the (removed) run directory.
    expect(byName.get('notes.md')?.path).toMatch(/\/outputs\/[^/]+\/notes\.md$/);
  });

  it('never moves host files when the artifacts folder is a link to a host folder (canaries stay)', async () => {
    const canary = canaryFolder();
    const result = await codecall.execute(swapArtifactsFor(canary.folder).join('\n'));
    expect(result.status).toBe('success');
    canary.check();
  });

  it('never reads through a link named like an artifact (/etc/shadow), and a FIFO does not hang the run', async () => {
    const result = await codecall.execute(
      [
        'import os',
        'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
        'os.symlink("/etc/shadow", os.path.join(artifacts, "secret.txt"))',
        'os.symlink("/etc/passwd", os.path.join(artifacts, "passwd.txt"))',
        'os.mkfifo(os.path.join(artifacts, "pipe.png"))',
        'os.mkfifo("chart.png")',
        'open(os.path.join(artifacts, "real.txt"), "w").write("real")',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    expect(namesOf(result)).toEqual(['real.txt']);
  });

  it('refuses forged $artifact frames: traversal and absolute names, control characters, an unfinished one', async () => {
    const forged = [
      { name: '../escape.txt', offset: 0, data: 'eA==', final: true },
      { name: '/etc/forged.txt', offset: 0, data: 'eA==', final: true },
      { name: 'a\nb.txt', offset: 0, data: 'eA==', final: true },
      { name: 'huge.bin', offset: 0, data: 'eA==', final: false },
      { name: 'huge.bin', offset: 1024 ** 3, data: 'eA==', final: true },
    ];
    const result = await codecall.execute(
      [
        'import json',
        'from codecall_runtime import get_channel',
        'channel = get_channel()',
        `for params in json.loads(${JSON.stringify(JSON.stringify(forged))}):`,
        '    channel._send((json.dumps({"method": "$artifact", "params": params}) + "\\n").encode())',
        'print("sent")',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'sent\n' });
    expect(result.artifacts).toBeUndefined();
    expect(result.artifactsNote).toContain('3 malformed frame(s) or unusable name(s)');
    expect(readdirSync('/etc').includes('forged.txt')).toBe(false);
    expect(formatResultForModel(result)).toContain('[artifacts] artifacts dropped');
  });

  it('sends images the script saved in its working directory, and says so to the model', async () => {
    const result = await codecall.execute('open("plot.svg", "w").write("<svg/>")');
    expect(namesOf(result)).toEqual(['plot.svg']);
    expect(formatResultForModel(result)).toBe(
      '(the script printed nothing; it saved the files below)\n[artifact] plot.svg (image/svg+xml, 6 bytes)\n',
    );
  });
});

/** A workspace the run uid may write, holding an image saved an hour before the run. */
function workspaceWithOldImage(name: string): string {
  const workspace = join(scratch, name);
  mkdirSync(workspace, { mode: 0o777 });
  chmodSync(workspace, 0o777);
  writeFileSync(join(workspace, 'old.png'), 'an old chart');
  const anHourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(join(workspace, 'old.png'), anHourAgo, anHourAgo);
  return workspace;
}

describe.each<[string, number, WorkspaceMount]>([
  ['a cold run', 0, 'read-write'],
  ['a pooled run', 1, 'read-write'],
  ['a cold run', 0, 'copy'],
  ['a pooled run', 1, 'copy'],
])('images saved in the workspace as working directory: %s (pool size %i), mode %s', (_name, size, mount) => {
  it('returns the image the script saved, never one the workspace held before', async () => {
    const workspace = workspaceWithOldImage(`images-${size}-${mount}`);
    const codecall = codecallWith({ pool: { size }, workspace, workspaceMount: mount });
    const result = await codecall.execute(
      'import os\nprint(sorted(os.listdir(".")))\nopen("new.png", "wb").write(b"a new chart")',
    );
    expect(result).toMatchObject({ status: 'success', stdout: "['old.png']\n" });
    expect(namesOf(result)).toEqual(['new.png']);
  });
});

describe('artifacts of session cells', () => {
  const codecall = codecallWith();

  it('sends each cell its own artifacts, and a thread swapping links between cells moves no host file', async () => {
    const canary = canaryFolder();
    const session = codecall.session();
    const first = await session.execute(
      [
        'from codecall_runtime import save_artifact',
        'save_artifact("cell-one.txt", "one")',
        'open("one.png", "wb").write(b"png one")',
      ].join('\n'),
    );
    expect(namesOf(first)).toEqual(['cell-one.txt', 'one.png']);
    const swapping = await session.execute(
      [
        'import os, shutil, threading, time',
        'artifacts = os.environ["CODECALL_ARTIFACTS_DIR"]',
        'open(os.path.join(artifacts, "kept.txt"), "w").write("kept")',
        'def swap():',
        '    while True:',
        '        try:',
        `            os.symlink(${JSON.stringify(canary.folder)}, artifacts + ".link")`,
        '            os.rename(artifacts, artifacts + ".real")',
        '            os.rename(artifacts + ".link", artifacts)',
        '            time.sleep(0.001)',
        '            os.rename(artifacts, artifacts + ".link")',
        '            os.rename(artifacts + ".real", artifacts)',
        '            os.unlink(artifacts + ".link")',
        '        except OSError:',
        '            pass',
        'threading.Thread(target=swap, daemon=True).start()',
        'time.sleep(0.2)',
      ].join('\n'),
    );
    expect(swapping.status).toBe('success');
    for (let cell = 0; cell < 5; cell++) {
      const result = await session.execute('import time\ntime.sleep(0.05)');
      expect(result.status).toBe('success');
    }
    canary.check();
    // What the thread's links let the script read it may send (copies: it could read them anyway); nothing moves.
    const unchanged = await session.execute('print("still here")');
    expect(unchanged.stdout).toBe('still here\n');
    await session.close();
    canary.check();
  });
});

/** The result of `code` run as a cell of `session`, which must succeed (the result is shown when it does not). */
async function succeeded(
  session: { execute(code: string): Promise<ExecuteResult> },
  code: string,
): Promise<ExecuteResult> {
  const result = await session.execute(code);
  expect(result.status, JSON.stringify(result)).toBe('success');
  return result;
}

describe('files of session cells that are looked for only when something changed', () => {
  const codecall = codecallWith();

  it('finds an image rewritten in place, a file a subprocess wrote, an image saved after a chdir, and files of a replaced artifacts folder', async () => {
    const session = codecall.session();
    const cell = async (code: string) => namesOf(await succeeded(session, code));
    await cell('import os, shutil, subprocess\nartifacts = os.environ["CODECALL_ARTIFACTS_DIR"]');
    expect(await cell('open("picture.png", "wb").write(b"first")')).toEqual(['picture.png']);
    expect(await cell('x = 1')).toEqual([]);
    expect(await cell('with open("picture.png", "r+b") as handle:\n    handle.write(b"second version")')).toEqual([
      'picture.png',
    ]);
    expect(
      await cell('subprocess.run(["sh", "-c", "printf x > \\"$0/from-shell.txt\\"", artifacts], check=True)'),
    ).toEqual(['from-shell.txt']);
    expect(
      await cell('os.makedirs("sub", exist_ok=True)\nos.chdir("sub")\nopen("in-sub.png", "wb").write(b"sub")'),
    ).toEqual(['in-sub.png']);
    expect(await cell('open("again.png", "wb").write(b"again")\nos.chdir("..")')).toEqual([]);
    expect(await cell('shutil.rmtree(artifacts)\nos.mkdir(artifacts)')).toEqual([]);
    expect(await cell('open(os.path.join(artifacts, "after.txt"), "w").write("after")')).toEqual(['after.txt']);
    expect(await cell('open(os.path.join(artifacts, "later.txt"), "w").write("later")')).toEqual(['later.txt']);
    expect(await cell('x = 2')).toEqual([]);
    expect(await cell('open(os.path.join(artifacts, "last.txt"), "w").write("last")')).toEqual(['last.txt']);
    await session.close();
  });

  it('finds an image saved after the working directory changed through os.fchdir, a thread, or a ctypes function looked up earlier', async () => {
    const session = codecall.session();
    const cell = async (code: string) => namesOf(await succeeded(session, code));
    await cell(
      'import os, threading\nfor name in ("by-fd", "by-thread", "by-ctypes"):\n    os.makedirs(name, exist_ok=True)',
    );
    expect(await cell('x = 1')).toEqual([]);
    expect(
      await cell('folder = os.open("by-fd", os.O_RDONLY)\nos.fchdir(folder)\nopen("fd.png", "wb").write(b"fd")'),
    ).toEqual(['fd.png']);
    expect(await cell('open("fd-again.png", "wb").write(b"again")\nos.chdir("..")')).toEqual([]);
    expect(
      await cell(
        'mover = threading.Thread(target=os.chdir, args=("by-thread",))\nmover.start()\nmover.join()\nopen("thread.png", "wb").write(b"t")',
      ),
    ).toEqual(['thread.png']);
    expect(await cell('os.chdir("..")\nx = 2')).toEqual([]);
    // The function is looked up (an audit event) in one cell and called in later ones, where no audit event comes.
    expect(await cell('import ctypes\nchdir = ctypes.CDLL(None).chdir\nx = 3')).toEqual([]);
    expect(await cell('x = 4')).toEqual([]);
    expect(await cell('chdir(b"by-ctypes")\nopen("ctypes.png", "wb").write(b"c")')).toEqual(['ctypes.png']);
    expect(await cell('chdir(b"..")\nopen("back.png", "wb").write(b"b")')).toEqual(['back.png']);
    await session.close();
  });

  it('finds the files of a cell that put an empty pipe where the watch descriptor was, and never reads the pipe', async () => {
    const session = codecall.session();
    const cell = (code: string) => succeeded(session, code);
    await cell('import os\nartifacts = os.environ["CODECALL_ARTIFACTS_DIR"]');
    // The watch's number, found as the script could: a pipe with nothing in it then takes it (a poll of it says
    // "nothing happened", like a quiet watch), and a byte written to it later must still be there.
    const swapped = await cell(
      [
        'def link(name):',
        '    try:',
        '        return os.readlink("/proc/self/fd/" + name)',
        '    except OSError:',
        '        return ""',
        'watch = [int(name) for name in os.listdir("/proc/self/fd") if link(name) == "anon_inode:inotify"]',
        'read_end, write_end = os.pipe()',
        'os.dup2(read_end, watch[0])',
        'open(os.path.join(artifacts, "after-swap.txt"), "w").write("x")',
        'print(len(watch))',
      ].join('\n'),
    );
    expect(swapped.stdout).toBe('1\n');
    expect(namesOf(swapped)).toEqual(['after-swap.txt']);
    expect(namesOf(await cell('open(os.path.join(artifacts, "next.txt"), "w").write("y")'))).toEqual(['next.txt']);
    const untouched = await cell('os.write(write_end, b"z")\nprint(os.read(watch[0], 1))');
    expect(untouched.stdout).toBe("b'z'\n");
    await session.close();
  });
});

describe('files a tool saves in its artifacts folder', () => {
  const saveFile = defineTool({
    name: 'save_file',
    description: 'Saves a file where the caller receives it as an artifact.',
    inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    execute: ({ name }: { name: string }, context) => {
      mkdirSync(context.artifactsDir, { recursive: true, mode: 0o700 });
      writeFileSync(join(context.artifactsDir, name), `saved by the tool as ${name}`);
      return name;
    },
  });

  it.each([
    ['a cold run', 0],
    ['a pooled run', 1],
  ])('come back as artifacts of %s', async (_name, size) => {
    const codecall = codecallWith({ tools: [saveFile], pool: { size } });
    const result = await codecall.execute('from tools import save_file\nprint(save_file(name="chart.png"))');
    expect(result).toMatchObject({ status: 'success', stdout: 'chart.png\n' });
    expect(namesOf(result)).toEqual(['chart.png']);
    expect(readFileSync(result.artifacts?.[0]?.path ?? '', 'utf8')).toBe('saved by the tool as chart.png');
    const without = await codecall.execute('print(1)');
    expect(without.artifacts ?? []).toEqual([]);
  });

  it('come back with the cell whose call saved them', async () => {
    const session = codecallWith({ tools: [saveFile] }).session();
    expect(namesOf(await session.execute('x = 1'))).toEqual([]);
    const saving = await session.execute('from tools import save_file\nsave_file(name="one.txt")');
    expect(namesOf(saving)).toEqual(['one.txt']);
    expect(namesOf(await session.execute('x += 1'))).toEqual([]);
    expect(namesOf(await session.execute('save_file(name="two.txt")'))).toEqual(['two.txt']);
    await session.close();
  });
});

/** Whether Debian's interpreter has matplotlib (python3-matplotlib); the chart test says why it is skipped otherwise. */
function systemMatplotlib(): boolean {
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import matplotlib.pyplot'], { encoding: 'utf8' });
  if (probe.status !== 0) console.log('skipped: /usr/bin/python3 cannot import matplotlib (python3-matplotlib)');
  return probe.status === 0;
}

describe.runIf(systemMatplotlib())('matplotlib charts come back as PNG artifacts', () => {
  const codecall = codecallWith({ python: '/usr/bin/python3' });

  it('sends a figure left open and one shown with plt.show(), with the Agg backend by default', async () => {
    const result = await codecall.execute(
      [
        'import matplotlib',
        'import matplotlib.pyplot as plt',
        'print(matplotlib.get_backend())',
        'plt.plot([1, 2, 3], [3, 1, 2])',
        'plt.show()',
        'plt.figure()',
        'plt.bar(["a", "b"], [1, 2])',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'success', stdout: 'agg\n' });
    expect(namesOf(result)).toEqual(['figure-1.png', 'figure-2.png']);
    for (const artifact of result.artifacts ?? []) {
      expect(artifact.mimeType).toBe('image/png');
      expect(bytesOf(artifact.path).subarray(0, 8).toString('latin1')).toBe('\x89PNG\r\n\x1a\n');
    }
  });
});
