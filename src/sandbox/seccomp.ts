import { openSync } from 'node:fs';
import { endianness } from 'node:os';
import { openContentAddressedFile } from './sandbox-files.js';

/**
 * The seccomp filter of the bubblewrap sandbox, written as a classic BPF program in TypeScript (no binary in the
 * repository). In the spirit of flatpak's filter: the script keeps every ordinary system call, and gets EPERM for
 * the ones that only serve to attack the kernel or escape the sandbox (namespaces, mounts, tracing, keyrings, kernel
 * modules, BPF, TIOCSTI terminal injection). docs/sandbox.md lists the rules.
 */

/** Architectures the filter is written for. */
export type SeccompArchitecture = 'x86_64' | 'aarch64';

/** `AUDIT_ARCH_*` values the kernel puts in `seccomp_data.arch`. */
const AUDIT_ARCHITECTURES: Readonly<Record<SeccompArchitecture, number>> = {
  x86_64: 0xc000003e,
  aarch64: 0xc00000b7,
};

/** System calls added since Linux 5.1 have one number on every architecture (from 424 on). */
const UNIFIED_SYSTEM_CALL_NUMBERS: Readonly<Record<string, number>> = {
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
  open_tree: 428,
  move_mount: 429,
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  fspick: 433,
  clone3: 435,
  mount_setattr: 442,
  quotactl_fd: 443,
};

/** System call numbers, from `asm/unistd_64.h` (x86_64) and `asm-generic/unistd.h` (aarch64). */
const SYSTEM_CALL_NUMBERS: Readonly<Record<SeccompArchitecture, Readonly<Record<string, number>>>> = {
  x86_64: {
    ioctl: 16,
    socket: 41,
    clone: 56,
    ptrace: 101,
    syslog: 103,
    uselib: 134,
    personality: 135,
    modify_ldt: 154,
    pivot_root: 155,
    chroot: 161,
    acct: 163,
    mount: 165,
    umount2: 166,
    swapon: 167,
    swapoff: 168,
    reboot: 169,
    iopl: 172,
    ioperm: 173,
    init_module: 175,
    delete_module: 176,
    quotactl: 179,
    nfsservctl: 180,
    lookup_dcookie: 212,
    kexec_load: 246,
    add_key: 248,
    request_key: 249,
    keyctl: 250,
    migrate_pages: 256,
    unshare: 272,
    move_pages: 279,
    fanotify_init: 300,
    perf_event_open: 298,
    name_to_handle_at: 303,
    open_by_handle_at: 304,
    setns: 308,
    process_vm_readv: 310,
    process_vm_writev: 311,
    finit_module: 313,
    kexec_file_load: 320,
    bpf: 321,
    userfaultfd: 323,
    ...UNIFIED_SYSTEM_CALL_NUMBERS,
  },
  aarch64: {
    lookup_dcookie: 18,
    ioctl: 29,
    umount2: 39,
    mount: 40,
    pivot_root: 41,
    nfsservctl: 42,
    chroot: 51,
    quotactl: 60,
    acct: 89,
    personality: 92,
    unshare: 97,
    kexec_load: 104,
    init_module: 105,
    delete_module: 106,
    syslog: 116,
    ptrace: 117,
    reboot: 142,
    socket: 198,
    add_key: 217,
    request_key: 218,
    keyctl: 219,
    clone: 220,
    swapon: 224,
    swapoff: 225,
    migrate_pages: 238,
    move_pages: 239,
    perf_event_open: 241,
    fanotify_init: 262,
    name_to_handle_at: 264,
    open_by_handle_at: 265,
    setns: 268,
    process_vm_readv: 270,
    process_vm_writev: 271,
    finit_module: 273,
    bpf: 280,
    userfaultfd: 282,
    kexec_file_load: 294,
    ...UNIFIED_SYSTEM_CALL_NUMBERS,
  },
};

/** System calls refused with EPERM whatever their arguments (absent ones on an architecture are skipped). */
export const DENIED_SYSTEM_CALLS: readonly string[] = Object.freeze([
  // Tracing and reading other processes' memory.
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  // New namespaces and mounts: the sandbox's shape is fixed by bubblewrap.
  'unshare',
  'setns',
  'mount',
  'umount2',
  'pivot_root',
  'chroot',
  'open_tree',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  // Kernel keyrings are not namespaced.
  'keyctl',
  'add_key',
  'request_key',
  // Large kernel attack surface with no use in a script.
  'perf_event_open',
  'bpf',
  'userfaultfd',
  'fanotify_init',
  'lookup_dcookie',
  'name_to_handle_at',
  'open_by_handle_at',
  'move_pages',
  'migrate_pages',
  // Host administration.
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'syslog',
  'acct',
  'quotactl',
  'quotactl_fd',
  'swapon',
  'swapoff',
  'reboot',
  'nfsservctl',
  'uselib',
  'iopl',
  'ioperm',
  'modify_ldt',
]);

