import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import {
  bubblewrapUsable,
  isRunUid,
  lastJson,
  sandboxProbe,
  useSandboxedCodecalls,
} from './support/sandbox-fixture.js';

/** Catalogue section E (escape and leak), each item run as a script under `sandbox: "bubblewrap"`. */

const HOST_SECRET = 'sk-codecall-test-host-secret-4f1b';
process.env.CODECALL_TEST_OPENAI_API_KEY = HOST_SECRET;

const codecallWith = useSandboxedCodecalls();

function listen(server: Server, ...where: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    (server.listen as (...parameters: unknown[]) => void)(...where, () => resolve());
  });
}

describe.skipIf(!bubblewrapUsable)('escape and leak (catalogue E) under bubblewrap', () => {
  // Output as printed: masking would hide the very leak of a host secret these tests look for.
  const codecall = codecallWith({ redactSecrets: false });
  const servers: Server[] = [];
  const scratch = mkdtempSync(join(tmpdir(), 'codecall-escape-'));
  afterAll(() => {
    for (const server of servers) server.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('reports isolation "bubblewrap" and runs as an unprivileged uid of its own', async () => {
    const result = await codecall.execute('import os\nprint(os.getuid(), os.getgid())');
    expect(result).toMatchObject({ status: 'success', isolation: 'bubblewrap' });
    const [uid, gid] = result.stdout.trim().split(' ').map(Number);
    expect(isRunUid(uid as number)).toBe(true);
    expect(gid).toBe(uid);
  });

  it('E1: the environment holds only allow-listed variables, no host secret, PATH or HOME', async () => {
    const result = await codecall.execute('import os, json\nprint(json.dumps(dict(os.environ)))');
    expect(result.status).toBe('success');
    const environment = lastJson<Record<string, string>>(result.stdout);
    expect(JSON.stringify(environment)).not.toContain(HOST_SECRET);
    // The interpreter's own commands (python, python3) first, then the system directories only.
    expect(environment.PATH).toMatch(/^[^:]*\/modules\/bin-[0-9a-f]{16}:\/usr\/local\/bin:\/usr\/bin:\/bin$/);
    expect(environment.HOME).not.toBe(process.env.HOME);
    for (const name of Object.keys(environment)) {
      expect(name).toMatch(
        /^(PATH|HOME|PWD|TMPDIR|LANG|LC_ALL|TZ|PYTHON\w+|MALLOC_ARENA_MAX|MPLBACKEND|CODECALL_\w+)$/,
      );
    }
  });

  it('E2: /proc/1/environ (bwrap itself) shows no host secret', async () => {
    const result = await codecall.execute('print(repr(open("/proc/1/environ", "rb").read()))');
    expect(result.status).toBe('success');
    expect(result.stdout).not.toContain(HOST_SECRET);
    expect(result.stdout).toBe("b''\n");
  });

  it('E3: /etc/shadow and ~/.ssh are not there', async () => {
    const result = await codecall.execute(
      [
        'import os, json',
        'found = {}',
        'for path in ["/etc/shadow", os.path.expanduser("~/.ssh/id_rsa"), "/root/.ssh/id_rsa", "/home"]:',
        '    try:',
        '        open(path).read(); found[path] = "read"',
        '    except OSError as error:',
        '        found[path] = error.errno',
        'print(json.dumps(found))',
      ].join('\n'),
    );
    const found = lastJson<Record<string, unknown>>(result.stdout);
    for (const outcome of Object.values(found)) expect([2, 13]).toContain(outcome);
  });

  it('E5, R9: everything outside the run directory is read-only (/usr, /, /dev, /etc)', async () => {
    const result = await codecall.execute(
      [
        'import json',
        'outcome = {}',
        'for path in ["/usr/evil", "/evil", "/dev/evil", "/etc/evil", "/proc/evil"]:',
        '    try:',
        '        open(path, "w").write("x"); outcome[path] = "written"',
        '    except OSError as error:',
        '        outcome[path] = error.strerror',
        'open("inside.txt", "w").write("ok")',
        'print(json.dumps(outcome))',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const outcome = lastJson<Record<string, string>>(result.stdout);
    expect(outcome['/usr/evil']).toBe('Read-only file system');
    expect(outcome['/evil']).toBe('Read-only file system');
    expect(outcome['/dev/evil']).toBe('Read-only file system');
    expect(outcome['/etc/evil']).toBe('Read-only file system');
    expect(outcome['/proc/evil']).not.toBe('written');
  });

  it('E6: mount(2) is refused (no capabilities, seccomp)', async () => {
    const result = await codecall.execute(
      [
        'import ctypes, ctypes.util, os',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'MS_REMOUNT, MS_BIND = 32, 4096',
        'status = libc.mount(b"none", b"/usr", None, MS_REMOUNT | MS_BIND, None)',
        'print(status, os.strerror(ctypes.get_errno()))',
      ].join('\n'),
    );
    expect(result.stdout).toBe('-1 Operation not permitted\n');
  });

  it('E8: a hard link to a system file fails with EXDEV', async () => {
    const result = await codecall.execute(
      'import os, sys\ntry:\n    os.link(sys.executable, "h")\nexcept OSError as error:\n    print(error.errno == 18, error.strerror)',
    );
    expect(result.stdout).toBe('True Invalid cross-device link\n');
  });

  // At once, because nothing can be waited for: the only interface is loopback (no route out, so connect fails in the
  // kernel) and there is no resolver configuration (so the lookup asks loopback, where nothing listens).
  it('E9: network connections fail at once (no route, no DNS)', async () => {
    const result = await codecall.execute(
      [
        'import os, socket, json',
        'outcome = {}',
        'outcome["interfaces"] = [name for _, name in socket.if_nameindex()]',
        'outcome["resolver"] = os.path.exists("/etc/resolv.conf")',
        'try:',
        '    socket.create_connection(("1.1.1.1", 443), timeout=3)',
        '    outcome["ip"] = "connected"',
        'except OSError as error:',
        '    outcome["ip"] = error.strerror',
        'try:',
        '    socket.getaddrinfo("example.com", 443)',
        '    outcome["dns"] = "resolved"',
        'except OSError as error:',
        '    outcome["dns"] = type(error).__name__',
        'print(json.dumps(outcome))',
      ].join('\n'),
    );
    const outcome = lastJson<{ interfaces: string[]; resolver: boolean; ip: string; dns: string }>(result.stdout);
    expect(outcome).toEqual({ interfaces: ['lo'], resolver: false, ip: 'Network is unreachable', dns: 'gaierror' });
  });

  it('with network: true the sandbox shares the host network and sees its DNS configuration', async () => {
    const networked = codecallWith({ network: true });
    const result = await networked.execute(
      'import socket, os, json\nprint(json.dumps([[n for _, n in socket.if_nameindex()], os.path.exists("/etc/resolv.conf")]))',
    );
    const [interfaces, resolverConfigured] = lastJson<[string[], boolean]>(result.stdout);
    expect(interfaces).toEqual(expect.arrayContaining(Object.keys(networkInterfaces())));
    expect(resolverConfigured).toBe(existsSync('/etc/resolv.conf'));
  });

  it("E10: the host's loopback services are unreachable (private loopback)", async () => {
    const server = createServer((socket) => socket.end('host service\n'));
    servers.push(server);
    await listen(server, 0, '127.0.0.1');
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const result = await codecall.execute(
      `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${port}), timeout=3)\n    print("connected")\nexcept OSError as error:\n    print(type(error).__name__)`,
    );
    expect(result.stdout).toBe('ConnectionRefusedError\n');
  });

  it('E11: abstract Unix sockets of the host are unreachable', async () => {
    const name = `codecall-test-${process.pid}-${Date.now()}`;
    const server = createServer((socket) => socket.end('host\n'));
    servers.push(server);
    await listen(server, `\0${name}`);
    const result = await codecall.execute(
      `import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect("\\0${name}")\n    print("connected")\nexcept OSError as error:\n    print(type(error).__name__)`,
    );
    expect(result.stdout).toBe('ConnectionRefusedError\n');
  });

  it("E12: another run's (or the host's) socket path is not visible", async () => {
    const path = join(scratch, 'other-run.sock');
    const server = createServer((socket) => socket.end('host\n'));
    servers.push(server);
    await listen(server, path);
    const result = await codecall.execute(
      `import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(${JSON.stringify(path)})\n    print("connected")\nexcept OSError as error:\n    print(type(error).__name__)`,
    );
    expect(result.stdout).toBe('FileNotFoundError\n');
  });

  it('E13: /proc lists only the sandbox processes; the host is invisible', async () => {
    const result = await codecall.execute(
      'import os, json\nprint(json.dumps(sorted(int(p) for p in os.listdir("/proc") if p.isdigit())))',
    );
    const pids = lastJson<number[]>(result.stdout);
    expect(pids.length).toBeLessThanOrEqual(3);
    expect(Math.max(...pids)).toBeLessThan(10);
    expect(pids).not.toContain(process.pid);
  });

  it('E14: ptrace(PTRACE_ATTACH, 1) is refused by seccomp', async () => {
    const result = await codecall.execute(
      [
        'import ctypes, os',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'status = libc.ptrace(16, 1, None, None)',
        'print(status, os.strerror(ctypes.get_errno()))',
      ].join('\n'),
    );
    expect(sandboxProbe.seccomp).toBe(true);
    expect(result.stdout).toBe('-1 Operation not permitted\n');
  });

  it('E15: killing its parent and every process it can see leaves host processes alone, even of its own uid', async () => {
    // Host processes of the very uid the run has (started by a tool, once the script said which) and of `nobody`:
    // only the pid namespace keeps them out of reach.
    const bystanders: ChildProcess[] = [];
    const startBystander = defineTool({
      name: 'start_bystander',
      description: 'Starts a sleeping host process as the given uid.',
      inputSchema: { type: 'object', properties: { uid: { type: 'integer' } }, required: ['uid'] },
      execute: async ({ uid }: { uid: number }) => {
        if (!isRunUid(uid)) throw new Error(`not a run uid: ${uid}`);
        const bystander = spawn('sleep', ['30'], {
          stdio: 'ignore',
          ...(process.getuid?.() === 0 ? { uid, gid: uid } : {}),
        });
        bystanders.push(bystander);
        return bystander.pid;
      },
    });
    bystanders.push(
      spawn('sleep', ['30'], { stdio: 'ignore', ...(process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {}) }),
    );
    const withTool = codecallWith({ tools: [startBystander] });
    try {
      const result = await withTool.execute(
        [
          'import os, signal',
          'from tools import start_bystander',
          'start_bystander(uid=os.getuid())',
          'for target in (os.getppid(), -1):',
          '    try:',
          '        os.kill(target, signal.SIGKILL)',
          '    except OSError as error:',
          '        print(target, error.strerror)',
          'print("still here")',
        ].join('\n'),
      );
      expect(result.stdout).toContain('still here');
      expect(bystanders).toHaveLength(2);
      for (const bystander of bystanders) {
        expect(bystander.exitCode).toBeNull();
        expect(bystander.signalCode).toBeNull();
        expect(() => process.kill(bystander.pid as number, 0)).not.toThrow();
      }
    } finally {
      for (const bystander of bystanders) bystander.kill('SIGKILL');
    }
  });

  it('E17: TIOCSTI terminal injection is refused', async () => {
    const result = await codecall.execute(
      'import fcntl, termios\ntry:\n    fcntl.ioctl(0, termios.TIOCSTI, b"x")\n    print("injected")\nexcept OSError as error:\n    print(error.strerror)',
    );
    expect(result.stdout).toBe('Operation not permitted\n');
  });

  it('E18: setuid(0) fails, no effective capabilities, no_new_privs set', async () => {
    const result = await codecall.execute(
      [
        'import os, json',
        'status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)',
        'try:',
        '    os.setuid(0)',
        '    setuid = "became root"',
        'except OSError as error:',
        '    setuid = error.strerror',
        'print(json.dumps({"setuid": setuid, "CapEff": status["CapEff"].strip(), "CapPrm": status["CapPrm"].strip(),',
        '    "CapBnd": status["CapBnd"].strip(), "NoNewPrivs": status["NoNewPrivs"].strip()}))',
      ].join('\n'),
    );
    // EINVAL: uid 0 does not even exist in the sandbox's user namespace.
    expect(lastJson(result.stdout)).toEqual({
      setuid: 'Invalid argument',
      CapEff: '0000000000000000',
      CapPrm: '0000000000000000',
      CapBnd: '0000000000000000',
      NoNewPrivs: '1',
    });
  });

  it('E19: the script holds only stdio and the tool channel', async () => {
    const result = await codecall.execute(
      'import os, json\nentries = os.listdir("/proc/self/fd")\nprint(json.dumps(sorted(int(e) for e in entries)))',
    );
    const descriptors = lastJson<number[]>(result.stdout);
    // The one descriptor past the channel is the directory listing itself.
    expect(descriptors.slice(0, 4)).toEqual([0, 1, 2, 3]);
    expect(descriptors).toHaveLength(5);
  });

  it('E21: unshare(CLONE_NEWUSER), clone with namespace flags, keyctl and perf_event_open are refused', async () => {
    const result = await codecall.execute(
      [
        'import ctypes, os, json, platform',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'numbers = {"x86_64": {"unshare": 272, "keyctl": 250, "perf_event_open": 298, "clone": 56, "clone3": 435},',
        '           "aarch64": {"unshare": 97, "keyctl": 219, "perf_event_open": 241, "clone": 220, "clone3": 435}}',
        'n = numbers[platform.machine()]',
        'def call(number, *arguments):',
        '    status = libc.syscall(number, *[ctypes.c_long(a) for a in arguments])',
        '    return [status, os.strerror(ctypes.get_errno()) if status < 0 else ""]',
        'print(json.dumps({',
        '    "unshare": call(n["unshare"], 0x10000000),',
        '    "clone": call(n["clone"], 0x10000000 | 17, 0, 0, 0, 0),',
        '    "clone3": call(n["clone3"], 0, 0),',
        '    "keyctl": call(n["keyctl"], 0, 0, 0, 0),',
        '    "perf_event_open": call(n["perf_event_open"], 0, 0, -1, -1, 0),',
        '}))',
      ].join('\n'),
    );
    expect(lastJson(result.stdout)).toEqual({
      unshare: [-1, 'Operation not permitted'],
      clone: [-1, 'Operation not permitted'],
      clone3: [-1, 'Function not implemented'],
      keyctl: [-1, 'Operation not permitted'],
      perf_event_open: [-1, 'Operation not permitted'],
    });
  });

  it('ordinary work still runs: threads (glibc falls back from clone3), fork, subprocess, sockets, /tmp', async () => {
    const result = await codecall.execute(
      [
        'import os, subprocess, threading, socket, tempfile, json',
        'seen = []',
        'threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]',
        '[t.start() for t in threads]; [t.join() for t in threads]',
        'pid = os.fork()',
        'if pid == 0:',
        '    os._exit(7)',
        '_, status = os.waitpid(pid, 0)',
        'echo = subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout.strip()',
        'left, right = socket.socketpair(); left.send(b"ping")',
        'with tempfile.NamedTemporaryFile() as handle: handle.write(b"x"); scratch = handle.name',
        'open("/tmp/scratch", "w").write("ok")',
        'print(json.dumps({"threads": sorted(seen), "child": os.waitstatus_to_exitcode(status), "echo": echo,',
        '    "socket": right.recv(4).decode(), "tmp": scratch.startswith(os.environ["TMPDIR"])}))',
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    expect(lastJson(result.stdout)).toEqual({ threads: [0, 1, 2, 3], child: 7, echo: 'hi', socket: 'ping', tmp: true });
  });
});
