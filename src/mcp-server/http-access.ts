import { isIP } from 'node:net';
import { CodecallError } from '../core/errors.js';
import { nodeCrypto } from '../core/node-crypto.js';

/** Shortest bearer token accepted from configuration (a generated one has 43 characters). */
export const MIN_HTTP_TOKEN_LENGTH = 16;

/** Random bytes of a generated token (256 bits), written as base64url. */
const GENERATED_TOKEN_BYTES = 32;

/** The characters of an RFC 6750 bearer token (`b64token`): what can travel in `Authorization: Bearer ...`. */
const BEARER_TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** `Authorization: Bearer <token>`, the scheme in any case, spaces around the token. */
const AUTHORIZATION_PATTERN = /^[Bb][Ee][Aa][Rr][Ee][Rr] +([^ ]+) *$/;

/** A Host header: a name or an IPv4 address, or an IPv6 address in brackets, then an optional port. */
const HOST_HEADER_PATTERN = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]+)(?::(\d{1,5}))?$/;

/** A loopback IPv4 address written as four decimal numbers (127.0.0.0/8). */
const LOOPBACK_IPV4_PATTERN = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** A new random bearer token (256 bits, base64url). */
export function generateHttpToken(): string {
  return nodeCrypto().randomBytes(GENERATED_TOKEN_BYTES).toString('base64url');
}

/**
 * Checks a configured bearer token: at least {@link MIN_HTTP_TOKEN_LENGTH} characters that can travel in an
 * `Authorization` header. The token itself never appears in the message.
 * @throws CodecallError `INVALID_CONFIG` naming what is wrong with it.
 */
export function checkHttpToken(token: unknown, source = 'token'): string {
  if (typeof token !== 'string') {
    throw new CodecallError('INVALID_CONFIG', `${source} must be a string, got ${typeof token}`, { key: 'token' });
  }
  if (token.length < MIN_HTTP_TOKEN_LENGTH) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${source} has ${token.length} characters; a bearer token needs at least ${MIN_HTTP_TOKEN_LENGTH} (e.g. from \`openssl rand -base64 32\`)`,
      { key: 'token', length: token.length },
    );
  }
  if (!BEARER_TOKEN_PATTERN.test(token)) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${source} has characters a bearer token cannot have; use letters, digits and - . _ ~ + / (then = at the end)`,
      { key: 'token', length: token.length },
    );
  }
  return token;
}

/**
 * Returns a check of `Authorization` headers against `token`. Both sides are hashed first, so the comparison is
 * constant-time over equal-length digests whatever the length of what was sent.
 */
export function bearerTokenCheck(token: string): (authorization: string | undefined) => boolean {
  const { createHash, timingSafeEqual } = nodeCrypto();
  const expected = createHash('sha256').update(token).digest();
  return (authorization) => {
    const presented = authorization === undefined ? undefined : AUTHORIZATION_PATTERN.exec(authorization)?.[1];
    const digest = createHash('sha256')
      .update(presented ?? '')
      .digest();
    return timingSafeEqual(digest, expected) && presented !== undefined;
  };
}

/**
 * The host name of a `Host` header value (`name`, `name:port`, `[v6]`, `[v6]:port`), lower-cased, with IPv6
 * addresses in their canonical bracketed form; undefined when the value is not of that shape (credentials, paths,
 * several hosts, an empty name...).
 */
export function hostOfHostHeader(value: string): string | undefined {
  const match = HOST_HEADER_PATTERN.exec(value);
  const host = match?.[1];
  if (host === undefined) return undefined;
  if (match?.[2] !== undefined && Number(match[2]) > 65_535) return undefined;
  return normaliseHostName(host);
}

/**
 * The host name of an `Origin` header value (`scheme://host[:port]`, nothing else), normalised like
 * {@link hostOfHostHeader}; undefined for `null`, other schemes, or anything with credentials or a path.
 */
export function hostOfOrigin(origin: string): string | undefined {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    return undefined;
  }
  return normaliseHostName(url.hostname);
}

/**
 * Normalises a host name given in configuration or a header: lower case, IPv6 addresses bracketed and canonical
 * (`[0:0::1]` → `[::1]`); undefined when it is an IPv6 address that does not parse.
 */
export function normaliseHostName(name: string): string | undefined {
  const bare = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  if (bare.includes(':')) {
    if (isIP(bare) !== 6) return undefined;
    // The URL parser writes IPv6 addresses canonically; the address was checked first, so nothing else is parsed.
    return new URL(`http://[${bare}]`).hostname;
  }
  return name.toLowerCase();
}

/**
 * Whether a normalised host name is a loopback name: `localhost`, a 127.0.0.0/8 address in dotted decimal, or
 * `[::1]`. Exact: `127.0.0.1.rebind.example` and `localhost.example` are names anyone can point anywhere.
 */
export function isLoopbackHostName(name: string): boolean {
  if (name === 'localhost' || name === '[::1]') return true;
  const octets = LOOPBACK_IPV4_PATTERN.exec(name);
  return octets?.slice(1).every((octet) => Number(octet) <= 255) === true;
}

/** Whether an address to listen on is a loopback address (names as {@link isLoopbackHostName}, `::1` bare too). */
export function isLoopbackListenAddress(address: string): boolean {
  const name = normaliseHostName(address);
  return name !== undefined && isLoopbackHostName(name);
}