/**
 * System calls refused with ENOSYS, so libraries fall back to an older call: `clone3` passes its flags in memory a
 * filter cannot read (glibc then uses `clone`, whose flags are checked), io_uring bypasses per-call filtering.
 */
export const UNIMPLEMENTED_SYSTEM_CALLS: readonly string[] = Object.freeze([
  'clone3',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
]);

/** `CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET`. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000;
/** `ioctl` requests refused: TIOCSTI (push bytes into a terminal's input) and TIOCLINUX (console tricks). */
export const DENIED_IOCTL_REQUESTS: readonly number[] = Object.freeze([0x5412, 0x541c]);
/** `personality` values allowed: PER_LINUX and the query 0xffffffff; others (ADDR_NO_RANDOMIZE, ...) get EPERM. */
export const ALLOWED_PERSONALITIES: readonly number[] = Object.freeze([0, 0xffffffff]);
/** Socket families allowed: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK; others get EAFNOSUPPORT. */
export const ALLOWED_SOCKET_FAMILIES: readonly number[] = Object.freeze([1, 2, 10, 16]);

const ERRNO_EPERM = 1;
const ERRNO_ENOSYS = 38;
const ERRNO_EAFNOSUPPORT = 97;
/** Bit of x32 system call numbers on x86_64: a second ABI with its own numbers, refused as a whole. */
const X32_SYSTEM_CALL_BIT = 0x40000000;

const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_ALLOW = 0x7fff0000;

/** Offsets in `struct seccomp_data`; arguments are 64-bit, the low half comes first on little-endian machines. */
const OFFSET_NUMBER = 0;
const OFFSET_ARCHITECTURE = 4;
const argumentLowOffset = (index: number): number => 16 + 8 * index;

const BPF_LOAD_WORD_ABSOLUTE = 0x20;
const BPF_JUMP_EQUAL = 0x15;
const BPF_JUMP_GREATER_OR_EQUAL = 0x35;
const BPF_JUMP_SET = 0x45;
const BPF_RETURN = 0x06;
/** Conditional jumps of classic BPF reach at most 255 instructions ahead. */
const BPF_MAXIMUM_JUMP = 255;
const BPF_INSTRUCTION_BYTES = 8;

type Instruction =
  | { readonly kind: 'load'; readonly offset: number }
  | {
      readonly kind: 'jump';
      readonly code: number;
      readonly value: number;
      readonly ifTrue?: string | undefined;
      readonly ifFalse?: string | undefined;
    }
  | { readonly kind: 'return'; readonly value: number }
  | { readonly kind: 'label'; readonly name: string };

const load = (offset: number): Instruction => ({ kind: 'load', offset });
const jumpIfEqual = (value: number, ifTrue: string, ifFalse?: string): Instruction => ({
  kind: 'jump',
  code: BPF_JUMP_EQUAL,
  value,
  ifTrue,
  ifFalse,
});
const returnValue = (value: number): Instruction => ({ kind: 'return', value });
const label = (name: string): Instruction => ({ kind: 'label', name });

/** Turns symbolic instructions into `struct sock_filter` bytes, resolving labels to relative jumps. */
function assemble(instructions: readonly Instruction[]): Buffer {
  const positions = new Map<string, number>();
  const real: Exclude<Instruction, { kind: 'label' }>[] = [];
  for (const instruction of instructions) {
    if (instruction.kind === 'label') positions.set(instruction.name, real.length);
    else real.push(instruction);
  }
  const bytes = Buffer.alloc(real.length * BPF_INSTRUCTION_BYTES);
  const littleEndian = endianness() === 'LE';
  real.forEach((instruction, index) => {
    let code: number;
    let value: number;
    let jumpTrue = 0;
    let jumpFalse = 0;
    if (instruction.kind === 'load') {
      code = BPF_LOAD_WORD_ABSOLUTE;
      value = instruction.offset;
    } else if (instruction.kind === 'return') {
      code = BPF_RETURN;
      value = instruction.value;
    } else {
      code = instruction.code;
      value = instruction.value;
      const distance = (target: string | undefined): number => {
        if (target === undefined) return 0;
        const position = positions.get(target);
        if (position === undefined) throw new Error(`seccomp assembler: unknown label ${target}`);
        const offset = position - index - 1;
        if (offset < 0 || offset > BPF_MAXIMUM_JUMP)
          throw new Error(`seccomp assembler: jump to ${target} out of range`);
        return offset;
      };
      jumpTrue = distance(instruction.ifTrue);
      jumpFalse = distance(instruction.ifFalse);
    }
    const at = index * BPF_INSTRUCTION_BYTES;
    if (littleEndian) {
      bytes.writeUInt16LE(code, at);
      bytes.writeUInt32LE(value >>> 0, at + 4);
    } else {
      bytes.writeUInt16BE(code, at);
      bytes.writeUInt32BE(value >>> 0, at + 4);
    }
    bytes.writeUInt8(jumpTrue, at + 2);
    bytes.writeUInt8(jumpFalse, at + 3);
  });
  return bytes;
}

