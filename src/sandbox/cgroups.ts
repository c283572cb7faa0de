import {
  accessSync,
  constants,
  lchownSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { release } from 'node:os';
import { join, posix } from 'node:path';
import { filePromises } from '../core/file-promises.js';
import { readHostCache, writeHostCache } from '../core/host-cache.js';
import type { LimitReason } from '../core/isolation.js';
import { isProcessAlive, signalProcess } from '../core/processes.js';
import { sleep } from '../core/waiting.js';

/**
 * Per-run control groups: one cgroup per run (per controller on cgroup v1) caps the whole process tree of the run —
 * processes and threads (pids), memory (memory), CPU share and CPU time (cpu, cpuacct) — and lets the host kill
 * every process of it at once (cgroup.kill on v2, freezer then SIGKILL on v1), including ones that left the process
 * group. Where no cgroup hierarchy is writable, runs are limited by rlimits only and the probe says so.
 */

/** cgroup controllers codecall uses. */
export type CgroupController = 'pids' | 'memory' | 'cpu' | 'cpuacct' | 'freezer';

/** What the host offers: cgroup version, whether codecall can create cgroups, and with which controllers. */
export interface CgroupSupport {
  /** 1 or 2, or null when no cgroup hierarchy is mounted. */
  readonly version: 1 | 2 | null;
  /** Whether per-run cgroups can be created (and processes moved into them). */
  readonly writable: boolean;
  /** Controllers a run gets (`pids`, `memory`, `cpu`, `cpuacct`, `freezer`; v2 has no separate cpuacct/freezer). */
  readonly controllers: readonly CgroupController[];
  /** Why cgroups are not used, when they are not. */
  readonly reason?: string | undefined;
}

/** Where run cgroups go: on v1 one parent directory per hierarchy, on v2 one parent directory. */
export type CgroupLayout =
  | { readonly version: 1; readonly hierarchies: readonly CgroupHierarchy[] }
  | {
      readonly version: 2;
      /** The unified hierarchy's mount point. */
      readonly mountPoint: string;
      /** This process's own cgroup directory. */
      readonly ownDirectory: string;
    };

/** One mounted cgroup v1 hierarchy and the cgroup directory of this process in it. */
export interface CgroupHierarchy {
  readonly controllers: readonly CgroupController[];
  /** This process's own cgroup in the hierarchy: run cgroups are created inside it (memory limits nest). */
  readonly ownDirectory: string;
}

const KNOWN_CONTROLLERS: readonly CgroupController[] = ['pids', 'memory', 'cpu', 'cpuacct', 'freezer'];
/** Controllers codecall enables on cgroup v2 (cpu gives each run one fair share of CPU time). */
const V2_CONTROLLERS = ['pids', 'memory', 'cpu'] as const;
/** Prefix of run cgroups: `codecall-<host pid>-<run id>`, so leftovers of a dead host can be recognised. */
const RUN_CGROUP_PREFIX = 'codecall-';
/** Name of the parent cgroup a root host creates on cgroup v2, under the hierarchy's root. */
const V2_PARENT_NAME = 'codecall';
/** How often the watchdog reads a run's CPU time and OOM-kill count (two small reads, ~0.1 ms). */
export const CGROUP_WATCH_INTERVAL_MS = 100;
/** How long killing and removing a run's cgroups waits for its processes to go. */
const REMOVAL_TIMEOUT_MS = 2_000;
const REMOVAL_RETRY_MS = 2;
/** Failed removals of a busy cgroup before its processes are frozen and killed, rather than only killed. */
const FREEZE_AFTER_ATTEMPTS = 10;
const FREEZE_TIMEOUT_MS = 500;
const NANOSECONDS_PER_SECOND = 1_000_000_000;
const MICROSECONDS_PER_SECOND = 1_000_000;

/**
 * Reads where cgroups are mounted and where this process sits in them, from the text of `/proc/self/mountinfo` and
 * `/proc/self/cgroup`. Pure, for tests; returns undefined when nothing usable is mounted.
 */
export function parseCgroupLayout(mountInfo: string, ownCgroups: string): CgroupLayout | undefined {
  const ownPaths = new Map<string, string>();
  let unifiedPath: string | undefined;
  for (const line of ownCgroups.split('\n')) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!match) continue;
    const [, hierarchyId, controllers = '', path = '/'] = match;
    if (hierarchyId === '0' && controllers === '') unifiedPath = path;
    else for (const controller of controllers.split(',')) ownPaths.set(controller, path);
  }
  const mounts = mountInfo
    .split('\n')
    .map((line) => {
      const fields = line.split(' ');
      const separator = fields.indexOf('-');
      if (separator < 0) return undefined;
      return {
        root: unescapeMountField(fields[3] ?? '/'),
        mountPoint: unescapeMountField(fields[4] ?? ''),
        type: fields[separator + 1] ?? '',
        superOptions: (fields[separator + 3] ?? '').split(','),
      };
    })
    .filter((mount) => mount !== undefined);

  const unified = mounts.find((mount) => mount.type === 'cgroup2' && mount.mountPoint === '/sys/fs/cgroup');
  if (unified !== undefined && unifiedPath !== undefined) {
    return {
      version: 2,
      mountPoint: unified.mountPoint,
      ownDirectory: directoryOf(unified.mountPoint, unified.root, unifiedPath),
    };
  }
  const hierarchies: CgroupHierarchy[] = [];
  for (const mount of mounts) {
    if (mount.type !== 'cgroup') continue;
    const controllers = KNOWN_CONTROLLERS.filter((controller) => mount.superOptions.includes(controller));
    const first = controllers[0];
    if (first === undefined) continue;
    const ownPath = ownPaths.get(first);
    if (ownPath === undefined) continue;
    // The same hierarchy can be mounted twice (cpu and cpu,cpuacct links): keep one.
    if (hierarchies.some((known) => known.controllers.includes(first))) continue;
    hierarchies.push({ controllers, ownDirectory: directoryOf(mount.mountPoint, mount.root, ownPath) });
  }
  return hierarchies.length > 0 ? { version: 1, hierarchies } : undefined;
}

