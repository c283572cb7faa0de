import type { Limits } from '../../core/limits.js';
import { randomHex } from '../../core/random-bytes.js';
import type { ApproveToolCall } from '../../tools/tool-approval.js';
import type { LaunchedInterpreter, RunEnvironment } from '../launch/interpreter-launch.js';
import { cellFrame } from './hand-over.js';
import type { RunEvents } from './run-events.js';
import { interruptThenKillPolicy } from './stop-policy.js';
import { type SupervisedOutcome, type Supervisor, supervisorFor } from './supervisor.js';

/** One session interpreter process and its supervisor, which runs its cells one at a time. */
export class SessionProcess {
  readonly launched: LaunchedInterpreter;
  readonly environment: RunEnvironment;
  readonly #supervisor: Supervisor;
  readonly #noncePrefix: string;

  constructor(
    launched: LaunchedInterpreter,
    environment: RunEnvironment,
    limits: Limits,
    onExit: (process: SessionProcess) => void,
  ) {
    this.launched = launched;
    this.environment = environment;
    // Random per interpreter, then the cell id: a script cannot guess a marker without reading the boot's memory.
    this.#noncePrefix = randomHex(6);
    this.#supervisor = supervisorFor(launched, environment, limits);
    void launched.exited.then(() => onExit(this));
    // An idle session interpreter does not keep the host alive.
    launched.holdEventLoop(false);
  }

  /** Whether the process still runs. */
  get alive(): boolean {
    return this.launched.exit === undefined;
  }

  /** Whether a cell runs now. */
  get running(): boolean {
    return this.#supervisor.running;
  }

  /**
   * Runs one cell: sends `$cell` (from then on the output streams are the cell's), then waits for `$cell_done` and
   * both end markers, or for the process to exit. A cell that overruns gets a KeyboardInterrupt, then the kill.
   */
  run(options: {
    readonly id: number;
    readonly code: string;
    readonly limits: Limits;
    readonly outputPath: string;
    /** The host-only folder the cell's artifacts are written into. */
    readonly artifactsFolder: string;
    readonly signal?: AbortSignal | undefined;
    readonly events?: RunEvents | undefined;
    readonly approveToolCall?: ApproveToolCall | undefined;
  }): Promise<SupervisedOutcome> {
    const { id, limits } = options;
    const nonce = `${this.#noncePrefix}${id.toString(16)}`;
    return this.#supervisor.supervise({
      limits,
      nonce,
      fullOutputPath: options.outputPath,
      artifactsFolder: options.artifactsFolder,
      stopPolicy: interruptThenKillPolicy(this.launched, id),
      handOver: cellFrame({ id, code: options.code, nonce, cpuSeconds: limits.cpuSeconds }),
      cellId: id,
      signal: options.signal,
      events: options.events,
      approveToolCall: options.approveToolCall,
    });
  }

  /** Kills the interpreter now (reset, close, eviction); a running cell ends `aborted`. */
  kill(): Promise<void> {
    return this.#supervisor.kill('aborted');
  }
}
