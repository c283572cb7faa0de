import { CodecallError } from '../../core/errors.js';
import type { Limits } from '../../core/limits.js';
import { checkKnownKeys, knownKeys } from '../../core/option-checks.js';
import { receiveFromChannel } from '../../rpc/channel-end.js';
import { READY_NOTIFICATION } from '../../rpc/protocol.js';
import type { LaunchedInterpreter, RunEnvironment } from '../launch/interpreter-launch.js';
import { isRunInFlight, millisecondsSinceRunEvent } from '../launch/runs-in-flight.js';

/** Largest `pool.size` accepted. */
export const MAX_POOL_SIZE = 64;
/** Pooled interpreters that may fail to start in a row before the pool stops refilling until the next run. */
export const MAX_POOL_START_FAILURES = 3;
/**
 * How long no run may start or end, with none in flight, before the pool starts a replacement: longer than the gap
 * between runs made back to back (a loop, a queue's next job), so a refill never lands on the next run, and past the
 * release of the last run's process.
 */
export const POOL_REFILL_QUIET_MS = 50;
/**
 * How long no run may start or end while runs are in flight before the pool starts a replacement beside them: a
 * start costs a run that has lasted this long a few per cent at most, and a long run does not keep the pool empty.
 */
export const POOL_REFILL_BESIDE_RUNS_MS = 1_000;

/**
 * Limits fixed when an interpreter starts (rlimits, cgroups, the channel's frame size): a run asking for other
 * values than the pool's cannot use a pooled interpreter and starts cold.
 */
const LAUNCH_LIMIT_KEYS = [
  'memoryBytes',
  'maxProcesses',
  'maxFileBytes',
  'maxDiskBytes',
  'maxOpenFiles',
  'cpuSeconds',
  'maxFrameBytes',
] as const satisfies readonly (keyof Limits)[];

/** The `pool` option of `createCodecall`. */
export interface PoolOptions {
  /** Interpreters kept started and waiting, each used for one run (default 0: every run starts cold). */
  readonly size?: number;
}

const POOL_OPTION_KEYS = knownKeys<keyof PoolOptions>({ size: true });

/**
 * Checks the `pool` option.
 * @throws CodecallError `INVALID_CONFIG` naming the bad value.
 */
export function resolvePoolSize(pool: unknown): number {
  if (pool === undefined) return 0;
  if (typeof pool !== 'object' || pool === null || Array.isArray(pool)) {
    throw new CodecallError('INVALID_CONFIG', `pool must be an object like { size: 2 }, got ${JSON.stringify(pool)}`, {
      pool,
    });
  }
  checkKnownKeys(pool, 'pool', POOL_OPTION_KEYS);
  const size = (pool as PoolOptions).size ?? 0;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 0 || size > MAX_POOL_SIZE) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `pool.size must be an integer from 0 to ${MAX_POOL_SIZE}, got ${JSON.stringify(size)}`,
      { size },
    );
  }
  return size;
}

/** Options of {@link WarmPool}. */
export interface WarmPoolOptions {
  readonly size: number;
  /** Limits the pooled interpreters start with (the codecall's). */
  readonly limits: Limits;
  /** Starts one interpreter in `pooled` mode. */
  launch(environment: RunEnvironment): Promise<LaunchedInterpreter>;
  /** Takes the cleanup of a discarded interpreter, which `close()` of the codecall waits for. */
  deferCleanup(cleanup: Promise<void>): void;
}

interface PoolEntry {
  launched: LaunchedInterpreter | undefined;
  launching: Promise<LaunchedInterpreter | undefined>;
  ready: boolean;
  taken: boolean;
  stopWatching: (() => void) | undefined;
}

/** Not started yet, or started and its first frame not read yet. */
function isStarting(entry: PoolEntry): boolean {
  return entry.launched === undefined || (!entry.ready && entry.stopWatching !== undefined);
}

