import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex, PassThrough } from 'node:stream';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { IsolationLevel, LimitReason } from '../../src/core/isolation.js';
import { type Limits, resolveLimits } from '../../src/core/limits.js';
import type { ProcessExit } from '../../src/engine/launch/interpreter-launch.js';
import { type LimitEvidence, limitReasonOf } from '../../src/engine/supervise/limit-reason.js';
import type { CapturedOutput } from '../../src/engine/supervise/output-capture.js';
import {
  CELL_INTERRUPT_GRACE_MS,
  interruptThenKillPolicy,
  KILL_GRACE_MS,
  killPolicy,
  type StopPolicy,
} from '../../src/engine/supervise/stop-policy.js';
import { type SupervisedProcess, type SuperviseOptions, Supervisor } from '../../src/engine/supervise/supervisor.js';
import { outputEndMarker } from '../../src/rpc/protocol.js';
import type { RunContainment } from '../../src/sandbox/runner.js';

const outputRoot = mkdtempSync(join(tmpdir(), 'codecall-supervisor-test-'));
afterAll(() => rmSync(outputRoot, { recursive: true, force: true }));
afterEach(() => {
  vi.useRealTimers();
});

/**
 * An interpreter stand-in over in-memory streams: the test writes what the script would print and send, reads what
 * the host sends, and decides when the process exits. Its signal and kill functions only record their calls.
 */
function fakeInterpreter(options: { readonly containment?: RunContainment } = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const fromScript = new PassThrough();
  const toScript = new PassThrough();
  const stdin = new PassThrough();
  const channel = Duplex.from({ readable: fromScript, writable: toScript });
  const hostFrames: unknown[] = [];
  let received = '';
  toScript.on('data', (chunk: Buffer) => {
    received += chunk.toString('utf8');
    let newline = received.indexOf('\n');
    while (newline !== -1) {
      hostFrames.push(JSON.parse(received.slice(0, newline)));
      received = received.slice(newline + 1);
      newline = received.indexOf('\n');
    }
  });
  let exit: ProcessExit | undefined;
  let resolveExited!: (exit: ProcessExit) => void;
  const exited = new Promise<ProcessExit>((resolve) => {
    resolveExited = resolve;
  });
  const process: SupervisedProcess & {
    readonly stdout: PassThrough;
    readonly stderr: PassThrough;
    readonly stdin: PassThrough;
  } = {
    runId: 'fake',
    directory: { root: outputRoot, tmp: outputRoot, artifacts: outputRoot },
    channel,
    stdout,
    stderr,
    stdin,
    containment: options.containment,
    exited,
    get exit() {
      return exit;
    },
    signal: vi.fn(),
    killAll: vi.fn(async () => {}),
    holdEventLoop: vi.fn(),
  };
  return {
    process,
    hostFrames,
    /** Sends one frame as the script would. */
    send(frame: unknown): void {
      fromScript.write(`${JSON.stringify(frame)}\n`);
    },
    /** The script's end of the channel closes. */
    endChannel(): void {
      fromScript.end();
    },
    /** The process exits: its pipes close, then the exit is reported, as a child process's are. */
    exitWith(code: number | null, signal: NodeJS.Signals | null = null): void {
      stdout.end();
      stderr.end();
      exit = { code, signal };
      resolveExited(exit);
    },
  };
}

function limitsOf(overrides: Partial<Limits> = {}): Limits {
  return resolveLimits(overrides);
}

function supervisorOf(
  process: SupervisedProcess,
  options: { readonly limits?: Limits; readonly isolation?: IsolationLevel } = {},
): Supervisor {
  return new Supervisor({
    process,
    tools: new Map(),
    isolation: options.isolation ?? 'none',
    limits: options.limits ?? limitsOf(),
  });
}

/** A stop policy that only records how it is used. */
function recordingPolicy() {
  const cancel = vi.fn();
  const stop = vi.fn((_reason: LimitReason) => cancel);
  const policy: StopPolicy = { stop };
  return { policy, stop, cancel };
}

