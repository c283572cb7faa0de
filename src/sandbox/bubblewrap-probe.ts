import { execFile, spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { release } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fileSignature, readHostCache, writeHostCache } from '../core/host-cache.js';
import {
  hostIsRoot,
  isolationArguments,
  type SandboxUser,
  sandboxUserForHost,
  scratchArguments,
  systemDirectoryArguments,
} from './bubblewrap-arguments.js';
import { type CgroupSupport, detectCgroupSupport, readText } from './cgroups.js';
import { firstExecutable } from './executables.js';
import { defaultSandboxFilesDirectory, ensureSandboxFilesDirectory } from './sandbox-files.js';
import { openSeccompProgram } from './seccomp.js';

/** What `codecall doctor` and `sandbox: "auto"` need to know about this machine's sandboxing. */
export interface SandboxProbe {
  readonly bubblewrap: {
    /** Whether bwrap can start a sandbox here (a trial run succeeded). */
    readonly available: boolean;
    readonly version?: string | undefined;
    readonly path?: string | undefined;
    /** Why it is not available: what is missing and what to do. */
    readonly reason?: string | undefined;
  };
  /** Whether unprivileged user namespaces work (bwrap needs them; it is not installed setuid). */
  readonly userNamespaces: boolean;
  /** Per-run cgroups: without them runs are limited by rlimits only. */
  readonly cgroups: CgroupSupport;
  /** Whether the seccomp filter is applied. */
  readonly seccomp: boolean;
  /**
   * The user the trial sandbox ran as: the host's own, or `nobody` when the host is root (runs then get a uid of
   * their own, see `run-uids.ts`).
   */
  readonly sandboxUser: SandboxUser;
}

/** Options of {@link probeSandbox}. */
export interface SandboxProbeOptions {
  /** bwrap to use; default: `bwrap` found on PATH or in the system directories. */
  readonly bubblewrapPath?: string | undefined;
  /** Where generated sandbox files go (default `<tmpdir>/codecall-<uid>/sandbox`). */
  readonly filesDirectory?: string | undefined;
  /**
   * A host-only cache folder (see `core/host-cache.ts`): a trial sandbox that succeeded is not run again by later
   * processes while bwrap, the kernel, the user-namespace settings, the user and codecall's own sandbox code are
   * unchanged. A failed probe is never cached. The cgroup verdict is kept there too (see `detectCgroupSupport`).
   */
  readonly cacheDirectory?: string | undefined;
}

/** Oldest bubblewrap with every option the runner uses (`--size` came in 0.5.0). */
export const MINIMUM_BUBBLEWRAP_VERSION = [0, 5, 0] as const;
/** How long the trial sandbox may take. */
const TRIAL_TIMEOUT_MS = 15_000;
/** Size of the trial sandbox's tmpfs. */
const TRIAL_TMPFS_BYTES = 1024 * 1024;
const SYSTEM_DIRECTORIES = ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin', '/sbin'];
/** Name of the probe entry in the host cache. */
const CACHE_ENTRY = 'bubblewrap-probe';
/** Kernel settings that decide whether user namespaces (and so bwrap) work. */
const USER_NAMESPACE_SETTINGS = [
  '/proc/sys/kernel/unprivileged_userns_clone',
  '/proc/sys/user/max_user_namespaces',
  '/proc/sys/kernel/apparmor_restrict_unprivileged_userns',
];
/**
 * The code whose change must be tried again: this probe, the flags and the seccomp filter it tries. The file this
 * code is in comes first: in the bundled `codecall` command it holds all three (the others are then not there).
 */
const SANDBOX_CODE_FILES = [
  fileURLToPath(import.meta.url),
  ...['./bubblewrap-arguments.js', './seccomp.js'].map((file) => fileURLToPath(new URL(file, import.meta.url))),
];

const probes = new Map<string, Promise<SandboxProbe>>();

/**
 * Probes once per process (per bwrap path) whether the bubblewrap sandbox works here, by running a trial sandbox
 * with the real flags and the seccomp filter, and which cgroups runs can get. Never throws: problems are reasons.
 */
export function probeSandbox(options: SandboxProbeOptions = {}): Promise<SandboxProbe> {
  const key = `${options.bubblewrapPath ?? ''}\0${options.filesDirectory ?? ''}`;
  let probe = probes.get(key);
  if (probe === undefined) {
    probe = runProbe(options);
    probes.set(key, probe);
  }
  return probe;
}

/** Forgets cached probes (tests). */
export function resetSandboxProbe(): void {
  probes.clear();
}

