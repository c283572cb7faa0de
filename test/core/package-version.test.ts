import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { codecallVersion } from '../../src/core/package-version.js';

/** The version reported to MCP peers and tracers is package.json's, read when first asked for. */
describe('codecallVersion', () => {
  it('is the version in package.json, the same on every call', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(codecallVersion()).toBe(manifest.version);
    expect(codecallVersion()).toBe(manifest.version);
  });
});
