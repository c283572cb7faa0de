import { describe, expect, it } from 'vitest';
import { FINGERPRINT_LENGTH, fingerprint } from '../../src/core/fingerprint.js';

/**
 * Fingerprints name cache files and content-addressed folders without node:crypto. They must be stable and tell
 * different inputs apart (a name found is then checked against what it should hold: see module-cache and
 * sandbox-files tests for that check).
 */

describe('fingerprint', () => {
  it('is the same for the same parts, texts and their bytes alike', () => {
    const value = fingerprint(['python3', 'tools/__init__.py', 'print(1)\n']);
    expect(value).toMatch(new RegExp(`^[0-9a-f]{${FINGERPRINT_LENGTH}}$`));
    expect(fingerprint(['python3', Buffer.from('tools/__init__.py'), Buffer.from('print(1)\n')])).toBe(value);
    expect(fingerprint(['é'])).toBe(fingerprint([Buffer.from('é', 'utf8')]));
  });

  it('differs with any change of a part, of their order, or of where one part ends', () => {
    const values = [
      fingerprint(['ab', 'c']),
      fingerprint(['a', 'bc']),
      fingerprint(['abc']),
      fingerprint(['abc', '']),
      fingerprint(['c', 'ab']),
      fingerprint(['ab', 'd']),
      fingerprint([]),
    ];
    expect(new Set(values).size).toBe(values.length);
  });

  it('takes a SHA-256 where zlib has no CRC-32 (Node.js before 20.15), of the same length', () => {
    const value = fingerprint(['ab', 'c'], null);
    expect(value).toMatch(new RegExp(`^[0-9a-f]{${FINGERPRINT_LENGTH}}$`));
    expect(value).not.toBe(fingerprint(['a', 'bc'], null));
    expect(value).not.toBe(fingerprint(['ab', 'c']));
  });
});