function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** The directory of cgroup `path` in a hierarchy mounted at `mountPoint` whose mount shows cgroup `root`. */
function directoryOf(mountPoint: string, root: string, path: string): string {
  const relative = root !== '/' && (path === root || path.startsWith(`${root}/`)) ? path.slice(root.length) : path;
  const directory = posix.join(mountPoint, relative);
  return directory.length > 1 && directory.endsWith('/') ? directory.slice(0, -1) : directory;
}

/**
 * Shell text that joins the run's v1 cgroups and becomes the command: writes `0` (itself) to each `tasks` file given
 * before `--`, then execs what follows it with an empty environment (the shell exports PWD; bwrap, pid 1 in the
 * sandbox, has its environment readable there). A failed join says which file and exits 125. Both launchers that
 * join end with it: the run user's single-threaded `sh` before bwrap, and the root shell of an inline staging.
 */
export const CGROUP_JOIN_AND_EXEC_SCRIPT = [
  'while [ "$1" != -- ]; do',
  '  echo 0 >"$1" || { echo "codecall: cannot join the run cgroup $1" >&2; exit 125; }',
  '  shift',
  'done',
  'shift',
  'unset PWD',
  'exec "$@"',
].join('\n');

/** Reads the layout of this machine (undefined when no cgroup hierarchy is mounted). */
export function readCgroupLayout(): CgroupLayout | undefined {
  const sources = readLayoutSources();
  return sources === undefined ? undefined : parseCgroupLayout(sources.mountInfo, sources.ownCgroups);
}

/** The texts the layout is read from: this process's mount table and cgroups. */
interface LayoutSources {
  readonly mountInfo: string;
  readonly ownCgroups: string;
}

function readLayoutSources(): LayoutSources | undefined {
  try {
    return {
      mountInfo: readFileSync('/proc/self/mountinfo', 'utf8'),
      ownCgroups: readFileSync('/proc/self/cgroup', 'utf8'),
    };
  } catch {
    return undefined;
  }
}

/** Where run cgroups are created, once checked writable. */
type RunParents =
  | { readonly version: 1; readonly parents: readonly CgroupHierarchy[] }
  | {
      readonly version: 2;
      readonly parent: string;
      readonly controllers: readonly CgroupController[];
      readonly ownDirectory: string;
    };

/** What a detection found, and, when it came from the host cache, where and under which key. */
interface Detection {
  readonly support: CgroupSupport;
  readonly parents: RunParents | undefined;
  readonly cached?: { readonly directory: string; readonly key: unknown; readonly layout: CgroupLayout } | undefined;
}

