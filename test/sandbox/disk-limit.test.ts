import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import {
  bubblewrapUsable,
  cgroupsActive,
  eventually,
  lastJson,
  PRINT_PID_NAMESPACE,
  printedPidNamespace,
  processesInPidNamespace,
  useSandboxedCodecalls,
} from './support/sandbox-fixture.js';

/**
 * Catalogue R8 and issue "Disk is bounded": under bubblewrap everything a run can write (its working directory,
 * TMPDIR, /tmp) lives on one tmpfs of `limits.maxDiskBytes` inside the sandbox. Every test writes past the limit by
 * another way and checks that the run got ENOSPC at the limit, not more.
 */

const MEBIBYTE = 1024 * 1024;
const GIBIBYTE = 1024 * MEBIBYTE;
const DISK_BYTES = 64 * MEBIBYTE;
/** Room for files larger than the disk limit, so RLIMIT_FSIZE (EFBIG) never answers first. */
const LARGE_FILES = { maxDiskBytes: DISK_BYTES, maxFileBytes: 8 * GIBIBYTE };
const codecallWith = useSandboxedCodecalls();

/** Python: fills `directory` with 1 MiB files until a write fails; prints {"error", "written"} as JSON. */
function fillScript(directory: string): string {
  return [
    'import os, errno, json',
    'written = 0',
    'error = None',
    'try:',
    '    for index in range(100_000):',
    `        with open(os.path.join(${directory}, "fill%d" % index), "wb") as handle:`,
    '            handle.write(b"\\1" * (1 << 20))',
    '        written += 1 << 20',
    'except OSError as failure:',
    '    error = errno.errorcode[failure.errno]',
    'print(json.dumps({"error": error, "written": written}))',
  ].join('\n');
}