/**
 * Interpreters started ahead of time in their sandbox, each waiting (after the boot's preparation) for one script
 * over its channel. A run takes one, hands it the script with `$run`, and the pool starts a replacement once the host
 * is quiet: no run of the process in flight and none started or ended for {@link POOL_REFILL_QUIET_MS} (or, beside
 * runs in flight, for {@link POOL_REFILL_BESIDE_RUNS_MS}), one interpreter at a time (the next once the last reported `$ready` or
 * died). Starting one costs the host's thread a fork and the cores an
 * interpreter's start-up, as much as a cold run: done during runs made back to back, it slowed each of them to a cold
 * run's time, while a run that finds the pool empty merely starts cold. So under continuous load the pool stays
 * empty and runs start cold, as without a pool; it fills again in the next quiet moment. An interpreter is never
 * used twice.
 */
export class WarmPool {
  readonly #options: WarmPoolOptions;
  readonly #entries = new Set<PoolEntry>();
  /** Launches not settled yet, discarded entries' included: `close()` waits for them. */
  readonly #launches = new Set<Promise<unknown>>();
  #environment: RunEnvironment | undefined;
  #failures = 0;
  #closed = false;
  #refillTimer: NodeJS.Timeout | undefined;

  constructor(options: WarmPoolOptions) {
    this.#options = options;
  }