let cachedSupport: Detection | undefined;

/** Name of the cgroup verdict in the host cache. */
const VERDICT_CACHE_ENTRY = 'cgroup-support';

/** Options of {@link detectCgroupSupport}. */
export interface CgroupDetectionOptions {
  /**
   * A host-only cache folder (see `core/host-cache.ts`): a detection that found cgroups usable is kept there, keyed by
   * the kernel release, this process's cgroups, the cgroup lines of its mount table and its user, so later processes
   * make no trial cgroup while those are unchanged. A verdict that found nothing usable is never kept, and a kept one
   * that a run's own cgroups then contradict is detected again at once (see {@link createRunCgroups}).
   */
  readonly cacheDirectory?: string | undefined;
}

/**
 * Finds out once whether per-run cgroups work here by creating and removing a trial cgroup in every hierarchy, or
 * from the verdict kept in `options.cacheDirectory` by an earlier process.
 * On v1 run cgroups nest inside this process's own cgroup of each hierarchy; on v2 under `<root>/codecall` when the
 * host is root, else next to this process's cgroup when that part of the tree is delegated to this user.
 */
export function detectCgroupSupport(options: CgroupDetectionOptions = {}): CgroupSupport {
  return detect(options.cacheDirectory).support;
}

function detect(cacheDirectory?: string): Detection {
  cachedSupport ??= detectThroughCache(cacheDirectory);
  return cachedSupport;
}

/** Forgets the cached detection (tests). */
export function resetCgroupDetection(): void {
  cachedSupport = undefined;
}

function detectThroughCache(cacheDirectory: string | undefined): Detection {
  const sources = readLayoutSources();
  const layout = sources === undefined ? undefined : parseCgroupLayout(sources.mountInfo, sources.ownCgroups);
  if (cacheDirectory === undefined || sources === undefined || layout === undefined) return detectUncached(layout);
  const key = verdictKey(sources);
  const kept = verdictFrom(layout, readHostCache<unknown>(cacheDirectory, VERDICT_CACHE_ENTRY, key));
  if (kept !== undefined) return { ...kept, cached: { directory: cacheDirectory, key, layout } };
  const found = detectUncached(layout);
  if (found.parents !== undefined) {
    writeHostCache(cacheDirectory, VERDICT_CACHE_ENTRY, key, verdictOf(found.parents));
  }
  return found;
}

/**
 * What a verdict depends on: the kernel, the cgroup mounts (their lines of the mount table, options included), this
 * process's place in each hierarchy, and its user.
 */
function verdictKey(sources: LayoutSources): unknown {
  return {
    kernel: release(),
    // After a reboot the kernel and the mounts may read the same, but cgroups made since (a v2 parent) are gone.
    boot: readText('/proc/sys/kernel/random/boot_id')?.trim() ?? null,
    uid: process.geteuid?.(),
    mounts: sources.mountInfo.split('\n').filter((line) => / - cgroup2? /.test(line)),
    own: sources.ownCgroups,
  };
}

/** A usable detection as kept: the hierarchies by their first controller (v1), or the parent (v2). */
type Verdict =
  | { readonly version: 1; readonly hierarchies: readonly string[] }
  | { readonly version: 2; readonly parent: string; readonly controllers: readonly string[] };

function verdictOf(parents: RunParents): Verdict {
  return parents.version === 1
    ? { version: 1, hierarchies: parents.parents.map((hierarchy) => hierarchy.controllers[0] ?? '') }
    : { version: 2, parent: parents.parent, controllers: parents.controllers };
}

/** The detection a kept verdict stands for in `layout`, or undefined when it does not fit the layout. */
function verdictFrom(layout: CgroupLayout, value: unknown): Omit<Detection, 'cached'> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const verdict = value as Partial<Record<string, unknown>>;
  if (layout.version === 1 && verdict.version === 1 && Array.isArray(verdict.hierarchies)) {
    const names = verdict.hierarchies;
    const parents = layout.hierarchies.filter((hierarchy) => names.includes(hierarchy.controllers[0]));
    const controllers = parents.flatMap((hierarchy) => hierarchy.controllers);
    if (parents.length !== names.length || !(controllers.includes('pids') || controllers.includes('memory'))) {
      return undefined;
    }
    return { support: { version: 1, writable: true, controllers }, parents: { version: 1, parents } };
  }
  if (layout.version === 2 && verdict.version === 2 && Array.isArray(verdict.controllers)) {
    const parent = v2ParentCandidates(layout).find((candidate) => candidate === verdict.parent);
    const kept = verdict.controllers;
    const controllers = V2_CONTROLLERS.filter((controller) => kept.includes(controller));
    if (parent === undefined || !controllers.includes('pids') || !controllers.includes('memory')) return undefined;
    return {
      support: { version: 2, writable: true, controllers },
      parents: { version: 2, parent, controllers, ownDirectory: layout.ownDirectory },
    };
  }
  return undefined;
}