/** Finds `bwrap`: an explicit path, else PATH, else the system directories. */
export function findBubblewrap(explicitPath?: string): string | undefined {
  const candidates =
    explicitPath !== undefined
      ? [explicitPath]
      : [...(process.env.PATH ?? '').split(delimiter), ...SYSTEM_DIRECTORIES]
          .filter((directory) => isAbsolute(directory))
          .map((directory) => join(directory, 'bwrap'));
  return firstExecutable(candidates);
}

function compareVersions(left: readonly number[], right: readonly number[]): number {
  for (let index = 0; index < Math.max(left.length, right.length); index += 1) {
    const difference = (left[index] ?? 0) - (right[index] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

function readVersion(path: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(path, ['--version'], { timeout: TRIAL_TIMEOUT_MS, env: {} }, (error, stdout) => {
      if (error) resolve(undefined);
      else resolve(/(\d+\.\d+(?:\.\d+)?)/.exec(stdout)?.[1]);
    });
  });
}

interface TrialOutcome {
  readonly ok: boolean;
  readonly stderr: string;
}

function trialRun(path: string, user: SandboxUser, seccompDescriptor: number | undefined): Promise<TrialOutcome> {
  const argumentsList = [
    ...isolationArguments(false),
    ...systemDirectoryArguments(),
    ...scratchArguments(TRIAL_TMPFS_BYTES, TRIAL_TMPFS_BYTES),
    '--remount-ro',
    '/',
    '--clearenv',
    ...(seccompDescriptor !== undefined ? ['--seccomp', '3'] : []),
    '--',
    '/usr/bin/true',
  ];
  return new Promise((resolve) => {
    let stderr = '';
    const child = spawn(path, argumentsList, {
      env: {},
      cwd: '/',
      stdio: ['ignore', 'ignore', 'pipe', ...(seccompDescriptor !== undefined ? [seccompDescriptor] : [])],
      ...(hostIsRoot() ? { uid: user.uid, gid: user.gid } : {}),
      timeout: TRIAL_TIMEOUT_MS,
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', (error) => resolve({ ok: false, stderr: error.message }));
    child.once('close', (code) => resolve({ ok: code === 0, stderr: stderr.trim() }));
  });
}

function readSysctl(path: string): string | undefined {
  return readText(path)?.trim();
}

/** What the kernel settings say about user namespaces, as advice to append to bwrap's own error. */
function userNamespaceAdvice(): string {
  const advice: string[] = [];
  if (readSysctl('/proc/sys/kernel/unprivileged_userns_clone') === '0') {
    advice.push('enable them with `sysctl -w kernel.unprivileged_userns_clone=1`');
  }
  if (readSysctl('/proc/sys/user/max_user_namespaces') === '0') {
    advice.push('allow them with `sysctl -w user.max_user_namespaces=10000`');
  }
  if (readSysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') === '1') {
    advice.push(
      'AppArmor restricts them (Ubuntu 23.10+): allow bwrap with an AppArmor profile or ' +
        '`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`',
    );
  }
  return advice.length > 0 ? `; ${advice.join('; ')}` : '';
}

async function runProbe(options: SandboxProbeOptions): Promise<SandboxProbe> {
  const sandboxUser = sandboxUserForHost();
  const cgroups = detectCgroupSupport({ cacheDirectory: options.cacheDirectory });
  const unavailable = (reason: string, extra: Partial<SandboxProbe['bubblewrap']> = {}): SandboxProbe => ({
    bubblewrap: { available: false, ...extra, reason },
    userNamespaces: false,
    cgroups,
    seccomp: false,
    sandboxUser,
  });
  if (process.platform !== 'linux') return unavailable(`bubblewrap needs Linux (this is ${process.platform})`);
  const path = findBubblewrap(options.bubblewrapPath);
  if (path === undefined) {
    return unavailable(
      options.bubblewrapPath !== undefined
        ? `bubblewrap not found at ${options.bubblewrapPath}`
        : 'bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap, dnf install bubblewrap)',
    );
  }
  const cacheKey = options.cacheDirectory === undefined ? undefined : probeCacheKey(path, sandboxUser);
  if (cacheKey !== undefined && options.cacheDirectory !== undefined) {
    const cached = readHostCache<CachedProbe>(options.cacheDirectory, CACHE_ENTRY, cacheKey);
    if (isCachedProbe(cached)) {
      return {
        bubblewrap: { available: true, version: cached.version, path, reason: cached.reason },
        userNamespaces: true,
        cgroups,
        seccomp: cached.seccomp,
        sandboxUser,
      };
    }
  }
  const probed = await probeBubblewrap(path, {
    sandboxUser,
    cgroups,
    unavailable,
    filesDirectory: options.filesDirectory,
  });
  if (cacheKey !== undefined && options.cacheDirectory !== undefined && probed.bubblewrap.available) {
    writeHostCache(options.cacheDirectory, CACHE_ENTRY, cacheKey, {
      version: probed.bubblewrap.version ?? '',
      seccomp: probed.seccomp,
      reason: probed.bubblewrap.reason,
    } satisfies CachedProbe);
  }
  return probed;
}

/** What a successful probe found, as cached. */
interface CachedProbe {
  readonly version: string;
  readonly seccomp: boolean;
  readonly reason?: string | undefined;
}

function isCachedProbe(value: unknown): value is CachedProbe {
  if (typeof value !== 'object' || value === null) return false;
  const { version, seccomp, reason } = value as Record<string, unknown>;
  return (
    typeof version === 'string' && typeof seccomp === 'boolean' && (reason === undefined || typeof reason === 'string')
  );
}

/** What decides whether a trial sandbox succeeds here; undefined when bwrap cannot be described. */
function probeCacheKey(path: string, sandboxUser: SandboxUser): unknown {
  const signature = fileSignature(path);
  if (signature === undefined) return undefined;
  return {
    path,
    signature,
    kernel: release(),
    uid: process.getuid?.(),
    sandboxUser,
    settings: USER_NAMESPACE_SETTINGS.map((setting) => readSysctl(setting) ?? null),
    code: SANDBOX_CODE_FILES.map((file) => fileSignature(file) ?? null),
  };
}

async function probeBubblewrap(
  path: string,
  context: {
    readonly sandboxUser: SandboxUser;
    readonly cgroups: CgroupSupport;
    readonly unavailable: (reason: string, extra?: Partial<SandboxProbe['bubblewrap']>) => SandboxProbe;
    readonly filesDirectory: string | undefined;
  },
): Promise<SandboxProbe> {
  const { sandboxUser, cgroups, unavailable } = context;
  const version = await readVersion(path);
  if (version === undefined) return unavailable(`${path} --version failed; is it bubblewrap?`, { path });
  if (compareVersions(version.split('.').map(Number), MINIMUM_BUBBLEWRAP_VERSION) < 0) {
    return unavailable(`bubblewrap ${version} is too old; codecall needs ${MINIMUM_BUBBLEWRAP_VERSION.join('.')}+`, {
      path,
      version,
    });
  }
  let seccompDescriptor: number | undefined;
  try {
    seccompDescriptor = openSeccompProgram(
      ensureSandboxFilesDirectory(context.filesDirectory ?? defaultSandboxFilesDirectory()),
    );
  } catch {
    seccompDescriptor = undefined;
  }
  try {
    const withFilter = await trialRun(path, sandboxUser, seccompDescriptor);
    if (withFilter.ok) {
      return {
        bubblewrap: { available: true, version, path },
        userNamespaces: true,
        cgroups,
        seccomp: seccompDescriptor !== undefined,
        sandboxUser,
      };
    }
    const withoutFilter = seccompDescriptor !== undefined ? await trialRun(path, sandboxUser, undefined) : withFilter;
    if (withoutFilter.ok) {
      return {
        bubblewrap: {
          available: true,
          version,
          path,
          reason: `the seccomp filter was refused (${withFilter.stderr}); runs go without it`,
        },
        userNamespaces: true,
        cgroups,
        seccomp: false,
        sandboxUser,
      };
    }
    const namespaceProblem = /namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(
      withoutFilter.stderr,
    );
    return unavailable(
      `a trial sandbox failed: ${withoutFilter.stderr || 'no message'}${
        namespaceProblem ? ` (user namespaces are not available to uid ${sandboxUser.uid}${userNamespaceAdvice()})` : ''
      }`,
      { path, version },
    );
  } finally {
    if (seccompDescriptor !== undefined) closeSync(seccompDescriptor);
  }
}

/** Lines describing a probe for `codecall doctor`. */
export function describeSandboxProbe(probe: SandboxProbe): string[] {
  const lines: string[] = [];
  const { bubblewrap, cgroups } = probe;
  lines.push(
    bubblewrap.available
      ? `bubblewrap: active (${bubblewrap.version} at ${bubblewrap.path})`
      : `bubblewrap: unavailable (${bubblewrap.reason})`,
  );
  lines.push(`user namespaces: ${probe.userNamespaces ? 'yes' : 'no'}`);
  lines.push(
    cgroups.writable
      ? `cgroups: active (v${cgroups.version}: ${cgroups.controllers.join(', ')})`
      : `cgroups: not used, rlimits only (${cgroups.reason ?? 'not writable'})`,
  );
  lines.push(`seccomp: ${probe.seccomp ? 'active' : `off${bubblewrap.reason ? ` (${bubblewrap.reason})` : ''}`}`);
  return lines;
}