describe.skipIf(!bubblewrapUsable)('the disk limit of a run under bubblewrap', () => {
  it('refuses posix_fallocate of 4 GiB in the working directory, TMPDIR and /tmp with ENOSPC', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, errno, json',
        'outcome = {}',
        'for place in (".", os.environ["TMPDIR"], "/tmp"):',
        '    descriptor = os.open(os.path.join(place, "reserved"), os.O_CREAT | os.O_WRONLY, 0o600)',
        '    try:',
        '        os.posix_fallocate(descriptor, 0, 4 << 30)',
        '        outcome[place] = "reserved"',
        '    except OSError as error:',
        '        outcome[place] = errno.errorcode[error.errno]',
        '    finally:',
        '        os.close(descriptor)',
        'print(json.dumps(outcome))',
      ].join('\n'),
    );
    expect(result.status, JSON.stringify(result)).toBe('success');
    expect(Object.values(lastJson(result.stdout))).toEqual(['ENOSPC', 'ENOSPC', 'ENOSPC']);
  });

  it('stops many small files at the limit', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, errno, json',
        'count = 0',
        'error = None',
        'try:',
        '    for count in range(1_000_000):',
        '        with open("small%d" % count, "wb") as handle:',
        '            handle.write(b"x" * 4096)',
        'except OSError as failure:',
        '    error = errno.errorcode[failure.errno]',
        'print(json.dumps({"error": error, "count": count}))',
      ].join('\n'),
    );
    const { error, count } = lastJson<{ error: string; count: number }>(result.stdout);
    expect(error).toBe('ENOSPC');
    // One page each: the files stop at the limit, give or take the directory's own pages.
    expect(count).toBeLessThanOrEqual(DISK_BYTES / 4096);
    expect(count).toBeGreaterThan(DISK_BYTES / 4096 / 2);
  });

  it.skipIf(!cgroupsActive)(
    'charges the files to the run memory cgroup: empty files and data past the memory limit end in reason "memory"',
    async () => {
      // The disk limit is above the memory limit here: only the memory cgroup can stop these runs.
      const codecall = codecallWith({
        limits: {
          memoryBytes: 128 * MEBIBYTE,
          maxDiskBytes: 512 * MEBIBYTE,
          maxFileBytes: GIBIBYTE,
          timeoutMs: 60_000,
        },
      });
      const emptyFiles = await codecall.execute(
        'import os\nfor index in range(20_000_000):\n    os.close(os.open("e%d" % index, os.O_CREAT | os.O_WRONLY, 0o600))\nprint("all made")',
      );
      expect(emptyFiles).toMatchObject({ status: 'limit', reason: 'memory' });
      const data = await codecall.execute(fillScript('"."'));
      expect(data.stdout).not.toContain('"error": "ENOSPC"');
      expect(data).toMatchObject({ status: 'limit', reason: 'memory' });
    },
    90_000,
  );

  it('shares one limit between the working directory, TMPDIR and /tmp (they are one tmpfs)', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, errno, json',
        'def fill(place, limit):',
        '    written = 0',
        '    try:',
        '        while written < limit:',
        '            with open(os.path.join(place, "part%d" % written), "wb") as handle:',
        '                handle.write(b"\\1" * (1 << 20))',
        '            written += 1 << 20',
        '    except OSError as error:',
        '        return [errno.errorcode[error.errno], written]',
        '    return ["no error", written]',
        'outcome = [fill(".", 40 << 20), fill(os.environ["TMPDIR"], 1 << 30), fill("/tmp", 1 << 30)]',
        'print(json.dumps(outcome))',
      ].join('\n'),
    );
    const [workDir, tmpDir, tmp] = lastJson<[string, number][]>(result.stdout);
    expect(workDir).toEqual(['no error', 40 * MEBIBYTE]);
    expect(tmpDir?.[0]).toBe('ENOSPC');
    expect(tmp).toEqual(['ENOSPC', 0]);
    expect((workDir?.[1] ?? 0) + (tmpDir?.[1] ?? 0)).toBeLessThanOrEqual(DISK_BYTES);
  });

  it('bounds a sparse file: truncating it to 4 GiB costs nothing, filling its holes stops at the limit', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, errno, json',
        'descriptor = os.open("sparse", os.O_CREAT | os.O_RDWR, 0o600)',
        'os.ftruncate(descriptor, 4 << 30)',
        'size = os.fstat(descriptor).st_size',
        'written = 0',
        'error = None',
        'try:',
        '    for offset in range(0, 4 << 30, 1 << 20):',
        '        os.pwrite(descriptor, b"x" * (1 << 20), offset)',
        '        written += 1 << 20',
        'except OSError as failure:',
        '    error = errno.errorcode[failure.errno]',
        'print(json.dumps({"size": size, "error": error, "stored": os.fstat(descriptor).st_blocks * 512}))',
      ].join('\n'),
    );
    const outcome = lastJson<{ size: number; error: string; stored: number }>(result.stdout);
    expect(outcome.size).toBe(4 * GIBIBYTE);
    expect(outcome.error).toBe('ENOSPC');
    expect(outcome.stored).toBeLessThanOrEqual(DISK_BYTES);
  });

  it('kills a script that writes past the limit through a memory map with SIGBUS, with a hint', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, mmap',
        'descriptor = os.open("mapped", os.O_CREAT | os.O_RDWR, 0o600)',
        'os.ftruncate(descriptor, 256 << 20)',
        'view = mmap.mmap(descriptor, 256 << 20)',
        'for offset in range(0, 256 << 20, 4096):',
        '    view[offset] = 1',
        'print("all written")',
      ].join('\n'),
    );
    expect(result).toMatchObject({ status: 'error', signal: 'SIGBUS' });
    expect(result.stdout).not.toContain('all written');
    expect(result.hint).toContain('64 MiB');
  });

  it('bounds what a subprocess writes', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os, subprocess, json',
        'child = subprocess.run(["/bin/sh", "-c", "head -c 1G /dev/zero > /tmp/from-child"], capture_output=True, text=True)',
        'print(json.dumps({"status": child.returncode, "stderr": child.stderr, "size": os.path.getsize("/tmp/from-child")}))',
      ].join('\n'),
    );
    const outcome = lastJson<{ status: number; stderr: string; size: number }>(result.stdout);
    expect(outcome.status).not.toBe(0);
    expect(outcome.stderr).toContain('No space left on device');
    expect(outcome.size).toBeLessThanOrEqual(DISK_BYTES);
  });

  it('reports an uncaught ENOSPC as a script error with a hint naming the limit (no kill, no reason)', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const result = await codecall.execute('open("big", "wb").write(b"\\0" * (100 << 20))');
    expect(result).toMatchObject({ status: 'error', exitCode: 1, error: { type: 'OSError' } });
    expect(result.reason).toBeUndefined();
    expect(result.error?.message).toContain('No space left on device');
    expect(result.hint).toContain('disk limit of 64 MiB');
  });

  it('writes nothing on the host: the host run directory holds only what the engine put there', async () => {
    let seen: string[] | undefined;
    const listRunDirectory = defineTool({
      name: 'list_run_directory',
      description: 'Lists the host run directory of the calling run, and its tmp/ and artifacts/ folders.',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      execute: async ({ path }: { path: string }) => {
        if (!/\/runs\/[0-9a-f]{16}$/.test(path)) throw new Error(`not a run directory: ${path}`);
        seen = [
          ...readdirSync(path).map((name) => name),
          ...readdirSync(`${path}/tmp`).map((name) => `tmp/${name}`),
          ...readdirSync(`${path}/artifacts`).map((name) => `artifacts/${name}`),
        ].sort();
        return seen.length;
      },
    });
    const codecall = codecallWith({ tools: [listRunDirectory], limits: LARGE_FILES });
    const result = await codecall.execute(
      [
        'import os',
        'from tools import list_run_directory',
        'for place in (".", os.environ["TMPDIR"], os.environ["CODECALL_ARTIFACTS_DIR"]):',
        '    with open(os.path.join(place, "written-inside"), "wb") as handle:',
        '        handle.write(b"x" * 4096)',
        'print(list_run_directory(os.getcwd()))',
      ].join('\n'),
    );
    expect(result.status, JSON.stringify(result)).toBe('success');
    expect(seen).toEqual(['artifacts', 'script.py', 'tmp']);
  });

  it('holds in pooled runs (interpreters started before the run)', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES, pool: { size: 1 } });
    // A pooled interpreter writes its script itself, on the tmpfs; a cold run's script is the engine's, bound in.
    const probe = `import os, json\npooled = not os.path.ismount("script.py")\n${fillScript('os.environ["TMPDIR"]')}\nprint(json.dumps(pooled))`;
    let pooledOutcome: { error: string; written: number } | undefined;
    // The pool refills after each run: try until a run found an interpreter waiting.
    for (let attempt = 0; attempt < 10 && pooledOutcome === undefined; attempt++) {
      const result = await codecall.execute(probe);
      const lines = result.stdout.trim().split('\n');
      if (lines.at(-1) === 'true') pooledOutcome = JSON.parse(lines.at(-2) ?? 'null');
      else await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(pooledOutcome?.error).toBe('ENOSPC');
    expect(pooledOutcome?.written).toBeLessThanOrEqual(DISK_BYTES);
  });

  it('holds for a session as a whole: files persist between cells and count together; reset frees them', async () => {
    const codecall = codecallWith({ limits: LARGE_FILES });
    const session = codecall.session();
    try {
      const first = await session.execute(
        'with open("kept", "wb") as handle:\n    handle.write(b"\\1" * (40 << 20))\nprint("kept")',
      );
      expect(first.stdout).toBe('kept\n');
      const second = await session.execute(fillScript('"/tmp"'));
      const outcome = lastJson<{ error: string; written: number }>(second.stdout);
      expect(outcome.error).toBe('ENOSPC');
      expect(outcome.written).toBeLessThanOrEqual(DISK_BYTES - 40 * MEBIBYTE);
      await session.reset();
      const fresh = await session.execute(fillScript('"."'));
      const afterReset = lastJson<{ error: string; written: number }>(fresh.stdout);
      expect(afterReset.error).toBe('ENOSPC');
      expect(afterReset.written).toBeGreaterThan(DISK_BYTES - 8 * MEBIBYTE);
    } finally {
      await session.close();
    }
  }, 60_000);

  it('frees everything after the run: the sandbox and its tmpfs are gone, and so is the memory they held', async () => {
    const shmem = () => {
      const match = /^Shmem:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
      return Number(match?.[1] ?? Number.NaN) * 1024;
    };
    let during = 0;
    const measure = defineTool({
      name: 'measure_shared_memory',
      description: 'Reads the host shared memory (tmpfs) in use.',
      inputSchema: { type: 'object', properties: {} },
      execute: async () => {
        during = shmem();
        return during;
      },
    });
    const codecall = codecallWith({
      tools: [measure],
      limits: { maxDiskBytes: 256 * MEBIBYTE, maxFileBytes: GIBIBYTE },
    });
    const result = await codecall.execute(
      [
        PRINT_PID_NAMESPACE,
        'from tools import measure_shared_memory',
        'print("mntns", os.readlink("/proc/self/ns/mnt"))',
        'with open("held", "wb") as handle:',
        '    for _ in range(200):',
        '        handle.write(b"\\1" * (1 << 20))',
        'measure_shared_memory()',
      ].join('\n'),
    );
    expect(result.status, JSON.stringify(result)).toBe('success');
    const pidNamespace = printedPidNamespace(result.stdout);
    const mountNamespace = /mntns (mnt:\[\d+\])/.exec(result.stdout)?.[1];
    expect(await eventually(() => processesInPidNamespace(pidNamespace).length === 0)).toBe(true);
    expect(await eventually(() => !mountNamespaceInUse(mountNamespace ?? ''))).toBe(true);
    // 200 MiB were in the tmpfs during the run; at least half of it is back (other processes of the machine move too).
    expect(await eventually(() => during - shmem() > 100 * MEBIBYTE)).toBe(true);
  });
});