/**
 * A kept verdict was contradicted (a run's cgroups could not be made): detects again with trial cgroups, keeps the
 * new verdict (or none), and returns it.
 */
function detectAgain(cached: NonNullable<Detection['cached']>): Detection {
  const found = detectUncached(cached.layout);
  writeHostCache(
    cached.directory,
    VERDICT_CACHE_ENTRY,
    cached.key,
    found.parents === undefined ? null : verdictOf(found.parents),
  );
  cachedSupport = found;
  return found;
}

function detectUncached(layout: CgroupLayout | undefined): {
  support: CgroupSupport;
  parents: RunParents | undefined;
} {
  if (layout === undefined) {
    return {
      support: { version: null, writable: false, controllers: [], reason: 'no cgroup hierarchy is mounted' },
      parents: undefined,
    };
  }
  const trialName = `${RUN_CGROUP_PREFIX}${process.pid}-probe`;
  if (layout.version === 1) {
    const parents: CgroupHierarchy[] = [];
    const failures: string[] = [];
    for (const hierarchy of layout.hierarchies) {
      const trial = join(hierarchy.ownDirectory, trialName);
      try {
        mkdirSync(trial);
        rmdirSync(trial);
        parents.push(hierarchy);
      } catch (error) {
        failures.push(`${hierarchy.controllers.join(',')}: ${(error as NodeJS.ErrnoException).code ?? error}`);
      }
    }
    const controllers = parents.flatMap((hierarchy) => hierarchy.controllers);
    const usable = controllers.includes('pids') || controllers.includes('memory');
    return {
      support: {
        version: 1,
        writable: usable,
        controllers: usable ? controllers : [],
        ...(usable ? {} : { reason: `cannot create cgroups under /sys/fs/cgroup (${failures.join('; ')})` }),
      },
      parents: usable ? { version: 1, parents } : undefined,
    };
  }
  const attempts: string[] = [];
  for (const parent of v2ParentCandidates(layout)) {
    const outcome = prepareV2Parent(parent);
    if (typeof outcome === 'string') {
      attempts.push(`${parent}: ${outcome}`);
      continue;
    }
    const trial = join(parent, trialName);
    try {
      mkdirSync(trial);
      rmdirSync(trial);
    } catch (error) {
      attempts.push(`${parent}: ${(error as NodeJS.ErrnoException).code ?? error}`);
      continue;
    }
    return {
      support: { version: 2, writable: true, controllers: outcome },
      parents: { version: 2, parent, controllers: outcome, ownDirectory: layout.ownDirectory },
    };
  }
  return {
    support: {
      version: 2,
      writable: false,
      controllers: [],
      reason: `no writable cgroup v2 subtree with the pids and memory controllers (${attempts.join('; ') || 'none found'})`,
    },
    parents: undefined,
  };
}

function v2ParentCandidates(layout: Extract<CgroupLayout, { version: 2 }>): string[] {
  const candidates: string[] = [];
  if (process.geteuid?.() === 0) candidates.push(join(layout.mountPoint, V2_PARENT_NAME));
  const parent = posix.dirname(layout.ownDirectory);
  // Next to our own cgroup: possible when that subtree is delegated to this user (systemd Delegate=yes).
  if (layout.ownDirectory !== layout.mountPoint && parent.startsWith(layout.mountPoint)) candidates.push(parent);
  return candidates;
}