/** The architecture of this Node process as seccomp names it, or undefined when the filter does not cover it. */
export function hostSeccompArchitecture(): SeccompArchitecture | undefined {
  if (process.arch === 'x64') return 'x86_64';
  if (process.arch === 'arm64') return 'aarch64';
  return undefined;
}

/**
 * Builds the filter for one architecture as raw `struct sock_filter` bytes, the format `bwrap --seccomp FD` reads.
 * System calls of any other architecture (i386 through `int 0x80`, for instance) kill the process.
 */
export function buildSeccompProgram(architecture: SeccompArchitecture): Buffer {
  const numbers = SYSTEM_CALL_NUMBERS[architecture];
  const deny = 'deny';
  const unimplemented = 'unimplemented';
  const allow = 'allow';
  const program: Instruction[] = [
    load(OFFSET_ARCHITECTURE),
    jumpIfEqual(AUDIT_ARCHITECTURES[architecture], 'native'),
    returnValue(SECCOMP_RET_KILL_PROCESS),
    label('native'),
    load(OFFSET_NUMBER),
  ];
  if (architecture === 'x86_64') {
    program.push({ kind: 'jump', code: BPF_JUMP_GREATER_OR_EQUAL, value: X32_SYSTEM_CALL_BIT, ifTrue: deny });
  }
  for (const name of DENIED_SYSTEM_CALLS) {
    const number = numbers[name];
    if (number !== undefined) program.push(jumpIfEqual(number, deny));
  }
  for (const name of UNIMPLEMENTED_SYSTEM_CALLS) {
    const number = numbers[name];
    if (number !== undefined) program.push(jumpIfEqual(number, unimplemented));
  }
  const checked: readonly (readonly [string, string])[] = [
    ['clone', 'clone'],
    ['ioctl', 'ioctl'],
    ['personality', 'personality'],
    ['socket', 'socket'],
  ];
  for (const [name, target] of checked) {
    const number = numbers[name];
    if (number === undefined) throw new Error(`seccomp: no number for ${name} on ${architecture}`);
    program.push(jumpIfEqual(number, target));
  }
  program.push(
    returnValue(SECCOMP_RET_ALLOW),
    // clone(flags, ...): the flags are the first argument on both architectures.
    label('clone'),
    load(argumentLowOffset(0)),
    { kind: 'jump', code: BPF_JUMP_SET, value: CLONE_NAMESPACE_FLAGS, ifTrue: deny },
    returnValue(SECCOMP_RET_ALLOW),
    // ioctl(fd, request, ...): the kernel compares only the low 32 bits of the request, so does the filter.
    label('ioctl'),
    load(argumentLowOffset(1)),
    ...DENIED_IOCTL_REQUESTS.map((request) => jumpIfEqual(request, deny)),
    returnValue(SECCOMP_RET_ALLOW),
    label('personality'),
    load(argumentLowOffset(0)),
    ...ALLOWED_PERSONALITIES.map((persona) => jumpIfEqual(persona, allow)),
    returnValue(SECCOMP_RET_ERRNO | ERRNO_EPERM),
    label('socket'),
    load(argumentLowOffset(0)),
    ...ALLOWED_SOCKET_FAMILIES.map((family) => jumpIfEqual(family, allow)),
    returnValue(SECCOMP_RET_ERRNO | ERRNO_EAFNOSUPPORT),
    label(deny),
    returnValue(SECCOMP_RET_ERRNO | ERRNO_EPERM),
    label(unimplemented),
    returnValue(SECCOMP_RET_ERRNO | ERRNO_ENOSYS),
    label(allow),
    returnValue(SECCOMP_RET_ALLOW),
  );
  return assemble(program);
}

const programFiles = new Map<string, string>();

/**
 * Opens the host architecture's filter for one run, or returns undefined when the architecture is not covered.
 * The program is written once to `<directory>/seccomp-<arch>-<hash>` (again if a temporary-file cleaner removed it).
 * Each run needs its own descriptor: bwrap reads it to the end, and one descriptor shared between runs would share
 * that read offset.
 */
export function openSeccompProgram(directory: string): number | undefined {
  const architecture = hostSeccompArchitecture();
  if (architecture === undefined) return undefined;
  const key = `${directory}\0${architecture}`;
  const known = programFiles.get(key);
  if (known !== undefined) {
    try {
      return openSync(known, 'r');
    } catch {
      programFiles.delete(key);
    }
  }
  const { descriptor, path } = openContentAddressedFile(
    directory,
    `seccomp-${architecture}`,
    buildSeccompProgram(architecture),
  );
  programFiles.set(key, path);
  return descriptor;
}