let spans = 0;
function runOptions(overrides: Partial<SuperviseOptions> = {}): SuperviseOptions {
  spans += 1;
  return {
    limits: limitsOf(),
    nonce: 'n0nce',
    fullOutputPath: join(outputRoot, `span-${spans}-stdout.txt`),
    artifactsFolder: join(outputRoot, `span-${spans}`),
    stopPolicy: recordingPolicy().policy,
    ...overrides,
  };
}

const text = (capture: CapturedOutput) => Buffer.concat([capture.head, capture.tail]).toString('utf8');
const marked = (nonce: string, before = '') => Buffer.concat([Buffer.from(before), outputEndMarker(nonce)]);

/** Whether `promise` settled once pending I/O and timers of this turn have run. */
async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('the supervisor of a one-shot run', () => {
  it('ends the run at the boot`s $done, keeps only the output before the end markers, and kills the group', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(runOptions());
    fake.process.stdout.write(Buffer.concat([marked('n0nce', 'hello '), Buffer.from('from a leftover thread')]));
    fake.process.stderr.write(marked('n0nce', 'warning'));
    fake.send({ method: '$done', params: { exitCode: 0 } });
    const outcome = await running;
    expect(outcome).toMatchObject({ exitCode: 0, signal: null, reason: undefined, processEnded: true });
    expect(text(outcome.stdout)).toBe('hello ');
    expect(text(outcome.stderr)).toBe('warning');
    expect(fake.process.signal).toHaveBeenCalledWith('SIGKILL');
    expect(fake.process.holdEventLoop).toHaveBeenCalledWith(true);
    expect(fake.process.channel.destroyed).toBe(true);
  });

  it('finds an end marker split across chunks, and takes bytes held back as output when the stream closes', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(runOptions());
    const marker = marked('n0nce', 'split');
    fake.process.stdout.write(marker.subarray(0, 9));
    fake.process.stdout.write(marker.subarray(9));
    // Starts like a marker, but the stream closes before it could be one.
    fake.process.stderr.write(Buffer.concat([Buffer.from('tail'), outputEndMarker('n0nce').subarray(0, 5)]));
    fake.exitWith(0);
    const outcome = await running;
    expect(text(outcome.stdout)).toBe('split');
    expect(outcome.stderr.totalBytes).toBe(9);
    expect(text(outcome.stderr).startsWith('tail')).toBe(true);
  });

  it('takes all of a stream up to its close as the output of a run whose boot writes no end marker', async () => {
    const fake = fakeInterpreter();
    const running = supervisorOf(fake.process).supervise(runOptions({ nonce: undefined }));
    fake.process.stdout.write(marked('n0nce', 'all'));
    fake.exitWith(0);
    const outcome = await running;
    expect(outcome.stdout.totalBytes).toBe(marked('n0nce', 'all').length);
  });

  it('stops the run at its timeout through its stop policy, with reason timeout, and cancels the policy at the end', async () => {
    const fake = fakeInterpreter();
    const { policy, stop, cancel } = recordingPolicy();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(runOptions({ limits: limitsOf({ timeoutMs: 20 }), stopPolicy: policy }));
    await vi.waitFor(() => expect(stop).toHaveBeenCalled());
    expect(stop.mock.calls).toEqual([['timeout']]);
    expect(cancel).not.toHaveBeenCalled();
    fake.exitWith(null, 'SIGTERM');
    const outcome = await running;
    expect(outcome).toMatchObject({ reason: 'timeout', signal: 'SIGTERM', exitCode: null });
    expect(cancel).toHaveBeenCalledTimes(1);
  });

  it('stops the run once when its output floods, with reason output', async () => {
    const fake = fakeInterpreter();
    const { policy, stop } = recordingPolicy();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(
      runOptions({ limits: limitsOf({ maxOutputBytes: 1_000 }), stopPolicy: policy }),
    );
    fake.process.stdout.write(Buffer.alloc(600, 'a'));
    fake.process.stderr.write(Buffer.alloc(600, 'b'));
    await vi.waitFor(() => expect(stop).toHaveBeenCalled());
    fake.process.stdout.write(Buffer.alloc(600, 'c'));
    fake.exitWith(null, 'SIGTERM');
    const outcome = await running;
    expect(stop.mock.calls).toEqual([['output']]);
    expect(outcome.reason).toBe('output');
  });

  it('wires the abort signal to the stop policy while the run lasts, and keeps the first reason', async () => {
    const fake = fakeInterpreter();
    const { policy, stop } = recordingPolicy();
    const controller = new AbortController();
    const supervisor = supervisorOf(fake.process);
    let stopRun: ((reason: LimitReason) => void) | undefined;
    const running = supervisor.supervise(
      runOptions({
        stopPolicy: policy,
        signal: controller.signal,
        onStart: (stopFunction) => {
          stopRun = stopFunction;
        },
      }),
    );
    controller.abort();
    stopRun?.('timeout');
    fake.exitWith(null, 'SIGTERM');
    const outcome = await running;
    expect(stop.mock.calls).toEqual([['aborted']]);
    expect(outcome.reason).toBe('aborted');
  });

  it('no longer listens to the signal once the run has ended', async () => {
    const fake = fakeInterpreter();
    const { policy, stop } = recordingPolicy();
    const controller = new AbortController();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(runOptions({ stopPolicy: policy, signal: controller.signal }));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    fake.send({ method: '$done', params: { exitCode: 0 } });
    fake.exitWith(0);
    const outcome = await running;
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort();
    expect(stop).not.toHaveBeenCalled();
    expect(outcome.reason).toBeUndefined();
  });

  it('reads a bubblewrap exit status of 128 + N as signal N, unless the boot reported that status itself', async () => {
    const killed = fakeInterpreter();
    const killedOutcome = await (async () => {
      const running = supervisorOf(killed.process, { isolation: 'bubblewrap' }).supervise(runOptions());
      killed.exitWith(137);
      return running;
    })();
    expect(killedOutcome).toMatchObject({ exitCode: null, signal: 'SIGKILL', isolation: 'bubblewrap' });

    const reported = fakeInterpreter();
    const reportedOutcome = await (async () => {
      const running = supervisorOf(reported.process, { isolation: 'bubblewrap' }).supervise(runOptions());
      reported.process.stdout.write(marked('n0nce'));
      reported.process.stderr.write(marked('n0nce'));
      reported.send({ method: '$done', params: { exitCode: 137 } });
      return running;
    })();
    expect(reportedOutcome).toMatchObject({ exitCode: 137, signal: null });
  });

  it('asks the containment for a limit only when the interpreter failed', async () => {
    const limitReason = vi.fn(async (): Promise<LimitReason | undefined> => 'memory');
    const failed = fakeInterpreter({ containment: { limitReason } });
    const failedRun = supervisorOf(failed.process).supervise(runOptions());
    failed.exitWith(null, 'SIGKILL');
    expect((await failedRun).reason).toBe('memory');
    expect(limitReason).toHaveBeenCalledTimes(1);

    const succeeded = fakeInterpreter({ containment: { limitReason } });
    const succeededRun = supervisorOf(succeeded.process).supervise(runOptions());
    succeeded.exitWith(0);
    expect((await succeededRun).reason).toBeUndefined();
    expect(limitReason).toHaveBeenCalledTimes(1);
  });

  it('takes the exception the boot reported, and counts tool calls against the run`s limit', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(runOptions({ limits: limitsOf({ maxToolCalls: 1 }) }));
    fake.send({ id: 1, method: 'missing_tool', params: {} });
    fake.send({ id: 2, method: 'missing_tool', params: {} });
    fake.send({ method: '$exception', params: { type: 'ToolError', message: 'limit', traceback: 'Traceback' } });
    await vi.waitFor(() => expect(fake.hostFrames).toHaveLength(2));
    fake.process.stdout.write(marked('n0nce'));
    fake.process.stderr.write(marked('n0nce'));
    fake.send({ method: '$done', params: { exitCode: 1 } });
    const outcome = await running;
    expect(outcome).toMatchObject({
      exitCode: 1,
      reason: 'tool_calls',
      toolCalls: 1,
      toolCallLimitReached: true,
      exception: { type: 'ToolError', message: 'limit', traceback: 'Traceback' },
    });
  });

  it('ends a run whose interpreter had exited before it was supervised', async () => {
    const fake = fakeInterpreter();
    fake.exitWith(2);
    await fake.process.exited;
    const outcome = await supervisorOf(fake.process).supervise(runOptions());
    expect(outcome).toMatchObject({ exitCode: 2, processEnded: true });
  });

  it('takes the files and the $done the channel still held when the exit was seen first', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const outcome = supervisor.supervise(runOptions());
    fake.exitWith(0);
    await fake.process.exited;
    // After the exit: the boot's last file, sent at its exit, then its `$done`, then the channel's end.
    fake.send({
      method: '$artifact',
      params: { name: 'log.txt', offset: 0, data: Buffer.from('x'.repeat(1000)).toString('base64'), final: true },
    });
    fake.send({ method: '$done', params: { exitCode: 0, stdout: false, stderr: false } });
    fake.endChannel();
    const result = await outcome;
    expect(result).toMatchObject({ exitCode: 0, processEnded: true });
    expect(result.artifacts.artifacts.map((artifact) => artifact.path.split('/').pop())).toEqual(['log.txt']);
  });
});