/** Makes `parent` ready to hold run cgroups with the v2 controllers; returns them, or why it cannot. */
function prepareV2Parent(parent: string): CgroupController[] | string {
  try {
    if (posix.basename(parent) === V2_PARENT_NAME) {
      const root = posix.dirname(parent);
      mkdirSync(parent, { recursive: true });
      for (const controller of V2_CONTROLLERS) {
        tryWrite(join(root, 'cgroup.subtree_control'), `+${controller}`);
        tryWrite(join(parent, 'cgroup.subtree_control'), `+${controller}`);
      }
    } else {
      accessSync(parent, constants.W_OK);
      accessSync(join(parent, 'cgroup.procs'), constants.W_OK);
    }
    const enabled = readFileSync(join(parent, 'cgroup.subtree_control'), 'utf8').trim().split(/\s+/);
    const controllers = V2_CONTROLLERS.filter((controller) => enabled.includes(controller));
    if (!controllers.includes('pids') || !controllers.includes('memory')) {
      return `controllers enabled for children: "${enabled.join(' ')}", need pids and memory`;
    }
    return controllers;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  }
}

function tryWrite(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

/** The text of a kernel file (`/proc`, `/sys`), or undefined when it cannot be read. */
export function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Reads `key value` lines (memory.events, pids.events, cpu.stat, memory.oom_control). */
function readKeyedNumber(path: string, key: string): number | undefined {
  const text = readText(path);
  if (text === undefined) return undefined;
  for (const line of text.split('\n')) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key && value !== undefined) return Number(value);
  }
  return undefined;
}

/** Limits a run's cgroups enforce. */
export interface RunCgroupLimits {
  /** Memory of the whole run (memory.max / memory.limit_in_bytes; swap is not allowed on top). */
  readonly memoryBytes: number;
  /** Tasks (processes and threads) of the whole run, including the sandbox's own supervisor processes. */
  readonly maxTasks: number;
  /** CPU time of the whole run; the watchdog kills the run when it is used up. */
  readonly cpuSeconds: number;
}

const sweptParents = new Set<string>();

/**
 * The cgroups of one run. Create with {@link createRunCgroups}, move the run's first processes in with
 * {@link RunCgroups.join} before they run the script (their children follow), then read, kill and dispose.
 */
export class RunCgroups {
  /** Directories created for this run (one per v1 hierarchy, one on v2). */
  readonly directories: readonly string[];
  /** Controllers the run is under. */
  readonly controllers: readonly CgroupController[];
  /** cgroup version of the run's cgroups. */
  readonly version: 1 | 2;
  private readonly limits: RunCgroupLimits;
  private readonly byController: ReadonlyMap<CgroupController, string>;
  private watchdog: NodeJS.Timeout | undefined;
  private recordedReason: LimitReason | undefined;
  private disposed = false;

  /** Use {@link createRunCgroups}. */
  constructor(
    version: 1 | 2,
    byController: ReadonlyMap<CgroupController, string>,
    directories: readonly string[],
    limits: RunCgroupLimits,
  ) {
    this.version = version;
    this.byController = byController;
    this.directories = directories;
    this.controllers = [...byController.keys()];
    this.limits = limits;
  }

  /** Whether the number of processes of the run is capped by the pids controller (then RLIMIT_NPROC is not needed). */
  get limitsProcesses(): boolean {
    return this.byController.has('pids');
  }

  /** Whether the run's CPU time is accounted (cpuacct on v1; always on v2), so the watchdog can enforce it. */
  get accountsCpu(): boolean {
    return this.version === 2 || this.byController.has('cpuacct');
  }

  /**
   * The files a single-threaded process joins the run with by writing `0` (itself) to each: cgroup v1 `tasks` files.
   * Moving the writing thread itself skips the kernel's global migration lock, whose first taker after a quiet spell
   * waits for an RCU grace period (5-30 ms measured here); moving a whole process (`cgroup.procs`) always takes it.
   * Undefined on v2, where a process can only move whole.
   */
  get selfJoinFiles(): readonly string[] | undefined {
    return this.version === 1 ? this.directories.map((directory) => join(directory, 'tasks')) : undefined;
  }

  /** Moves processes into every cgroup of the run (their future children are born inside). */
  join(pids: readonly number[]): void {
    for (const directory of this.directories) {
      for (const pid of pids) writeFileSync(join(directory, 'cgroup.procs'), String(pid));
    }
  }

  /**
   * Starts watching the run: when its CPU time reaches the limit or the kernel OOM-killed one of its processes, the
   * reason is recorded and the whole run killed (a v1 OOM kill takes one process only; v2 has memory.oom.group).
   */
  startWatchdog(): void {
    if (this.watchdog !== undefined || this.disposed) return;
    this.watchdog = setInterval(() => {
      const reason = this.readLimitReason();
      if (reason === 'cpu' || reason === 'memory') {
        this.recordedReason ??= reason;
        this.stopWatchdog();
        void this.killAll();
      }
    }, CGROUP_WATCH_INTERVAL_MS);
    this.watchdog.unref();
  }