  /** Interpreters started or starting now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Interpreters that reported `$ready`. */
  get readyCount(): number {
    return [...this.#entries].filter((entry) => entry.ready).length;
  }

  /**
   * The first fill, and the fill after the environment changed (discarding the interpreters started for another):
   * starts interpreters until the pool is full, all at once. Later calls only ask for a refill in the next quiet
   * moment.
   */
  fill(environment: RunEnvironment): void {
    if (this.#closed || this.#options.size === 0) return;
    if (this.#environment === environment) {
      this.#scheduleRefill();
      return;
    }
    this.#discardAll();
    this.#environment = environment;
    this.#failures = 0;
    while (this.#entries.size < this.#options.size && this.#failures < MAX_POOL_START_FAILURES) {
      this.#start(environment);
    }
  }

  /**
   * A run of this codecall has returned its result (counted by `countRunInFlight` from its start): the pool refills
   * once the host has been quiet for {@link POOL_REFILL_QUIET_MS}.
   */
  runEnded(): void {
    // Every run gives a failing pool another chance.
    if (this.#failures >= MAX_POOL_START_FAILURES) this.#failures = MAX_POOL_START_FAILURES - 1;
    this.#scheduleRefill();
  }

  /**
   * A waiting interpreter for a run with these limits, or undefined when there is none or the run's launch limits
   * differ from the pool's: the run then starts cold. The pool is not refilled here (see {@link runEnded}), except
   * the first time or after the environment changed.
   */
  async take(environment: RunEnvironment, limits: Limits): Promise<LaunchedInterpreter | undefined> {
    if (this.#closed || this.#options.size === 0) return undefined;
    if (!LAUNCH_LIMIT_KEYS.every((key) => limits[key] === this.#options.limits[key])) return undefined;
    if (this.#environment !== environment) this.fill(environment);
    const entries = [...this.#entries];
    // Ready first; then started; then one still starting, which is at least as far along as a cold start.
    const entry =
      entries.find((candidate) => candidate.ready) ??
      entries.find((candidate) => candidate.launched !== undefined) ??
      entries[0];
    if (entry === undefined) return undefined;
    this.#entries.delete(entry);
    entry.taken = true;
    entry.stopWatching?.();
    const launched = entry.launched ?? (await entry.launching);
    if (launched === undefined) return undefined;
    if (launched.exit !== undefined) {
      this.#options.deferCleanup(launched.release());
      return undefined;
    }
    return launched;
  }

  /** Kills every waiting interpreter (and those still starting, once started); the pool starts no more. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#refillTimer);
    this.#discardAll();
    await Promise.allSettled([...this.#launches]);
  }

  /** How long the host must still be quiet before a refill: counted from the last start or end of a run of the process. */
  #quietLeftMs(): number {
    const quietMs = isRunInFlight() ? POOL_REFILL_BESIDE_RUNS_MS : POOL_REFILL_QUIET_MS;
    return Math.max(0, quietMs - millisecondsSinceRunEvent());
  }

  /** Sets the refill's timer to the end of the quiet time the runs in flight ask for. */
  #scheduleRefill(): void {
    if (this.#closed || this.#options.size === 0 || this.#environment === undefined) return;
    clearTimeout(this.#refillTimer);
    // Unreferenced: a pending refill does not keep a script's process alive.
    this.#refillTimer = setTimeout(() => this.#refillOne(), this.#quietLeftMs()).unref();
  }

  /** Starts one replacement, unless one is still starting (its `$ready` or its end schedules the next) or a run started
   * or ended since the timer was set (it is set again). */
  #refillOne(): void {
    this.#refillTimer = undefined;
    const environment = this.#environment;
    if (this.#closed || environment === undefined) return;
    if (this.#quietLeftMs() > 0) {
      this.#scheduleRefill();
      return;
    }
    if (this.#entries.size >= this.#options.size || this.#failures >= MAX_POOL_START_FAILURES) return;
    for (const entry of this.#entries) if (isStarting(entry)) return;
    this.#start(environment);
  }

  #start(environment: RunEnvironment): void {
    const entry: PoolEntry = {
      launched: undefined,
      launching: Promise.resolve(undefined),
      ready: false,
      taken: false,
      stopWatching: undefined,
    };
    entry.launching = this.#options.launch(environment).then(
      (launched) => {
        entry.launched = launched;
        if (!entry.taken && !this.#entries.has(entry)) {
          // Discarded while it started (pool closed, or the environment changed).
          this.#options.deferCleanup(launched.release());
          return undefined;
        }
        if (!entry.taken) this.#watch(entry, launched);
        return launched;
      },
      () => {
        this.#entries.delete(entry);
        this.#failures += 1;
        this.#scheduleRefill();
        return undefined;
      },
    );
    const launching = entry.launching;
    this.#launches.add(launching);
    void launching.then(() => this.#launches.delete(launching));
    this.#entries.add(entry);
  }

  /** Waits for `$ready` and for an early death; an idle pooled interpreter does not keep the host alive. */
  #watch(entry: PoolEntry, launched: LaunchedInterpreter): void {
    launched.holdEventLoop(false);
    let received = '';
    const onData = (bytes: Buffer, length: number) => {
      received += bytes.toString('utf8', 0, length);
      const newline = received.indexOf('\n');
      if (newline === -1) return;
      try {
        const message = JSON.parse(received.slice(0, newline)) as { method?: unknown };
        if (message.method === READY_NOTIFICATION) {
          entry.ready = true;
          this.#failures = 0;
        }
      } catch {
        // Not the boot's frame: the interpreter stays usable, only not known to be ready.
      }
      stopWatching();
      // Its start is over either way: the next refill may begin.
      this.#scheduleRefill();
    };
    let stopReceiving: (() => void) | undefined;
    let stopped = false;
    const stopWatching = () => {
      stopped = true;
      stopReceiving?.();
      // Nothing else arrives before `$run`; paused, the channel keeps whatever does for the run's server.
      launched.channel.pause();
      entry.stopWatching = undefined;
    };
    entry.stopWatching = stopWatching;
    stopReceiving = receiveFromChannel(launched.channel, onData);
    // Bytes read before this watch began are handed over at once, and may have ended it already.
    if (stopped) stopReceiving();
    void launched.exited.then(() => {
      if (entry.taken || !this.#entries.has(entry)) return;
      this.#entries.delete(entry);
      if (!entry.ready) this.#failures += 1;
      this.#options.deferCleanup(launched.release());
      this.#scheduleRefill();
    });
  }

  #discardAll(): void {
    const entries = [...this.#entries];
    this.#entries.clear();
    for (const entry of entries) {
      entry.stopWatching?.();
      if (entry.launched !== undefined) this.#options.deferCleanup(entry.launched.release());
    }
  }
}
