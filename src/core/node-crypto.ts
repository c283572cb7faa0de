import type * as Crypto from 'node:crypto';
import { createRequire } from 'node:module';

/**
 * `node:crypto`, loaded on first use. Loading it costs a one-shot `codecall run` several milliseconds (the module and
 * fifteen internal ones, OpenSSL's set-up), and the run path needs none of it: random names and nonces come from
 * random-bytes.ts, names that only need to be distinct from fingerprint.ts. What does need it (SHA-256 where a
 * collision would matter and nothing verifies, bearer tokens, a fallback) asks for it here, off the run path.
 */

let loaded: typeof Crypto | undefined;

/** The `node:crypto` module, required the first time it is asked for. */
export function nodeCrypto(): typeof Crypto {
  loaded ??= createRequire(import.meta.url)('node:crypto') as typeof Crypto;
  return loaded;
}

/** Hex SHA-256 of the parts, each followed by a NUL (so that the parts' boundaries count). */
export function sha256Hex(parts: readonly (string | Uint8Array)[]): string {
  const hash = nodeCrypto().createHash('sha256');
  for (const part of parts) hash.update(part).update('\0');
  return hash.digest('hex');
}