  private stopWatchdog(): void {
    if (this.watchdog !== undefined) clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** CPU time the run used so far, in seconds, when a controller accounts it. */
  cpuSecondsUsed(): number | undefined {
    if (this.version === 2) {
      const directory = this.directories[0];
      const micros = directory === undefined ? undefined : readKeyedNumber(join(directory, 'cpu.stat'), 'usage_usec');
      return micros === undefined ? undefined : micros / MICROSECONDS_PER_SECOND;
    }
    const directory = this.byController.get('cpuacct');
    const text = directory === undefined ? undefined : readText(join(directory, 'cpuacct.usage'));
    return text === undefined ? undefined : Number(text.trim()) / NANOSECONDS_PER_SECOND;
  }

  private oomKills(): number {
    const directory = this.byController.get('memory');
    if (directory === undefined) return 0;
    const count =
      this.version === 2
        ? readKeyedNumber(join(directory, 'memory.events'), 'oom_kill')
        : readKeyedNumber(join(directory, 'memory.oom_control'), 'oom_kill');
    return count ?? 0;
  }

  private refusedForks(): number {
    const directory = this.byController.get('pids');
    if (directory === undefined) return 0;
    return readKeyedNumber(join(directory, 'pids.events'), 'max') ?? 0;
  }

  private readLimitReason(): LimitReason | undefined {
    if (this.oomKills() > 0) return 'memory';
    const used = this.cpuSecondsUsed();
    if (used !== undefined && used >= this.limits.cpuSeconds) return 'cpu';
    if (this.refusedForks() > 0) return 'pids';
    return undefined;
  }

  /**
   * Which limit the kernel's accounting says stopped the run: `memory` after an OOM kill in the run's memory cgroup,
   * `cpu` when the run used its CPU time, `pids` when the pids controller refused a fork.
   */
  limitReason(): LimitReason | undefined {
    if (this.disposed) return this.recordedReason;
    return this.recordedReason ?? this.readLimitReason();
  }

  /**
   * Kills every process in the run's cgroups: `cgroup.kill` on v2; on v1 SIGKILL to each listed process. Under
   * bubblewrap the list holds the sandbox's pid 1, and killing it kills its whole pid namespace at once, so a process
   * forked after the list was read dies too. Does not wait; {@link dispose} waits, and freezes what still resists.
   */
  async killAll(): Promise<void> {
    this.stopWatchdog();
    const directory = this.directories[0];
    if (directory === undefined) return;
    if (this.version === 2 && tryWrite(join(directory, 'cgroup.kill'), '1')) return;
    killListed(directory);
  }

  /** Freezes the run (frozen processes cannot fork, so the list is complete), kills what is listed, thaws. */
  private async freezeAndKill(): Promise<void> {
    const directory = this.version === 2 ? this.directories[0] : this.byController.get('freezer');
    if (directory === undefined) {
      for (const each of this.directories) killListed(each);
      return;
    }
    const [file, frozen, thawed] =
      this.version === 2 ? ['cgroup.freeze', '1', '0'] : ['freezer.state', 'FROZEN', 'THAWED'];
    const path = join(directory, file);
    if (tryWrite(path, frozen)) {
      const deadline = performance.now() + FREEZE_TIMEOUT_MS;
      while (performance.now() < deadline && !isFrozen(path, frozen, directory)) await sleep(1);
    }
    killListed(directory);
    // SIGKILL is delivered once the processes run again.
    tryWrite(path, thawed);
  }

  /**
   * Stops the watchdog and removes the run's cgroups once their processes are gone (bwrap's monitor can exit while
   * the sandbox's pid 1 is still tearing its namespace down), killing again, then freezing and killing, what stays.
   * Safe to call twice.
   */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.recordedReason ??= this.readLimitReason();
    this.disposed = true;
    this.stopWatchdog();
    const deadline = performance.now() + REMOVAL_TIMEOUT_MS;
    let attempts = 0;
    for (const directory of this.directories) {
      for (;;) {
        try {
          rmdirSync(directory);
          break;
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'ENOENT' || performance.now() > deadline) break;
          attempts += 1;
          if (attempts % FREEZE_AFTER_ATTEMPTS === 0) await this.freezeAndKill();
          else killListed(directory);
          await sleep(REMOVAL_RETRY_MS);
        }
      }
    }
  }
}

