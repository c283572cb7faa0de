import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChannelErrorCode, RAW_TEXT_FIELD } from '../../src/rpc/protocol.js';
import { RAW_TEXT_MIN_CHARS } from '../../src/rpc/raw-text.js';
import {
  MAX_UNREAD_REPLY_BYTES,
  TOOL_CALL_FLOOD_ALLOWANCE,
  ToolCallServer,
  type ToolCallServerOptions,
} from '../../src/rpc/tool-call-server.js';
import type { RegisteredTool } from '../../src/tools/registered-tool.js';
import { createToolRegistry, registerTool } from '../../src/tools/registry.js';
import type { JsonSchema, Tool, ToolContext } from '../../src/tools/types.js';
import { createChannelPair } from './support/in-memory-channel.js';

/** A reply frame as the script reads it. */
interface Reply {
  readonly id: number | null;
  readonly result?: unknown;
  readonly error?: { readonly code: number; readonly message: string };
}

/**
 * The script's side of the channel: writes frames and reads the host's replies in the order they were written, with
 * the raw text that follows a frame put in its place, as the runtime does. `frames` keeps each frame as written.
 */
class ScriptSide {
  readonly #socket: Duplex;
  readonly #replies: Reply[] = [];
  readonly frames: string[] = [];
  #partial = Buffer.alloc(0);
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(socket: Duplex) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#partial = Buffer.concat([this.#partial, chunk]);
      for (;;) {
        const newline = this.#partial.indexOf(10);
        if (newline === -1) break;
        const frame = this.#partial.toString('utf8', 0, newline);
        const reply = JSON.parse(frame) as Reply & { [RAW_TEXT_FIELD]?: [string | null, number][] };
        const segments = reply[RAW_TEXT_FIELD] ?? [];
        const rawBytes = segments.reduce((sum, [, bytes]) => sum + bytes, 0);
        if (this.#partial.length < newline + 1 + rawBytes) break;
        let position = newline + 1;
        for (const [key, bytes] of segments) {
          const text = this.#partial.toString('utf8', position, position + bytes);
          position += bytes;
          if (key === null) (reply as { result?: unknown }).result = text;
          else (reply.result as Record<string, unknown>)[key] = text;
        }
        delete reply[RAW_TEXT_FIELD];
        this.frames.push(frame);
        this.#replies.push(reply);
        this.#partial = this.#partial.subarray(position);
      }
      this.#wake?.();
    });
    socket.on('end', () => {
      this.#ended = true;
      this.#wake?.();
    });
  }

  /** Whether the host closed the channel. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Writes raw bytes, exactly as given. */
  send(frame: string | Buffer): void {
    this.#socket.write(frame);
  }

  /** Writes one call frame. */
  call(id: number, method: string, params?: unknown): void {
    this.send(`${JSON.stringify({ id, method, params })}\n`);
  }

  /** The next `count` replies; fails if the host closes the channel first. */
  async read(count: number): Promise<Reply[]> {
    while (this.#replies.length < count) {
      if (this.#ended) throw new Error(`the channel ended after ${this.#replies.length} of ${count} replies`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
    return this.#replies.splice(0, count);
  }

  /** The next reply. */
  async next(): Promise<Reply> {
    const [reply] = await this.read(1);
    return reply as Reply;
  }

  /** Resolves once the host has closed the channel. */
  async closed(): Promise<void> {
    while (!this.#ended) {
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }
}

type ServerSettings = Partial<Omit<ToolCallServerOptions, 'socket' | 'tools'>>;

const servers: ToolCallServer[] = [];

afterEach(() => {
  for (const server of servers.splice(0)) server.end();
  vi.useRealTimers();
});

/** Starts a server over an in-memory channel with these tools; settings default to roomy limits. */
function startServer(tools: readonly (Tool | RegisteredTool)[], settings: ServerSettings = {}) {
  const { host, script } = createChannelPair();
  const registry = createToolRegistry(tools.map((tool) => ('descriptor' in tool ? tool : registerTool(tool))));
  const server = new ToolCallServer({
    socket: host,
    tools: registry,
    runId: 'run-1',
    artifactsDir: '/artifacts/run-1',
    maxToolCalls: 100,
    toolCallTimeoutMs: 10_000,
    maxFrameBytes: 64 * 1024,
    maxConcurrentToolCalls: 8,
    ...settings,
  });
  servers.push(server);
  return { server, host, script: new ScriptSide(script) };
}

type Handler = (args: Record<string, unknown>, context: ToolContext) => unknown;

/** A tool around a handler (a `vi.fn` where the test observes its calls), with a JSON Schema of its arguments. */
function toolOf(name: string, execute: Handler, inputSchema: JsonSchema = { type: 'object' }): Tool {
  return { name, description: `The ${name} tool.`, inputSchema, execute };
}

const ADD_SCHEMA: JsonSchema = {
  type: 'object',
  properties: { a: { type: 'number' }, b: { type: 'number' } },
  required: ['a', 'b'],
  additionalProperties: false,
};

/** `add(a, b)`: answers at once; also serves as the call whose reply shows that earlier frames were handled. */
function createAdd() {
  const execute = vi.fn<Handler>((args) => (args.a as number) + (args.b as number));
  return { tool: toolOf('add', execute, ADD_SCHEMA), execute };
}

/** One call of a gated tool: what it got, and how the test lets it finish. */
interface GatedCall {
  readonly args: Record<string, unknown>;
  readonly context: ToolContext;
  finish(value: unknown): void;
}

/** A tool whose calls wait until the test finishes them, counting how many run at once. */
function createGatedTool(name = 'gated') {
  const calls: GatedCall[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  let running = 0;
  let maxRunning = 0;
  const execute = vi.fn<Handler>(
    (args, context) =>
      new Promise((resolve) => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        calls.push({
          args,
          context,
          finish: (value) => {
            running -= 1;
            resolve(value);
          },
        });
        for (const waiter of waiting.filter((entry) => calls.length >= entry.count)) {
          waiting.splice(waiting.indexOf(waiter), 1);
          waiter.resolve();
        }
      }),
  );
  return {
    tool: toolOf(name, execute),
    execute,
    calls,
    /** The most calls that ran at the same time. */
    get maxRunning() {
      return maxRunning;
    },
    /** Resolves once `count` calls have started. */
    started(count: number): Promise<void> {
      if (calls.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ count, resolve }));
    },
  };
}

