import type { Redis } from 'ioredis';
import { MAILBOX_BATCH, MAILBOX_TTL_SECONDS, MAX_MESSAGE_CHARACTERS } from './fleet-protocol.js';

/** Seconds one blocking read waits before it checks whether the mailbox was closed. */
const BLOCKING_READ_SECONDS = 1;

/**
 * A Redis list read by one process, in order: the channel between an agent and its workers. A list rather than
 * pub/sub because mail sent while the reader is reconnecting (or while Redis restarts, with persistence) waits for it
 * instead of being lost.
 */
export class Mailbox {
  readonly #connection: Redis;
  readonly #key: string;
  readonly #onMail: (mail: Record<string, unknown>) => void;
  #closed = false;
  readonly #loop: Promise<void>;

  /** Starts reading `key` on `connection`, which it owns (blocking reads need a connection of their own). */
  constructor(connection: Redis, key: string, onMail: (mail: Record<string, unknown>) => void) {
    this.#connection = connection;
    this.#key = key;
    this.#onMail = onMail;
    this.#loop = this.#read();
  }

  async #read(): Promise<void> {
    while (!this.#closed) {
      let reply: unknown;
      try {
        reply = await this.#connection.call(
          'BLMPOP',
          BLOCKING_READ_SECONDS,
          1,
          this.#key,
          'LEFT',
          'COUNT',
          MAILBOX_BATCH,
        );
      } catch {
        // Connection trouble: ioredis reconnects; wait a little rather than spin.
        if (!this.#closed) await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (!Array.isArray(reply)) continue;
      const messages = reply[1];
      if (!Array.isArray(messages)) continue;
      for (const message of messages) {
        const text = typeof message === 'string' ? message : String(message);
        if (text.length > MAX_MESSAGE_CHARACTERS) continue;
        let mail: unknown;
        try {
          mail = JSON.parse(text);
        } catch {
          continue;
        }
        if (typeof mail !== 'object' || mail === null || Array.isArray(mail)) continue;
        try {
          this.#onMail(mail as Record<string, unknown>);
        } catch {
          // A handler's failure concerns one message, never the reader.
        }
      }
    }
  }

  /** Stops reading and closes the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#connection.disconnect();
    await this.#loop;
  }
}

/** Appends one message (already JSON) to a mailbox and renews its expiry, in one round trip. */
export function sendMail(connection: Redis, key: string, json: string): Promise<unknown> {
  return connection.pipeline().rpush(key, json).expire(key, MAILBOX_TTL_SECONDS).exec();
}