function isFrozen(path: string, frozen: string, directory: string): boolean {
  if (frozen === '1') return readKeyedNumber(join(directory, 'cgroup.events'), 'frozen') === 1;
  return readText(path)?.trim() === frozen;
}

function killListed(directory: string): void {
  const text = readText(join(directory, 'cgroup.procs')) ?? '';
  for (const line of text.split('\n')) {
    const pid = Number(line.trim());
    if (Number.isInteger(pid) && pid > 0) signalProcess(pid, 'SIGKILL');
  }
}

/**
 * Starts the kernel's slow path of moving a process between cgroups ahead of time. Every move takes a global lock
 * whose first taker after a quiet spell waits for an RCU grace period (5-30 ms measured on cgroup v1 here); moves
 * right after another are fast. Re-adding this process to its own cgroup (a no-op move) while bwrap starts makes the
 * run's real move, a few milliseconds later, a fast one. Never fails.
 */
export async function warmUpCgroupMigration(): Promise<void> {
  const { parents } = detect();
  if (parents === undefined) return;
  const own = parents.version === 1 ? parents.parents[0]?.ownDirectory : parents.ownDirectory;
  if (own === undefined) return;
  try {
    await filePromises().writeFile(join(own, 'cgroup.procs'), String(process.pid));
  } catch {
    // Only an optimisation.
  }
}

/** Options of {@link createRunCgroups}. */
export interface RunCgroupOptions {
  /** A user whose process joins the run by itself (gets write access to the v1 `tasks` files). */
  readonly selfJoinUser?: { readonly uid: number; readonly gid: number } | undefined;
}

/** A set of empty cgroup directories (one per v1 hierarchy, one on v2), made ahead of a run. */
interface CgroupDirectories {
  readonly name: string;
  readonly byParent: ReadonlyMap<string, string>;
}

/**
 * One set made in the background after each run starts, so the next run only renames it (~0.03 ms, not ~0.5); made
 * only once this process has made a second set (a pool's interpreter made ahead counts): a one-shot command's only
 * run would otherwise make a set, and remove it at exit, for no run at all.
 */
let spare: CgroupDirectories | undefined;
let spareScheduled = false;
let spareCleanupInstalled = false;
/** Sets made or taken by this process's runs so far. */
let setsUsed = 0;
/** Sets a process uses before it keeps a spare ready for the next. */
const SETS_BEFORE_SPARES = 2;

function parentDirectories(parents: RunParents): string[] {
  return parents.version === 1 ? parents.parents.map((hierarchy) => hierarchy.ownDirectory) : [parents.parent];
}

function makeDirectories(parents: RunParents, name: string, options: RunCgroupOptions): CgroupDirectories {
  const byParent = new Map<string, string>();
  try {
    for (const parent of parentDirectories(parents)) {
      sweepStaleRunCgroups(parent);
      const directory = join(parent, name);
      mkdirSync(directory);
      byParent.set(parent, directory);
    }
    handTasksFiles(parents, byParent, options);
  } catch (error) {
    removeQuietly([...byParent.values()]);
    throw error;
  }
  return { name, byParent };
}

/** Gives the v1 `tasks` files to the user whose launcher joins the run by itself (every run has a uid of its own). */
function handTasksFiles(parents: RunParents, byParent: ReadonlyMap<string, string>, options: RunCgroupOptions): void {
  const user = options.selfJoinUser;
  if (user === undefined || parents.version !== 1) return;
  for (const directory of byParent.values()) lchownSync(join(directory, 'tasks'), user.uid, user.gid);
}

function removeQuietly(directories: readonly string[]): void {
  for (const directory of [...directories].reverse()) {
    try {
      rmdirSync(directory);
    } catch {
      // Best effort: the sweep of a later host removes it.
    }
  }
}