describe.skipIf(!bubblewrapUsable)('the disk limit with a state folder outside /tmp', () => {
  // /var/tmp is on the host's disk, like a configured state folder would be; nothing is written there but the script.
  const stateDir = mkdtempSync('/var/tmp/codecall-disk-');
  const workspace = mkdtempSync(join(tmpdir(), 'codecall-disk-workspace-'));
  afterAll(() => {
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(workspace, { recursive: true, force: true });
  });
  const probe = [
    'import os, errno, json',
    'def fill(place):',
    '    written = 0',
    '    try:',
    '        while True:',
    '            with open(os.path.join(place, "part%d" % written), "wb") as handle:',
    '                handle.write(b"\\1" * (1 << 20))',
    '            written += 1 << 20',
    '    except OSError as error:',
    '        return [errno.errorcode[error.errno], written]',
    'tmp = "link" if os.path.islink("/tmp") else "mount" if os.path.ismount("/tmp") else "other"',
    'print(json.dumps({"tmp": tmp, "target": os.path.realpath("/tmp"), "tmpdir": os.environ["TMPDIR"],',
    '                  "work": fill("."), "slash_tmp": fill("/tmp")}))',
  ].join('\n');

  it('mounts the tmpfs on the run directory and makes /tmp a link to its TMPDIR: one limit for all', async () => {
    const codecall = codecallWith({ stateDir, limits: LARGE_FILES });
    const result = await codecall.execute(probe);
    const outcome = lastJson<{
      tmp: string;
      target: string;
      tmpdir: string;
      work: [string, number];
      slash_tmp: [string, number];
    }>(result.stdout);
    expect(outcome.tmp).toBe('link');
    expect(outcome.target).toBe(outcome.tmpdir);
    expect(outcome.work[0]).toBe('ENOSPC');
    expect(outcome.work[1]).toBeLessThanOrEqual(DISK_BYTES);
    expect(outcome.slash_tmp).toEqual(['ENOSPC', 0]);
  });

  it('gives /tmp a tmpfs of its own, of the same size, when another mount lies inside /tmp', async () => {
    const codecall = codecallWith({ stateDir, workspace, workspaceMount: 'read-only', limits: LARGE_FILES });
    const result = await codecall.execute(probe.replace('fill(".")', 'fill(os.environ["HOME"])'));
    const outcome = lastJson<{ tmp: string; work: [string, number]; slash_tmp: [string, number] }>(result.stdout);
    expect(outcome.tmp).toBe('mount');
    for (const [error, written] of [outcome.work, outcome.slash_tmp]) {
      expect(error).toBe('ENOSPC');
      expect(written).toBeLessThanOrEqual(DISK_BYTES);
      expect(written).toBeGreaterThan(DISK_BYTES / 2);
    }
    expect(readdirSync(workspace)).toEqual([]);
  });
});

/** Whether any process of the machine is in this mount namespace. */
function mountNamespaceInUse(namespace: string): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/mnt`) === namespace) return true;
    } catch {
      // Gone while we looked.
    }
  }
  return false;
}
