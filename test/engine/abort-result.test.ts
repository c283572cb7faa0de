import { describe, expect, it } from 'vitest';
import { CodecallAbortError } from '../../src/core/errors.js';
import type { RunEvent } from '../../src/engine/supervise/run-events.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

/** A listener that aborts `controller` once the script printed `marker`; records every event. */
function abortAfterOutput(controller: AbortController, marker: string) {
  const events: RunEvent[] = [];
  return {
    events,
    onEvent: (event: RunEvent) => {
      events.push(event);
      if (event.type === 'stdout' && event.text.includes(marker)) controller.abort(new Error('user pressed stop'));
    },
  };
}

const PRINT_THEN_WAIT = [
  'from tools import add',
  'print("step", add(a=1, b=1), flush=True)',
  'print("ready", flush=True)',
  'import time',
  'time.sleep(30)',
  'print("never")',
].join('\n');

describe('an aborted run keeps what it printed', () => {
  const codecall = codecallWith({ tools: [add] });

  it('rejects with an AbortError carrying the result: status aborted, stdout so far, tool calls', async () => {
    const controller = new AbortController();
    const { events, onEvent } = abortAfterOutput(controller, 'ready');
    const error = await codecall.execute(PRINT_THEN_WAIT, { signal: controller.signal, onEvent }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(CodecallAbortError);
    const { result } = error as CodecallAbortError;
    expect(result).toMatchObject({ status: 'aborted', reason: 'aborted', stdout: 'step 2\nready\n', toolCalls: 1 });
    expect((error as CodecallAbortError).cause).toEqual(new Error('user pressed stop'));
    expect(events.at(-1)).toEqual({ type: 'run-end', result });
  });

  it('does the same for a session cell', async () => {
    const session = codecall.session();
    try {
      const controller = new AbortController();
      const { onEvent } = abortAfterOutput(controller, 'ready');
      const error = await session.execute(PRINT_THEN_WAIT, { signal: controller.signal, onEvent }).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(CodecallAbortError);
      expect((error as CodecallAbortError).result).toMatchObject({ status: 'aborted', stdout: 'step 2\nready\n' });
    } finally {
      await session.close();
    }
  });

  it('carries no result when the signal fired before the run started', async () => {
    const error = await codecall.execute('print(1)', { signal: AbortSignal.abort() }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(CodecallAbortError);
    expect((error as CodecallAbortError).result).toBeUndefined();
  });
});
