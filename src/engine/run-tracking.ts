import { CodecallError } from '../core/errors.js';
import type { LimitReason } from '../core/isolation.js';
import type { RunEnvironment } from './launch/interpreter-launch.js';
import type { InterpreterSession, SessionContext } from './supervise/session.js';
import { SessionSlots } from './supervise/session-slots.js';

/** Options of {@link RunTracking}. */
export interface RunTrackingOptions {
  /** Session interpreters alive at once (the `sessions.maxLive` option). */
  readonly maxLiveSessions: number;
}

/** What {@link RunTracking.close} stops besides the runs and sessions it tracks. */
export interface CloseResources {
  /** The warm pool, closed while the sessions close. */
  readonly pool?: { close(): Promise<void> } | undefined;
  /** Closes the upstream connections, last: runs in progress may still call their tools. */
  closeSources(): Promise<void>;
  /** Closes the sandbox runner once no run is in progress, beside the cleanups of the runs (see `SandboxRunner.close`). */
  closeRunner?(): Promise<void>;
}

/**
 * Everything of one codecall that `close()` must end or wait for: runs in progress (stopped as `aborted`), runs not
 * settled yet, cleanups deferred past a result, and open sessions.
 */
export class RunTracking {
  readonly #liveRuns = new Set<(reason: LimitReason) => void>();
  readonly #pendingRuns = new Set<Promise<unknown>>();
  readonly #pendingCleanups = new Set<Promise<void>>();
  readonly #sessions = new Set<InterpreterSession>();
  readonly #slots: SessionSlots;
  #closed = false;

  constructor(options: RunTrackingOptions) {
    this.#slots = new SessionSlots(options.maxLiveSessions);
  }

  /** Whether `close()` has begun. */
  get closed(): boolean {
    return this.#closed;
  }

  /** @throws CodecallError `CLOSED` once `close()` has begun. */
  assertOpen(): void {
    if (this.#closed) throw new CodecallError('CLOSED', 'this codecall is closed; create a new one');
  }

  /**
   * Takes cleanup work (leftover processes, sandbox resources, run directories) that runs after the result is
   * returned; `close()` waits for it. A function property, so it can be handed on as it is.
   */
  readonly deferCleanup = (cleanup: Promise<void>): void => {
    const tracked = cleanup.catch(() => {});
    this.#pendingCleanups.add(tracked);
    void tracked.then(() => this.#pendingCleanups.delete(tracked));
  };

  /**
   * Tracks one run from its start until it settles. `start` gets the `onStart` callback to hand to the run, which
   * registers the run's stop function (and stops the run at once if `close()` has begun meanwhile).
   */
  async track<T>(start: (onStart: (stop: (reason: LimitReason) => void) => void) => Promise<T>): Promise<T> {
    let stopRun: ((reason: LimitReason) => void) | undefined;
    const run = start((stop) => {
      stopRun = stop;
      this.#liveRuns.add(stop);
      if (this.#closed) stop('aborted');
    });
    this.#pendingRuns.add(run);
    try {
      return await run;
    } finally {
      this.#pendingRuns.delete(run);
      if (stopRun !== undefined) this.#liveRuns.delete(stopRun);
    }
  }

  /** What a new session needs of its codecall: the preparation, the shared slots, the cleanup tracking. */
  sessionContext(prepare: () => Promise<RunEnvironment>): SessionContext {
    return {
      prepare,
      slots: this.#slots,
      deferCleanup: this.deferCleanup,
      onClose: (session) => this.#sessions.delete(session),
    };
  }

  /** Tracks an open session until it closes; returns it. */
  addSession(session: InterpreterSession): InterpreterSession {
    this.#sessions.add(session);
    return session;
  }

  /**
   * Stops every run in progress (status `aborted`), closes the sessions and the pool, waits for the runs and their
   * cleanups, then closes the upstream connections. Later calls resolve at once.
   */
  async close(resources: CloseResources): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const stop of this.#liveRuns) stop('aborted');
    const poolClosed = resources.pool?.close();
    await Promise.allSettled([...this.#sessions].map((session) => session.close()));
    await poolClosed;
    await Promise.allSettled([...this.#pendingRuns]);
    const runnerClosed = resources.closeRunner?.();
    while (this.#pendingCleanups.size > 0) await Promise.allSettled([...this.#pendingCleanups]);
    await resources.closeSources();
    await runnerClosed;
  }
}