function scheduleSpare(parents: RunParents): void {
  if (spareScheduled || spare !== undefined) return;
  spareScheduled = true;
  setImmediate(() => {
    spareScheduled = false;
    if (spare !== undefined) return;
    try {
      // Owned by nobody yet: the run that takes it may be any uid.
      spare = makeDirectories(parents, `${RUN_CGROUP_PREFIX}${process.pid}-spare`, {});
    } catch {
      // The next run makes its own.
    }
    if (!spareCleanupInstalled) {
      spareCleanupInstalled = true;
      process.once('exit', () => {
        if (spare !== undefined) removeQuietly([...spare.byParent.values()]);
      });
    }
  });
}

/**
 * Creates the cgroups of one run, named `codecall-<host pid>-<run id>`, with its limits, or returns undefined when
 * per-run cgroups are not available here. Takes the spare set made after the previous run when there is one (from
 * the process's second set on).
 * @throws when the cgroups were available but could not be created (the caller fails the run).
 */
export function createRunCgroups(
  runId: string,
  limits: RunCgroupLimits,
  options: RunCgroupOptions = {},
): RunCgroups | undefined {
  const detection = detect();
  try {
    return createIn(detection.parents, runId, limits, options);
  } catch (error) {
    // A kept verdict is trusted up to the first contradiction: then a trial decides, as in a process without one.
    if (detection.cached === undefined || cachedSupport !== detection) throw error;
    return createIn(detectAgain(detection.cached).parents, runId, limits, options);
  }
}

function createIn(
  parents: RunParents | undefined,
  runId: string,
  limits: RunCgroupLimits,
  options: RunCgroupOptions,
): RunCgroups | undefined {
  if (parents === undefined) return undefined;
  const name = `${RUN_CGROUP_PREFIX}${process.pid}-${runId}`;
  let directories: CgroupDirectories;
  const taken = spare;
  if (taken !== undefined) {
    spare = undefined;
    const renamed = new Map<string, string>();
    try {
      for (const [parent, directory] of taken.byParent) {
        renameSync(directory, join(parent, name));
        renamed.set(parent, join(parent, name));
      }
      directories = { name, byParent: renamed };
      handTasksFiles(parents, renamed, options);
    } catch {
      // Drop the spare, renamed or not, and make a fresh set.
      removeQuietly([...taken.byParent].map(([parent, directory]) => renamed.get(parent) ?? directory));
      directories = makeDirectories(parents, name, options);
    }
  } else {
    directories = makeDirectories(parents, name, options);
  }
  setsUsed += 1;
  if (setsUsed >= SETS_BEFORE_SPARES) scheduleSpare(parents);
  const created = [...directories.byParent.values()];
  const byController = new Map<CgroupController, string>();
  try {
    if (parents.version === 1) {
      for (const hierarchy of parents.parents) {
        const directory = directories.byParent.get(hierarchy.ownDirectory);
        if (directory === undefined) continue;
        for (const controller of hierarchy.controllers) byController.set(controller, directory);
      }
      const memory = byController.get('memory');
      if (memory !== undefined) {
        writeFileSync(join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
        // Swap on top of the limit is refused where swap accounting exists.
        tryWrite(join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      }
      const pids = byController.get('pids');
      if (pids !== undefined) writeFileSync(join(pids, 'pids.max'), String(limits.maxTasks));
      return new RunCgroups(1, byController, created, limits);
    }
    const directory = created[0] as string;
    for (const controller of parents.controllers) byController.set(controller, directory);
    writeFileSync(join(directory, 'memory.max'), String(limits.memoryBytes));
    tryWrite(join(directory, 'memory.swap.max'), '0');
    // An OOM kill takes the whole run, not one process of it.
    tryWrite(join(directory, 'memory.oom.group'), '1');
    writeFileSync(join(directory, 'pids.max'), String(limits.maxTasks));
    return new RunCgroups(2, byController, created, limits);
  } catch (error) {
    removeQuietly(created);
    throw error;
  }
}

/** Removes run cgroups left by hosts that died (their pid is in the name), once per parent per process. */
function sweepStaleRunCgroups(parent: string): void {
  if (sweptParents.has(parent)) return;
  sweptParents.add(parent);
  let entries: string[];
  try {
    entries = readdirSync(parent);
  } catch {
    return;
  }
  for (const entry of entries) {
    const match = /^codecall-(\d+)-/.exec(entry);
    if (!match || isProcessAlive(Number(match[1]))) continue;
    const directory = join(parent, entry);
    killListed(directory);
    try {
      rmdirSync(directory);
    } catch {
      // Still busy or not ours to remove: leave it.
    }
  }
}
