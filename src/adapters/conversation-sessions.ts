import { CodecallError } from '../core/errors.js';
import { checkKnownKeys, knownKeys } from '../core/option-checks.js';
import type { ExecuteResult } from '../core/result.js';
import type { Codecall } from '../engine/codecall.js';
import type { CellOptions, CodecallSession, SessionOptions } from '../engine/supervise/session.js';

/** Conversation of the calls that name none: a single-conversation agent needs no id at all. */
export const DEFAULT_CONVERSATION_ID = 'default';
/** Time without a call after which a conversation's session is closed (its variables are gone). */
export const DEFAULT_CONVERSATION_IDLE_MS = 30 * 60_000;
/** Longest conversation id accepted (ids are keys, not content). */
export const MAX_CONVERSATION_ID_LENGTH = 256;
/**
 * Conversations closed for idleness that are remembered, so that the first result of one that comes back says its
 * variables are gone (`stateLost`); the oldest are forgotten first.
 */
export const MAX_REMEMBERED_EXPIRED_CONVERSATIONS = 1_000;

/** What conversation sessions need from a codecall. */
export type SessionHost = Pick<Codecall, 'session'>;

/** Options of {@link ConversationSessions} (and of every adapter). */
export interface ConversationSessionsOptions {
  /** Close a conversation's session after this long without a call (default {@link DEFAULT_CONVERSATION_IDLE_MS}). */
  readonly idleTimeoutMs?: number | undefined;
  /** Limits of each conversation's session over the codecall's. */
  readonly limits?: SessionOptions['limits'];
}

/**
 * Options of one call in a conversation: the conversation, plus every option of a session cell (`signal`,
 * `timeoutMs`, `limits`, and whatever cells learn later), passed through to `session.execute` as they are.
 */
export interface ConversationExecuteOptions extends CellOptions {
  /** The conversation whose session runs the code (default {@link DEFAULT_CONVERSATION_ID}). */
  readonly conversationId?: string | undefined;
}

const OPTION_NAMES = knownKeys<keyof ConversationSessionsOptions>({ idleTimeoutMs: true, limits: true });

/** One conversation's session and its idle bookkeeping. */
interface Conversation {
  readonly session: CodecallSession;
  /** Calls of this conversation in progress; the idle timer runs only when there are none. */
  running: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** The first result of this conversation must say the variables of an earlier, expired session are gone. */
  stateLostUnreported: boolean;
}

/**
 * One codecall session per conversation, so that the variables a script defines persist between the model's calls
 * in the same conversation and are never visible in another. A conversation's session starts on its first call and
 * is closed after `idleTimeoutMs` without a call; the conversation's next call starts a fresh one, and its result says
 * `stateLost: true`. Calls of one conversation run one at a time, in call order; conversations run side by side.
 */
export class ConversationSessions {
  readonly #host: SessionHost;
  readonly #idleTimeoutMs: number;
  readonly #sessionOptions: SessionOptions;
  readonly #conversations = new Map<string, Conversation>();
  /** Ids of conversations closed for idleness, oldest first (a Map keeps insertion order). */
  readonly #expired = new Map<string, true>();
  #closed = false;