describe('the supervisor of session cells', () => {
  const cellOptions = (id: number, overrides: Partial<SuperviseOptions> = {}) =>
    runOptions({
      nonce: `cell${id}`,
      cellId: id,
      handOver: `{"method":"$cell","params":{"id":${id}}}\n`,
      ...overrides,
    });

  it('ends a cell at its $cell_done once both end markers went by, and leaves the interpreter waiting', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    fake.process.stdout.write('printed between cells ');
    await settledYet(Promise.resolve());
    const running = supervisor.supervise(cellOptions(1));
    expect(supervisor.running).toBe(true);
    fake.process.stdout.write(marked('cell1', 'x = 1'));
    // Forged by the cell: a cell never ends at `$done`, nor at another cell's report.
    fake.send({ method: '$done', params: { exitCode: 0 } });
    fake.send({ method: '$cell_done', params: { id: 2, exitCode: 0, stdout: true, stderr: true } });
    fake.send({ method: '$cell_done', params: { id: 1, exitCode: 0, exception: null, stdout: true, stderr: true } });
    expect(await settledYet(running)).toBe(false);
    fake.process.stderr.write(marked('cell1'));
    const outcome = await running;
    expect(outcome).toMatchObject({ exitCode: 0, signal: null, reason: undefined, processEnded: false });
    expect(text(outcome.stdout)).toBe('x = 1');
    expect(supervisor.running).toBe(false);
    expect(fake.process.signal).not.toHaveBeenCalled();
    expect(fake.process.holdEventLoop).toHaveBeenLastCalledWith(false);
    expect(fake.hostFrames).toContainEqual({ method: '$cell', params: { id: 1 } });
    expect(fake.process.channel.destroyed).toBe(false);
  });

  it('does not wait for the marker of a stream the cell closed, and refuses tool calls between cells', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    fake.send({ id: 1, method: 'early', params: {} });
    await vi.waitFor(() => expect(fake.hostFrames).toHaveLength(1));
    const running = supervisor.supervise(cellOptions(1));
    fake.process.stderr.write(marked('cell1'));
    fake.send({
      method: '$cell_done',
      params: {
        id: 1,
        exitCode: 1,
        exception: { type: 'ValueError', message: 'bad', traceback: 'Traceback' },
        stdout: false,
        stderr: true,
      },
    });
    const outcome = await running;
    expect(outcome).toMatchObject({
      exitCode: 1,
      exception: { type: 'ValueError', message: 'bad' },
      processEnded: false,
    });
    fake.send({ id: 2, method: 'late', params: {} });
    await vi.waitFor(() => expect(fake.hostFrames).toHaveLength(3));
    expect(fake.hostFrames).toContainEqual({
      id: 1,
      error: { code: -32004, message: 'early: no cell is running; tools can be called only while a cell runs' },
    });
    expect(fake.hostFrames).toContainEqual({
      id: 2,
      error: { code: -32004, message: 'late: the cell has ended; tools can be called only while a cell runs' },
    });
  });

  it('runs the next cell on the same interpreter with fresh captures and a fresh stop', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const firstPolicy = recordingPolicy();
    const first = supervisor.supervise(
      cellOptions(1, { limits: limitsOf({ timeoutMs: 10 }), stopPolicy: firstPolicy.policy }),
    );
    await vi.waitFor(() => expect(firstPolicy.stop).toHaveBeenCalledWith('timeout'));
    fake.process.stdout.write(marked('cell1', 'one'));
    fake.process.stderr.write(marked('cell1'));
    fake.send({ method: '$cell_done', params: { id: 1, exitCode: 1, stdout: true, stderr: true } });
    expect((await first).reason).toBe('timeout');
    const { policy, stop } = recordingPolicy();
    const second = supervisor.supervise(cellOptions(2, { stopPolicy: policy }));
    fake.process.stdout.write(marked('cell2', 'two'));
    fake.process.stderr.write(marked('cell2'));
    fake.send({ method: '$cell_done', params: { id: 2, exitCode: 0, stdout: true, stderr: true } });
    const outcome = await second;
    expect(text(outcome.stdout)).toBe('two');
    expect(outcome.reason).toBeUndefined();
    expect(stop).not.toHaveBeenCalled();
  });

  it('ends a cell with the interpreter when it exits: the group is killed and the channel closed', async () => {
    const fake = fakeInterpreter();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(cellOptions(1));
    fake.process.stdout.write('bye');
    fake.exitWith(3);
    const outcome = await running;
    expect(outcome).toMatchObject({ exitCode: 3, processEnded: true });
    expect(text(outcome.stdout)).toBe('bye');
    expect(fake.process.signal).toHaveBeenCalledWith('SIGKILL');
    expect(fake.process.channel.destroyed).toBe(true);
  });

  it('reads the exit status of a cell`s sandboxed interpreter like a run`s: 128 + N is signal N', async () => {
    const fake = fakeInterpreter();
    const running = supervisorOf(fake.process, { isolation: 'bubblewrap' }).supervise(cellOptions(1));
    fake.exitWith(143);
    expect(await running).toMatchObject({ exitCode: null, signal: 'SIGTERM', processEnded: true });
  });

  it('kills the interpreter on the spot, ending the running cell with the reason given', async () => {
    const fake = fakeInterpreter();
    const { policy, stop } = recordingPolicy();
    const supervisor = supervisorOf(fake.process);
    const running = supervisor.supervise(cellOptions(1, { stopPolicy: policy }));
    await supervisor.kill('aborted');
    expect(fake.process.killAll).toHaveBeenCalledTimes(1);
    fake.exitWith(null, 'SIGKILL');
    expect((await running).reason).toBe('aborted');
    expect(stop).not.toHaveBeenCalled();
  });

  it('drops output written while no cell runs, and kills the interpreter when that floods', async () => {
    const fake = fakeInterpreter();
    supervisorOf(fake.process, { limits: limitsOf({ maxOutputBytes: 1_000 }) });
    fake.process.stdout.write(Buffer.alloc(900));
    await settledYet(Promise.resolve());
    expect(fake.process.killAll).not.toHaveBeenCalled();
    fake.process.stderr.write(Buffer.alloc(200));
    await vi.waitFor(() => expect(fake.process.killAll).toHaveBeenCalled());
  });
});

