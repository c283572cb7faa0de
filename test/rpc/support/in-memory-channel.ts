import { Duplex } from 'node:stream';

/**
 * One end of an in-memory byte channel: what it writes, its peer reads. Like a socket, a write completes only once the
 * peer has room for it, so a peer that never reads makes the writer's `writableLength` grow.
 */
class ChannelEnd extends Duplex {
  peer: ChannelEnd | undefined;
  /** The completion of a write held back until this end's reader wants more. */
  #heldWrite: (() => void) | undefined;

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const peer = this.peer;
    if (peer === undefined || peer.destroyed) {
      callback();
      return;
    }
    if (peer.push(chunk)) callback();
    else peer.#heldWrite = callback;
  }

  override _read(): void {
    const release = this.#heldWrite;
    this.#heldWrite = undefined;
    release?.();
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.peer !== undefined && !this.peer.destroyed) this.peer.push(null);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.peer !== undefined && !this.peer.destroyed && !this.peer.readableEnded) this.peer.push(null);
    callback(error);
  }
}

/** Two connected in-memory ends, as the two ends of a run's socketpair: `host` for the server, `script` for the test. */
export function createChannelPair(): { host: Duplex; script: Duplex } {
  const host = new ChannelEnd();
  const script = new ChannelEnd();
  host.peer = script;
  script.peer = host;
  return { host, script };
}