/** The call with this index; fails the test when it has not started. */
function callAt(calls: readonly GatedCall[], index: number): GatedCall {
  const call = calls[index];
  if (call === undefined) throw new Error(`call ${index} has not started (${calls.length} have)`);
  return call;
}

/** Replies sorted by id. */
function byId(replies: readonly Reply[]): Reply[] {
  return [...replies].sort((first, second) => (first.id ?? 0) - (second.id ?? 0));
}

/** Lets queued stream events and promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('calls and replies', () => {
  it('answers a call with its result under the same id, handing the handler its arguments and context', async () => {
    const add = createAdd();
    const { script, server } = startServer([add.tool]);
    script.call(41, 'add', { a: 1, b: 2 });
    expect(await script.next()).toEqual({ id: 41, result: 3 });
    expect(add.execute).toHaveBeenCalledOnce();
    const [args, context] = add.execute.mock.calls[0] ?? [];
    expect(args).toEqual({ a: 1, b: 2 });
    expect(context).toMatchObject({ runId: 'run-1', toolName: 'add', artifactsDir: '/artifacts/run-1' });
    expect(server.toolCalls).toBe(1);
  });

  it('matches replies to calls by id when calls finish in another order than they came', async () => {
    const gated = createGatedTool();
    const { script } = startServer([gated.tool]);
    for (const id of [5, 6, 7]) script.call(id, 'gated', { n: id });
    await gated.started(3);
    for (const index of [2, 0, 1]) {
      const call = callAt(gated.calls, index);
      call.finish({ echoed: call.args.n });
    }
    expect(await script.read(3)).toEqual([
      { id: 7, result: { echoed: 7 } },
      { id: 5, result: { echoed: 5 } },
      { id: 6, result: { echoed: 6 } },
    ]);
  });

  it('reads calls split across writes, several in one write, and CRLF line ends', async () => {
    const add = createAdd();
    const { script } = startServer([add.tool]);
    script.send('{"id":1,"method":"ad');
    script.send('d","params":{"a":1,"b":1}}\n{"id":2,"method":"add","params":{"a":2,"b":2}}\n');
    script.send('{"id":3,"method":"add","params":{"a":3,"b":3}}\r\n');
    expect(await script.read(3)).toEqual([
      { id: 1, result: 2 },
      { id: 2, result: 4 },
      { id: 3, result: 6 },
    ]);
  });

  it('passes an empty object when a call has no params', async () => {
    const execute = vi.fn<Handler>(() => 'ok');
    const { script } = startServer([toolOf('ping', execute)]);
    script.send('{"id":1,"method":"ping"}\n');
    expect(await script.next()).toEqual({ id: 1, result: 'ok' });
    expect(execute.mock.calls[0]?.[0]).toEqual({});
  });
});

describe('frames the host refuses', () => {
  it('answers a frame that is not JSON with a parse error and goes on with the next', async () => {
    const add = createAdd();
    const { script } = startServer([add.tool]);
    script.send('{"id":1,"method":"add",\n');
    script.call(2, 'add', { a: 1, b: 1 });
    expect(await script.read(2)).toEqual([
      { id: null, error: { code: ChannelErrorCode.parseError, message: 'parse error: the frame is not valid JSON' } },
      { id: 2, result: 2 },
    ]);
    expect(add.execute).toHaveBeenCalledOnce();
  });

  it.each([['[1,2]'], ['42'], ['"text"'], ['null']])('refuses %s as not a request', async (frame) => {
    const { script } = startServer([]);
    script.send(`${frame}\n`);
    expect(await script.next()).toEqual({
      id: null,
      error: { code: ChannelErrorCode.invalidRequest, message: 'invalid request: expected a JSON object' },
    });
  });

  it.each([
    ['missing', '{"method":"add","params":{"a":1,"b":1}}'],
    ['zero', '{"id":0,"method":"add","params":{"a":1,"b":1}}'],
    ['negative', '{"id":-3,"method":"add","params":{"a":1,"b":1}}'],
    ['fractional', '{"id":1.5,"method":"add","params":{"a":1,"b":1}}'],
    ['a string', '{"id":"1","method":"add","params":{"a":1,"b":1}}'],
    ['unsafe', `{"id":${2 ** 53},"method":"add","params":{"a":1,"b":1}}`],
  ])('refuses an id that is %s without calling the tool', async (_, frame) => {
    const add = createAdd();
    const { script, server } = startServer([add.tool]);
    script.send(`${frame}\n`);
    expect(await script.next()).toEqual({
      id: null,
      error: { code: ChannelErrorCode.invalidRequest, message: 'invalid request: "id" must be a positive integer' },
    });
    expect(add.execute).not.toHaveBeenCalled();
    expect(server.toolCalls).toBe(0);
  });

  it('refuses a method that is not a string, under the call id', async () => {
    const { script } = startServer([]);
    script.send('{"id":4,"method":7}\n');
    expect(await script.next()).toEqual({
      id: 4,
      error: { code: ChannelErrorCode.invalidRequest, message: 'invalid request: "method" must be a string' },
    });
  });

  it('answers an unknown tool with -32601 naming it, and counts the call', async () => {
    const { script, server } = startServer([createAdd().tool]);
    script.call(1, 'subtract', { a: 1, b: 1 });
    expect(await script.next()).toEqual({
      id: 1,
      error: { code: ChannelErrorCode.unknownTool, message: 'unknown tool "subtract"' },
    });
    expect(ChannelErrorCode.unknownTool).toBe(-32601);
    expect(server.toolCalls).toBe(1);
  });

  it.each([
    ['an array', [1, 2]],
    ['a string', 'a=1'],
    ['null', null],
  ])('refuses params that are %s with -32602 without calling the tool', async (_, params) => {
    const add = createAdd();
    const { script } = startServer([add.tool]);
    script.call(1, 'add', params);
    expect(await script.next()).toEqual({
      id: 1,
      error: { code: ChannelErrorCode.invalidArguments, message: 'add: arguments must be an object of named values' },
    });
    expect(ChannelErrorCode.invalidArguments).toBe(-32602);
    expect(add.execute).not.toHaveBeenCalled();
  });

  it('refuses arguments the schema rejects with -32602 naming the field, without calling the tool', async () => {
    const add = createAdd();
    const { script } = startServer([add.tool]);
    script.call(1, 'add', { a: 'one', b: 2 });
    script.call(2, 'add', { a: 1 });
    const [wrongType, missing] = await script.read(2);
    expect(wrongType).toMatchObject({ id: 1, error: { code: ChannelErrorCode.invalidArguments } });
    expect(wrongType?.error?.message).toMatch(/^add: .*'a'.*number/);
    expect(missing).toMatchObject({ id: 2, error: { code: ChannelErrorCode.invalidArguments } });
    expect(missing?.error?.message).toMatch(/^add: .*'b'/);
    expect(add.execute).not.toHaveBeenCalled();
  });

  it('refuses with -32602 when an argument check throws or rejects, without calling the tool', async () => {
    const invoke = vi.fn(async () => 'never');
    const descriptor = {
      name: 'checked',
      description: 'A tool with a failing check.',
      inputSchema: { type: 'object' },
    };
    const throwing: RegisteredTool = {
      descriptor,
      checkArguments: () => {
        throw new Error('the check broke');
      },
      invoke,
    };
    const rejecting: RegisteredTool = {
      descriptor: { ...descriptor, name: 'checked_later' },
      checkArguments: () => Promise.reject(new Error('the check broke later')),
      invoke,
    };
    const { script } = startServer([throwing, rejecting]);
    script.call(1, 'checked', {});
    script.call(2, 'checked_later', {});
    expect(await script.read(2)).toEqual([
      { id: 1, error: { code: ChannelErrorCode.invalidArguments, message: 'checked: the check broke' } },
      { id: 2, error: { code: ChannelErrorCode.invalidArguments, message: 'checked_later: the check broke later' } },
    ]);
    expect(invoke).not.toHaveBeenCalled();
  });

  it('refuses an id already in flight and still answers the first call with it', async () => {
    const gated = createGatedTool();
    const { script } = startServer([gated.tool]);
    script.call(9, 'gated', {});
    script.call(9, 'gated', {});
    expect(await script.next()).toEqual({
      id: 9,
      error: { code: ChannelErrorCode.invalidRequest, message: 'invalid request: id 9 is already in use' },
    });
    expect(gated.execute).toHaveBeenCalledOnce();
    callAt(gated.calls, 0).finish('first');
    expect(await script.next()).toEqual({ id: 9, result: 'first' });
  });

  it('answers an oversized frame with -32003, never calls its tool, and reads the next frame', async () => {
    const add = createAdd();
    const { script } = startServer([add.tool], { maxFrameBytes: 1_024 });
    script.call(1, 'add', { a: 1, b: 2, padding: 'x'.repeat(2_000) });
    script.call(2, 'add', { a: 2, b: 2 });
    expect(await script.read(2)).toEqual([
      {
        id: null,
        error: {
          code: ChannelErrorCode.frameTooLarge,
          message: 'frame too large: over the channel limit of 1024 bytes',
        },
      },
      { id: 2, result: 4 },
    ]);
    expect(add.execute).toHaveBeenCalledOnce();
  });
});

describe('what handlers do', () => {
  it('answers a handler that throws, or rejects with a non-Error, with -32000 and its message', async () => {
    const { script } = startServer([
      toolOf('throws', () => {
        throw new Error('disk on fire');
      }),
      toolOf('rejects', () => Promise.reject('plain text')),
      toolOf('rejects_object', () => Promise.reject({ status: 500 })),
    ]);
    script.call(1, 'throws', {});
    script.call(2, 'rejects', {});
    script.call(3, 'rejects_object', {});
    expect(await script.read(3)).toEqual([
      { id: 1, error: { code: ChannelErrorCode.toolFailed, message: 'disk on fire' } },
      { id: 2, error: { code: ChannelErrorCode.toolFailed, message: 'plain text' } },
      {
        id: 3,
        error: { code: ChannelErrorCode.toolFailed, message: 'the tool failed with a non-Error value: {"status":500}' },
      },
    ]);
  });

  it('answers -32000 when a tool throws instead of returning a promise', async () => {
    const throwing: RegisteredTool = {
      descriptor: { name: 'sync_throw', description: 'Throws from invoke.', inputSchema: { type: 'object' } },
      checkArguments: (args) => ({ ok: true, value: args }),
      invoke: () => {
        throw new Error('invoke broke');
      },
    };
    const { script } = startServer([throwing]);
    script.call(1, 'sync_throw', {});
    expect(await script.next()).toEqual({
      id: 1,
      error: { code: ChannelErrorCode.toolFailed, message: 'invoke broke' },
    });
  });

  it('sends null for a handler that returns undefined', async () => {
    const { script } = startServer([toolOf('nothing', () => undefined)]);
    script.call(1, 'nothing', {});
    expect(await script.next()).toEqual({ id: 1, result: null });
  });

  it('refuses results JSON cannot carry (BigInt, circular) with -32000 saying why, and keeps serving', async () => {
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    const add = createAdd();
    const { script } = startServer([toolOf('big', () => ({ count: 10n })), toolOf('loop', () => circular), add.tool]);
    script.call(1, 'big', {});
    script.call(2, 'loop', {});
    script.call(3, 'add', { a: 1, b: 1 });
    const [big, loop, sum] = await script.read(3);
    expect(big).toMatchObject({ id: 1, error: { code: ChannelErrorCode.toolFailed } });
    expect(big?.error?.message).toMatch(/BigInt/);
    expect(loop).toMatchObject({ id: 2, error: { code: ChannelErrorCode.toolFailed } });
    expect(loop?.error?.message).toMatch(/circular/i);
    expect(sum).toEqual({ id: 3, result: 2 });
  });

  it('sends long strings of a result as raw UTF-8 after the frame, and the next frame after them', async () => {
    const long = `é中😀\n"\\${'x'.repeat(RAW_TEXT_MIN_CHARS)}`;
    const { script } = startServer([
      toolOf('text', () => long),
      toolOf('record', () => ({ path: 'a.txt', content: long, short: 'x', more: long.repeat(2), list: [long] })),
      toolOf('lone', () => `\ud800${'x'.repeat(RAW_TEXT_MIN_CHARS)}`),
      createAdd().tool,
    ]);
    script.call(1, 'text', {});
    script.call(2, 'record', {});
    script.call(3, 'lone', {});
    script.call(4, 'add', { a: 1, b: 2 });
    const replies = await script.read(4);
    expect(replies).toEqual([
      { id: 1, result: long },
      { id: 2, result: { path: 'a.txt', content: long, short: 'x', more: long.repeat(2), list: [long] } },
      { id: 3, result: `\ud800${'x'.repeat(RAW_TEXT_MIN_CHARS)}` },
      { id: 4, result: 3 },
    ]);
    const bytes = Buffer.byteLength(long);
    expect(script.frames[0]).toBe(`{"id":1,"result":"","${RAW_TEXT_FIELD}":[[null,${bytes}]]}`);
    // Strings inside arrays, and a string that has no UTF-8 form, stay JSON.
    expect(script.frames[1]).toBe(
      `{"id":2,"result":{"path":"a.txt","content":"","short":"x","more":"","list":[${JSON.stringify(long)}]},` +
        `"${RAW_TEXT_FIELD}":[["content",${bytes}],["more",${2 * bytes}]]}`,
    );
    expect(script.frames[2]).not.toContain(RAW_TEXT_FIELD);
  });

  it('counts the raw text of a result against the frame limit', async () => {
    const { script } = startServer([toolOf('huge', () => ({ content: 'x'.repeat(2 * RAW_TEXT_MIN_CHARS) }))], {
      maxFrameBytes: RAW_TEXT_MIN_CHARS,
    });
    script.call(1, 'huge', {});
    const reply = await script.next();
    expect(reply).toMatchObject({ id: 1, error: { code: ChannelErrorCode.frameTooLarge } });
    expect(reply.error?.message).toMatch(/^huge: the result is 8\d{3} bytes, over the channel limit of 4096 bytes/);
  });

  it('refuses a result larger than the frame limit with -32003 naming its size', async () => {
    const { script } = startServer([toolOf('huge', () => 'x'.repeat(4_000))], { maxFrameBytes: 1_024 });
    script.call(1, 'huge', {});
    const reply = await script.next();
    expect(reply).toMatchObject({ id: 1, error: { code: ChannelErrorCode.frameTooLarge } });
    expect(reply.error?.message).toMatch(/^huge: the result is 4002 bytes, over the channel limit of 1024 bytes/);
  });
});

describe('limits', () => {
  it('runs at most maxConcurrentToolCalls handlers at once and starts a queued call as one finishes', async () => {
    const gated = createGatedTool();
    const { script } = startServer([gated.tool], { maxConcurrentToolCalls: 2 });
    for (let id = 1; id <= 5; id += 1) script.call(id, 'gated', { n: id });
    await gated.started(2);
    await settle();
    expect(gated.calls).toHaveLength(2);
    callAt(gated.calls, 0).finish(1);
    expect(await script.next()).toEqual({ id: 1, result: 1 });
    await gated.started(3);
    expect(callAt(gated.calls, 2).args).toEqual({ n: 3 });
    for (let index = 1; index < 5; index += 1) {
      await gated.started(index + 1);
      callAt(gated.calls, index).finish(index + 1);
    }
    expect((await script.read(4)).map((reply) => reply.id)).toEqual([2, 3, 4, 5]);
    expect(gated.maxRunning).toBe(2);
  });

  it('runs every call at once below the cap', async () => {
    const gated = createGatedTool();
    const { script } = startServer([gated.tool], { maxConcurrentToolCalls: 20 });
    for (let id = 1; id <= 20; id += 1) script.call(id, 'gated', {});
    await gated.started(20);
    expect(gated.maxRunning).toBe(20);
    for (const call of gated.calls) call.finish('done');
    expect(await script.read(20)).toHaveLength(20);
  });

  it('refuses calls past maxToolCalls with -32001 without calling the tool, and reports the limit', async () => {
    const add = createAdd();
    const { script, server } = startServer([add.tool], { maxToolCalls: 2 });
    for (let id = 1; id <= 3; id += 1) script.call(id, 'add', { a: id, b: 0 });
    // A refusal is written at once, before the results of earlier calls: replies are matched by id, not order.
    expect(byId(await script.read(3))).toEqual([
      { id: 1, result: 1 },
      { id: 2, result: 2 },
      { id: 3, error: { code: ChannelErrorCode.toolCallLimit, message: 'tool call limit reached (2)' } },
    ]);
    expect(add.execute).toHaveBeenCalledTimes(2);
    expect(server.toolCalls).toBe(2);
    expect(server.limitReached).toBe(true);
  });

  it('reports a flood of calls past the limit once, after the allowance', async () => {
    const onAbuse = vi.fn();
    const add = createAdd();
    const { script } = startServer([add.tool], { maxToolCalls: 1, onAbuse });
    // The first call is accepted; the rest of this batch is one refusal short of the allowance.
    const calls = TOOL_CALL_FLOOD_ALLOWANCE;
    script.send(
      Array.from({ length: calls }, (_, index) => `{"id":${index + 1},"method":"add","params":{"a":1,"b":1}}\n`).join(
        '',
      ),
    );
    await script.read(calls);
    expect(onAbuse).not.toHaveBeenCalled();
    script.call(calls + 1, 'add', { a: 1, b: 1 });
    script.call(calls + 2, 'add', { a: 1, b: 1 });
    await script.read(2);
    expect(onAbuse).toHaveBeenCalledOnce();
    expect(onAbuse).toHaveBeenCalledWith(
      'tool_calls',
      `the script made ${TOOL_CALL_FLOOD_ALLOWANCE} more tool calls after reaching the limit of 1`,
    );
    expect(add.execute).toHaveBeenCalledOnce();
  });

  it('starts a fresh count with startBudget', async () => {
    const add = createAdd();
    const { script, server } = startServer([add.tool], { maxToolCalls: 1 });
    script.call(1, 'add', { a: 1, b: 1 });
    script.call(2, 'add', { a: 1, b: 1 });
    expect(byId(await script.read(2)).map((reply) => reply.error?.code)).toEqual([
      undefined,
      ChannelErrorCode.toolCallLimit,
    ]);
    server.startBudget({ maxToolCalls: 2, toolCallTimeoutMs: 10_000, maxConcurrentToolCalls: 8 });
    expect(server.limitReached).toBe(false);
    expect(server.toolCalls).toBe(0);
    script.call(3, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({ id: 3, result: 2 });
    expect(server.toolCalls).toBe(1);
  });
});

describe('per-call timeouts', () => {
  it('answers a call that outlives the timeout with -32002, aborts its signal, and drops its late result', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const gated = createGatedTool();
    const add = createAdd();
    const { script } = startServer([gated.tool, add.tool], { toolCallTimeoutMs: 300 });
    script.call(1, 'gated', {});
    await gated.started(1);
    const call = callAt(gated.calls, 0);
    const signal = call.context.signal;
    vi.advanceTimersByTime(299);
    expect(signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(await script.next()).toEqual({
      id: 1,
      error: { code: ChannelErrorCode.toolCallTimeout, message: 'gated: the tool call timed out after 0.3 seconds' },
    });
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe('tool call timed out');
    call.finish('too late');
    script.call(2, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({ id: 2, result: 2 });
  });

  it('times each call out at its own deadline, not at the oldest one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const gated = createGatedTool();
    const add = createAdd();
    const { script } = startServer([gated.tool, add.tool], { toolCallTimeoutMs: 300 });
    script.call(1, 'gated', {});
    await gated.started(1);
    vi.advanceTimersByTime(150);
    script.call(2, 'gated', {});
    await gated.started(2);
    vi.advanceTimersByTime(150);
    expect(await script.next()).toMatchObject({ id: 1, error: { code: ChannelErrorCode.toolCallTimeout } });
    // Call 2 is still running: the quick call's reply comes next.
    script.call(3, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({ id: 3, result: 2 });
    expect(callAt(gated.calls, 1).context.signal.aborted).toBe(false);
    vi.advanceTimersByTime(150);
    expect(await script.next()).toMatchObject({ id: 2, error: { code: ChannelErrorCode.toolCallTimeout } });
  });

  it('starts the timeout of a queued call when the call starts, not when it came', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const gated = createGatedTool();
    const { script } = startServer([gated.tool], { toolCallTimeoutMs: 300, maxConcurrentToolCalls: 1 });
    script.call(1, 'gated', {});
    script.call(2, 'gated', {});
    await gated.started(1);
    vi.advanceTimersByTime(250);
    callAt(gated.calls, 0).finish('first');
    expect(await script.next()).toEqual({ id: 1, result: 'first' });
    await gated.started(2);
    const signal = callAt(gated.calls, 1).context.signal;
    vi.advanceTimersByTime(299);
    expect(signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(await script.next()).toMatchObject({ id: 2, error: { code: ChannelErrorCode.toolCallTimeout } });
    expect(signal.aborted).toBe(true);
  });
});

describe('ending the channel', () => {
  it('refuses calls after refuseCalls with -32004 without calling the tool, and aborts the calls in flight', async () => {
    const gated = createGatedTool();
    const add = createAdd();
    const { script, server } = startServer([gated.tool, add.tool]);
    script.call(1, 'gated', {});
    await gated.started(1);
    const inFlight = callAt(gated.calls, 0);
    server.refuseCalls('the cell has ended');
    expect(await script.next()).toEqual({
      id: 1,
      error: { code: ChannelErrorCode.runEnded, message: 'gated: the cell has ended' },
    });
    expect(inFlight.context.signal.aborted).toBe(true);
    inFlight.finish('late');
    script.call(2, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({
      id: 2,
      error: { code: ChannelErrorCode.runEnded, message: 'add: the cell has ended' },
    });
    expect(add.execute).not.toHaveBeenCalled();
    server.startBudget({ maxToolCalls: 10, toolCallTimeoutMs: 10_000, maxConcurrentToolCalls: 8 });
    script.call(3, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({ id: 3, result: 2 });
  });

  it('gives a call the artifacts folder of its own cell, and an error when first asked after that cell ended', async () => {
    const gated = createGatedTool();
    let cell = 1;
    const { script, server } = startServer([gated.tool], { artifactsDir: () => `/artifacts/cell-${cell}` });
    script.call(1, 'gated', {});
    script.call(2, 'gated', {});
    await gated.started(2);
    const early = callAt(gated.calls, 0);
    const late = callAt(gated.calls, 1);
    expect(early.context.artifactsDir).toBe('/artifacts/cell-1');
    server.refuseCalls('the cell has ended');
    cell = 2;
    server.startBudget({ maxToolCalls: 10, toolCallTimeoutMs: 10_000, maxConcurrentToolCalls: 8 });
    expect(early.context.artifactsDir).toBe('/artifacts/cell-1');
    // Looked up now, it would be the next cell's folder.
    expect(() => late.context.artifactsDir).toThrow('gated: the run has ended; its artifacts folder is no longer open');
    script.call(3, 'gated', {});
    await gated.started(3);
    expect(callAt(gated.calls, 2).context.artifactsDir).toBe('/artifacts/cell-2');
  });

  it('on end() aborts calls in flight, writes no late result, closes the channel and ignores later frames', async () => {
    const gated = createGatedTool();
    const add = createAdd();
    const { script, server, host } = startServer([gated.tool, add.tool]);
    script.call(1, 'gated', {});
    await gated.started(1);
    const inFlight = callAt(gated.calls, 0);
    server.end();
    expect(inFlight.context.signal.aborted).toBe(true);
    expect((inFlight.context.signal.reason as Error).message).toBe('the run has ended');
    inFlight.finish('late');
    await script.closed();
    expect(host.destroyed).toBe(true);
    // Data reaching the server's listener after the end is dropped, not parsed.
    host.emit('data', Buffer.from('{"id":2,"method":"add","params":{"a":1,"b":1}}\n'));
    await settle();
    expect(add.execute).not.toHaveBeenCalled();
    await expect(script.read(1)).rejects.toThrow('the channel ended after 0 of 1 replies');
  });

  it('keeps dispatching while the script reads no replies, and reports the unread bytes past the limit', async () => {
    const resultBytes = 4 << 20;
    const onAbuse = vi.fn();
    const { script: unread, host } = createChannelPair();
    let handled = 0;
    const big = toolOf('big', () => {
      handled += 1;
      return 'x'.repeat(resultBytes);
    });
    const server = new ToolCallServer({
      socket: host,
      tools: createToolRegistry([registerTool(big)]),
      runId: 'run-1',
      artifactsDir: '/artifacts/run-1',
      maxToolCalls: 100,
      toolCallTimeoutMs: 10_000,
      maxFrameBytes: 2 * resultBytes,
      maxConcurrentToolCalls: 8,
      onAbuse,
    });
    servers.push(server);
    const calls = Math.ceil(MAX_UNREAD_REPLY_BYTES / resultBytes) + 2;
    const reported = new Promise<void>((resolve) => onAbuse.mockImplementation(() => resolve()));
    for (let id = 1; id <= calls; id += 1) unread.write(`{"id":${id},"method":"big"}\n`);
    await reported;
    await settle();
    expect(handled).toBe(calls);
    expect(host.writableLength).toBeGreaterThan(MAX_UNREAD_REPLY_BYTES);
    expect(onAbuse).toHaveBeenCalledWith(
      'tool_calls',
      `the script left over ${MAX_UNREAD_REPLY_BYTES} bytes of tool replies unread`,
    );
  });
});

describe('notifications', () => {
  it("hands the script's exception report to onException and sends no reply", async () => {
    const onException = vi.fn();
    const add = createAdd();
    const { script } = startServer([add.tool], { onException });
    script.send('{"method":"$exception","params":{"type":"KeyError","message":"\'x\'","traceback":"Traceback ..."}}\n');
    script.send('{"method":"$exception","params":"not an object"}\n');
    script.call(1, 'add', { a: 1, b: 1 });
    expect(await script.next()).toEqual({ id: 1, result: 2 });
    expect(onException).toHaveBeenCalledOnce();
    expect(onException).toHaveBeenCalledWith({ type: 'KeyError', message: "'x'", traceback: 'Traceback ...' });
  });

  it('hands other notifications to onNotification with their params, and refuses a plain name without an id', async () => {
    const onNotification = vi.fn();
    const { script } = startServer([], { onNotification });
    script.send('{"method":"$ready","params":{"pid":12}}\n');
    script.send('{"method":"ready"}\n');
    expect(await script.next()).toEqual({
      id: null,
      error: { code: ChannelErrorCode.invalidRequest, message: 'invalid request: "id" must be a positive integer' },
    });
    expect(onNotification).toHaveBeenCalledOnce();
    expect(onNotification).toHaveBeenCalledWith('$ready', { pid: 12 });
  });

  it('acts on no frame after a notification callback ended the server, even in the same chunk', async () => {
    const add = createAdd();
    let server: ToolCallServer | undefined;
    const started = startServer([add.tool], { onNotification: () => server?.end() });
    server = started.server;
    started.script.send('{"method":"$done","params":{}}\n{"id":1,"method":"add","params":{"a":1,"b":2}}\n');
    await started.script.closed();
    expect(add.execute).not.toHaveBeenCalled();
  });
});