describe('the limit reason of an outcome', () => {
  const evidence = (overrides: Partial<LimitEvidence>): LimitEvidence => ({
    stoppedFor: undefined,
    containment: undefined,
    exitCode: 1,
    signal: null,
    exception: undefined,
    toolCallLimitReached: false,
    ...overrides,
  });
  const memoryError = { type: 'MemoryError', message: '' };

  it('takes the first match: the supervisor`s stop, the containment, SIGXCPU, a MemoryError, the tool-call limit', () => {
    const all = {
      stoppedFor: 'timeout',
      containment: 'pids',
      signal: 'SIGXCPU',
      exitCode: null,
      exception: memoryError,
      toolCallLimitReached: true,
    } as const;
    expect(limitReasonOf(evidence(all))).toBe('timeout');
    expect(limitReasonOf(evidence({ ...all, stoppedFor: undefined }))).toBe('pids');
    expect(limitReasonOf(evidence({ ...all, stoppedFor: undefined, containment: undefined }))).toBe('cpu');
    expect(limitReasonOf(evidence({ ...all, stoppedFor: undefined, containment: undefined, signal: null }))).toBe(
      'memory',
    );
    expect(
      limitReasonOf(
        evidence({ ...all, stoppedFor: undefined, containment: undefined, signal: null, exception: undefined }),
      ),
    ).toBe('tool_calls');
    expect(limitReasonOf(evidence({}))).toBeUndefined();
  });

  it('reads a MemoryError or a reached tool-call limit as the reason only when the exit failed', () => {
    expect(limitReasonOf(evidence({ exitCode: 0, exception: memoryError, toolCallLimitReached: true }))).toBe(
      undefined,
    );
    expect(limitReasonOf(evidence({ exitCode: 0, stoppedFor: 'output' }))).toBe('output');
  });
});

