import { closeSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildSeccompProgram,
  DENIED_SYSTEM_CALLS,
  hostSeccompArchitecture,
  openSeccompProgram,
  type SeccompArchitecture,
} from '../../src/sandbox/seccomp.js';

/** The seccomp program, checked by running it in a small classic-BPF interpreter on synthetic system calls. */

const AUDIT_ARCH = { x86_64: 0xc000003e, aarch64: 0xc00000b7, i386: 0x40000003 } as const;
const ALLOW = 0x7fff0000;
const KILL_PROCESS = 0x80000000;
const errno = (value: number) => 0x00050000 | value;
const EPERM = errno(1);
const ENOSYS = errno(38);
const EAFNOSUPPORT = errno(97);

const NUMBERS: Record<SeccompArchitecture, Record<string, number>> = {
  x86_64: { read: 0, ioctl: 16, socket: 41, clone: 56, ptrace: 101, personality: 135, mount: 165, unshare: 272 },
  aarch64: { read: 63, ioctl: 29, socket: 198, clone: 220, ptrace: 117, personality: 92, mount: 40, unshare: 97 },
};

/** Runs a classic BPF seccomp program on `seccomp_data { nr, arch, ip, args[6] }` (little-endian). */
function evaluate(program: Buffer, architecture: number, number: number, args: readonly bigint[] = []): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(number, 0);
  data.writeUInt32LE(architecture, 4);
  for (const [index, value] of args.entries()) data.writeBigUInt64LE(value, 16 + index * 8);
  let accumulator = 0;
  for (let pc = 0; pc * 8 < program.length; ) {
    const code = program.readUInt16LE(pc * 8);
    const jumpTrue = program.readUInt8(pc * 8 + 2);
    const jumpFalse = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20:
        accumulator = data.readUInt32LE(k);
        pc += 1;
        break;
      case 0x06:
        return k;
      case 0x15:
        pc += 1 + (accumulator === k ? jumpTrue : jumpFalse);
        break;
      case 0x35:
        pc += 1 + (accumulator >= k ? jumpTrue : jumpFalse);
        break;
      case 0x45:
        pc += 1 + ((accumulator & k) !== 0 ? jumpTrue : jumpFalse);
        break;
      default:
        throw new Error(`unexpected BPF instruction ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('program fell off its end');
}

describe.each(['x86_64', 'aarch64'] as const)('seccomp program for %s', (architecture) => {
  const program = buildSeccompProgram(architecture);
  const arch = AUDIT_ARCH[architecture];
  const n = NUMBERS[architecture];
  const call = (name: string, ...args: bigint[]) => evaluate(program, arch, n[name] as number, args);

  it('is a whole number of instructions, the same every time it is built', () => {
    expect(program.length % 8).toBe(0);
    expect(program.length / 8).toBeLessThan(200);
    expect(buildSeccompProgram(architecture).equals(program)).toBe(true);
  });

  it('kills system calls of any other architecture', () => {
    expect(evaluate(program, AUDIT_ARCH.i386, 26)).toBe(KILL_PROCESS);
    const other = architecture === 'x86_64' ? AUDIT_ARCH.aarch64 : AUDIT_ARCH.x86_64;
    expect(evaluate(program, other, 0)).toBe(KILL_PROCESS);
  });

  it('allows ordinary calls and refuses the dangerous ones with EPERM', () => {
    expect(call('read', 0n, 0n, 0n)).toBe(ALLOW);
    expect(call('ptrace', 16n, 1n)).toBe(EPERM);
    expect(call('mount')).toBe(EPERM);
    expect(call('unshare', 0x10000000n)).toBe(EPERM);
    expect(DENIED_SYSTEM_CALLS).toEqual(expect.arrayContaining(['ptrace', 'keyctl', 'bpf', 'userfaultfd', 'setns']));
  });

  it('answers clone3 with ENOSYS so that libc falls back to clone', () => {
    expect(evaluate(program, arch, 435, [0n, 88n])).toBe(ENOSYS);
  });

  it('checks clone flags: namespaces refused, fork and threads allowed', () => {
    expect(call('clone', 17n)).toBe(ALLOW);
    expect(call('clone', 0x3d0f00n)).toBe(ALLOW);
    expect(call('clone', 0x10000000n | 17n)).toBe(EPERM);
    expect(call('clone', 0x20000000n)).toBe(EPERM);
    expect(call('clone', 0x00020000n)).toBe(EPERM);
  });

  it('refuses TIOCSTI and TIOCLINUX whatever the upper 32 bits of the request', () => {
    expect(call('ioctl', 0n, 0x5412n)).toBe(EPERM);
    expect(call('ioctl', 0n, 0x1_0000_5412n)).toBe(EPERM);
    expect(call('ioctl', 0n, 0x541cn)).toBe(EPERM);
    expect(call('ioctl', 0n, 0x5401n)).toBe(ALLOW);
  });

  it('allows only the default personality and the query', () => {
    expect(call('personality', 0n)).toBe(ALLOW);
    expect(call('personality', 0xffffffffn)).toBe(ALLOW);
    expect(call('personality', 0x0040000n)).toBe(EPERM);
  });

  it('allows Unix, IP and netlink sockets only', () => {
    for (const family of [1n, 2n, 10n, 16n]) expect(call('socket', family, 1n, 0n)).toBe(ALLOW);
    expect(call('socket', 17n, 3n, 0n)).toBe(EAFNOSUPPORT);
    expect(call('socket', 40n, 1n, 0n)).toBe(EAFNOSUPPORT);
  });
});

describe('seccomp program on x86_64', () => {
  it('refuses the x32 ABI', () => {
    const program = buildSeccompProgram('x86_64');
    expect(evaluate(program, AUDIT_ARCH.x86_64, 0x40000000 + 39)).toBe(EPERM);
  });
});

describe('the cached program file', () => {
  const directory = mkdtempSync(join(tmpdir(), 'codecall-seccomp-'));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it.skipIf(hostSeccompArchitecture() === undefined)(
    'is written once and opened with a fresh descriptor per run',
    () => {
      const first = openSeccompProgram(directory) as number;
      const second = openSeccompProgram(directory) as number;
      try {
        expect(first).not.toBe(second);
        const architecture = hostSeccompArchitecture() as SeccompArchitecture;
        expect(readFileSync(first).equals(buildSeccompProgram(architecture))).toBe(true);
        expect(readFileSync(second).equals(buildSeccompProgram(architecture))).toBe(true);
      } finally {
        closeSync(first);
        closeSync(second);
      }
    },
  );
});
