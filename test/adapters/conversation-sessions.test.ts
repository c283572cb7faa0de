import { describe, expect, it, vi } from 'vitest';
import {
  ConversationSessions,
  DEFAULT_CONVERSATION_ID,
  MAX_CONVERSATION_ID_LENGTH,
  type SessionHost,
} from '../../src/adapters/conversation-sessions.js';
import { formatResultForModel, STATE_LOST_NOTICE } from '../../src/engine/result/format-result.js';
import type { CodecallSession } from '../../src/engine/supervise/session.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const newCodecall = useCodecalls();
const codecall = newCodecall();

/** The codecall's sessions, observed: which were started with which options, and which were closed. */
function observedHost() {
  const started: { session: CodecallSession; options: unknown }[] = [];
  const closed: string[] = [];
  const host: SessionHost = {
    session(options) {
      const session = codecall.session(options);
      started.push({ session, options });
      return {
        id: session.id,
        execute: (code, cellOptions) => session.execute(code, cellOptions),
        reset: () => session.reset(),
        close: async () => {
          closed.push(session.id);
          await session.close();
        },
      };
    },
  };
  return { host, started, closed };
}

describe('ConversationSessions', () => {
  it('keeps variables within a conversation and never shows them to another', async () => {
    const sessions = new ConversationSessions(codecall);
    try {
      expect((await sessions.execute('secret = "a-only"', { conversationId: 'a' })).status).toBe('success');
      expect((await sessions.execute('print(secret)', { conversationId: 'a' })).stdout).toBe('a-only\n');
      const fromB = await sessions.execute('print(secret)', { conversationId: 'b' });
      expect(fromB.status).toBe('error');
      expect(fromB.error).toMatchObject({ type: 'NameError', message: "name 'secret' is not defined" });
      expect(sessions.size).toBe(2);
    } finally {
      await sessions.close();
    }
  });

  it(`runs calls that name no conversation in "${DEFAULT_CONVERSATION_ID}"`, async () => {
    const sessions = new ConversationSessions(codecall);
    try {
      await sessions.execute('count = 1');
      expect((await sessions.execute('print(count)', { conversationId: DEFAULT_CONVERSATION_ID })).stdout).toBe('1\n');
      expect(sessions.has(DEFAULT_CONVERSATION_ID)).toBe(true);
    } finally {
      await sessions.close();
    }
  });

  it('closes an idle conversation, and its next call starts fresh and says the state was lost', async () => {
    const { host, started, closed } = observedHost();
    const sessions = new ConversationSessions(host, { idleTimeoutMs: 100 });
    try {
      await sessions.execute('rows = [1, 2, 3]', { conversationId: 'idle' });
      expect(started[0]?.options).toEqual({ idleTimeoutMs: 100 });
      const firstSession = started[0]?.session.id;
      await vi.waitFor(() => expect(closed).toEqual([firstSession]), { timeout: 10_000, interval: 20 });
      expect(sessions.has('idle')).toBe(false);

      const again = await sessions.execute('print(rows)', { conversationId: 'idle' });
      expect(started).toHaveLength(2);
      expect(again).toMatchObject({ status: 'error', stateLost: true, error: { type: 'NameError' } });
      expect(formatResultForModel(again)).toContain(STATE_LOST_NOTICE);
      const after = await sessions.execute('rows = 1\nprint(rows)', { conversationId: 'idle' });
      expect(after.stateLost).toBeUndefined();
    } finally {
      await sessions.close();
    }
  });

  it('never closes a conversation while one of its calls runs, however long it takes', async () => {
    const { host, closed } = observedHost();
    const sessions = new ConversationSessions(host, { idleTimeoutMs: 50 });
    try {
      await sessions.execute('import time\nvalue = 7', { conversationId: 'busy' });
      // Started at once: the first call's idle timer would fire while this one sleeps.
      await sessions.execute('time.sleep(0.5)', { conversationId: 'busy' });
      expect(closed).toEqual([]);
      expect((await sessions.execute('print(value)', { conversationId: 'busy' })).stdout).toBe('7\n');
    } finally {
      await sessions.close();
    }
  });

  it('passes session limits to each session and cell options to each call', async () => {
    const { host, started } = observedHost();
    const sessions = new ConversationSessions(host, { limits: { maxToolCalls: 3 } });
    try {
      const result = await sessions.execute('import time\ntime.sleep(5)', { conversationId: 'slow', timeoutMs: 300 });
      expect(result.status).toBe('timeout');
      expect(started[0]?.options).toEqual({ idleTimeoutMs: 30 * 60_000, limits: { maxToolCalls: 3 } });
    } finally {
      await sessions.close();
    }
  });

  it('closes one conversation on request, and all of them with close()', async () => {
    const { host, closed, started } = observedHost();
    const sessions = new ConversationSessions(host);
    await sessions.execute('x = 1', { conversationId: 'one' });
    await sessions.execute('x = 2', { conversationId: 'two' });
    await sessions.closeConversation('one');
    expect(closed).toEqual([started[0]?.session.id]);
    expect(sessions.has('one')).toBe(false);
    await sessions.close();
    expect(closed).toEqual([started[0]?.session.id, started[1]?.session.id]);
    await expect(sessions.execute('print(1)', { conversationId: 'two' })).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('refuses bad conversation ids and bad options, naming them', async () => {
    const sessions = new ConversationSessions(codecall);
    for (const conversationId of ['', 'x'.repeat(MAX_CONVERSATION_ID_LENGTH + 1), 42]) {
      await expect(sessions.execute('print(1)', { conversationId: conversationId as string })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining('conversationId'),
      });
    }
    expect(sessions.size).toBe(0);
    expect(() => new ConversationSessions(codecall, { idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs must be a positive/);
    expect(() => new ConversationSessions(codecall, { idleTimeout: 5 } as never)).toThrow(
      'unknown key "idleTimeout" in adapter options; known keys: idleTimeoutMs, limits',
    );
  });
});