describe('the stop policies', () => {
  function stoppable() {
    return { signal: vi.fn(), killAll: vi.fn(async () => {}), stdin: new PassThrough() };
  }

  it('kill: SIGTERM to the group now, everything killed after the grace time', () => {
    vi.useFakeTimers();
    const process = stoppable();
    killPolicy(process).stop('timeout');
    expect(process.signal.mock.calls).toEqual([['SIGTERM']]);
    vi.advanceTimersByTime(KILL_GRACE_MS - 1);
    expect(process.killAll).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(process.killAll).toHaveBeenCalledTimes(1);
  });

  it('kill: nothing more once cancelled', () => {
    vi.useFakeTimers();
    const process = stoppable();
    const cancel = killPolicy(process).stop('output');
    cancel();
    vi.advanceTimersByTime(KILL_GRACE_MS * 10);
    expect(process.killAll).not.toHaveBeenCalled();
  });

  it('interrupt then kill: the cell id on the interrupt pipe, then SIGTERM, then everything killed', () => {
    vi.useFakeTimers();
    const process = stoppable();
    interruptThenKillPolicy(process, 7).stop('aborted');
    expect(process.stdin.read()?.toString()).toBe('7\n');
    expect(process.signal).not.toHaveBeenCalled();
    vi.advanceTimersByTime(CELL_INTERRUPT_GRACE_MS);
    expect(process.signal.mock.calls).toEqual([['SIGTERM']]);
    expect(process.killAll).not.toHaveBeenCalled();
    vi.advanceTimersByTime(KILL_GRACE_MS);
    expect(process.killAll).toHaveBeenCalledTimes(1);
  });

  it('interrupt then kill: a cell that ends on its interrupt is not killed', () => {
    vi.useFakeTimers();
    const process = stoppable();
    const cancel = interruptThenKillPolicy(process, 1).stop('timeout');
    vi.advanceTimersByTime(CELL_INTERRUPT_GRACE_MS - 1);
    cancel();
    vi.advanceTimersByTime(CELL_INTERRUPT_GRACE_MS + KILL_GRACE_MS);
    expect(process.signal).not.toHaveBeenCalled();
    expect(process.killAll).not.toHaveBeenCalled();
  });

  it('interrupt then kill: cancelling after the SIGTERM still stops the kill', () => {
    vi.useFakeTimers();
    const process = stoppable();
    const cancel = interruptThenKillPolicy(process, 1).stop('timeout');
    vi.advanceTimersByTime(CELL_INTERRUPT_GRACE_MS);
    cancel();
    vi.advanceTimersByTime(KILL_GRACE_MS * 10);
    expect(process.signal.mock.calls).toEqual([['SIGTERM']]);
    expect(process.killAll).not.toHaveBeenCalled();
  });
});