  /** @throws CodecallError `INVALID_CONFIG` for an unknown option or a bad `idleTimeoutMs`. */
  constructor(host: SessionHost, options: ConversationSessionsOptions = {}) {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new CodecallError('INVALID_CONFIG', `conversation sessions take an options object, got ${String(options)}`);
    }
    checkKnownKeys(options, 'adapter options', OPTION_NAMES);
    const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_CONVERSATION_IDLE_MS;
    if (typeof idleTimeoutMs !== 'number' || !Number.isInteger(idleTimeoutMs) || idleTimeoutMs < 1) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `idleTimeoutMs must be a positive integer of milliseconds, got ${JSON.stringify(idleTimeoutMs)}`,
        { idleTimeoutMs },
      );
    }
    this.#host = host;
    this.#idleTimeoutMs = idleTimeoutMs;
    // The session's own idle stop would keep the session object; closing it here frees it as well.
    this.#sessionOptions = { idleTimeoutMs, ...(options.limits !== undefined ? { limits: options.limits } : {}) };
  }

  /** Conversations with a live session. */
  get size(): number {
    return this.#conversations.size;
  }

  /** Whether `conversationId` has a live session. */
  has(conversationId: string): boolean {
    return this.#conversations.has(conversationId);
  }

  /**
   * Runs `code` as a cell of the conversation's session, starting the session if it has none. Resolves with the
   * result for every failure of the code; rejects for host problems (and with an AbortError when `signal` aborts).
   * @throws CodecallError `INVALID_CONFIG` for a bad conversation id, `CLOSED` after {@link ConversationSessions.close}.
   */
  async execute(code: string, options: ConversationExecuteOptions = {}): Promise<ExecuteResult> {
    const { conversationId = DEFAULT_CONVERSATION_ID, ...cellOptions } = options;
    checkConversationId(conversationId);
    if (this.#closed) throw new CodecallError('CLOSED', 'these conversation sessions are closed');
    const conversation = this.#open(conversationId);
    conversation.running += 1;
    clearTimeout(conversation.idleTimer);
    try {
      const result = await conversation.session.execute(code, cellOptions);
      if (!conversation.stateLostUnreported) return result;
      conversation.stateLostUnreported = false;
      return result.stateLost ? result : { ...result, stateLost: true };
    } finally {
      conversation.running -= 1;
      if (conversation.running === 0 && this.#conversations.get(conversationId) === conversation) {
        conversation.idleTimer = setTimeout(() => void this.#expire(conversationId, conversation), this.#idleTimeoutMs);
        conversation.idleTimer.unref();
      }
    }
  }

  /** Closes one conversation's session (its variables are gone); its next call starts a fresh one. */
  async closeConversation(conversationId: string): Promise<void> {
    const conversation = this.#conversations.get(conversationId);
    if (conversation === undefined) return;
    this.#conversations.delete(conversationId);
    clearTimeout(conversation.idleTimer);
    await conversation.session.close();
  }

  /** Closes every conversation's session; later calls reject with `CLOSED`. The codecall itself stays open. */
  async close(): Promise<void> {
    this.#closed = true;
    const conversations = [...this.#conversations.values()];
    this.#conversations.clear();
    this.#expired.clear();
    for (const conversation of conversations) clearTimeout(conversation.idleTimer);
    await Promise.all(conversations.map((conversation) => conversation.session.close()));
  }

  #open(conversationId: string): Conversation {
    const existing = this.#conversations.get(conversationId);
    if (existing !== undefined) return existing;
    const conversation: Conversation = {
      session: this.#host.session(this.#sessionOptions),
      running: 0,
      idleTimer: undefined,
      stateLostUnreported: this.#expired.delete(conversationId),
    };
    this.#conversations.set(conversationId, conversation);
    return conversation;
  }

  async #expire(conversationId: string, conversation: Conversation): Promise<void> {
    if (conversation.running > 0 || this.#conversations.get(conversationId) !== conversation) return;
    this.#conversations.delete(conversationId);
    this.#expired.set(conversationId, true);
    if (this.#expired.size > MAX_REMEMBERED_EXPIRED_CONVERSATIONS) {
      const oldest = this.#expired.keys().next();
      if (oldest.done !== true) this.#expired.delete(oldest.value);
    }
    await conversation.session.close().catch(() => undefined);
  }
}

function checkConversationId(conversationId: unknown): asserts conversationId is string {
  if (
    typeof conversationId !== 'string' ||
    conversationId.length === 0 ||
    conversationId.length > MAX_CONVERSATION_ID_LENGTH
  ) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `conversationId must be a non-empty string of at most ${MAX_CONVERSATION_ID_LENGTH} characters, got ${JSON.stringify(
        typeof conversationId === 'string' ? conversationId.slice(0, 40) : conversationId,
      )}`,
      { conversationId },
    );
  }
}
