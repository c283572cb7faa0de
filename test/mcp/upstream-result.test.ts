import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { convertUpstreamResult, errorTextOf, MAX_INLINE_MEDIA_BYTES } from '../../src/mcp-client/upstream-result.js';
import { TINY_PNG_BASE64 } from './mcp-test-servers.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-mcp-result-'));
let counter = 0;

function runFolder(): string {
  return join(directory, `run-${counter}`);
}

function convert(result: CallToolResult): Promise<unknown> {
  counter += 1;
  return convertUpstreamResult(result, {
    server: 'srv',
    tool: 'get-tiny-image',
    artifactsDir: runFolder(),
  });
}

/** The bytes of the saved artifact `name` of the last conversion. */
function savedBytes(name: unknown): Buffer {
  return readFileSync(join(runFolder(), String(name)));
}

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

const image = { type: 'image' as const, data: TINY_PNG_BASE64, mimeType: 'image/png' };

describe('convertUpstreamResult', () => {
  it('prefers structuredContent', async () => {
    expect(await convert({ content: [{ type: 'text', text: 'ignored' }], structuredContent: { sum: 5 } })).toEqual({
      sum: 5,
    });
  });

  it('parses text that is a JSON object or array, and keeps other text as it is', async () => {
    expect(await convert({ content: [{ type: 'text', text: ' {"a": 1} ' }] })).toEqual({ a: 1 });
    expect(await convert({ content: [{ type: 'text', text: '[1, 2]' }] })).toEqual([1, 2]);
    expect(await convert({ content: [{ type: 'text', text: '42' }] })).toBe('42');
    expect(await convert({ content: [{ type: 'text', text: '{not json' }] })).toBe('{not json');
    expect(await convert({ content: [] })).toBeNull();
  });

  it('joins several text parts with newlines before parsing', async () => {
    expect(
      await convert({
        content: [
          { type: 'text', text: 'line one' },
          { type: 'text', text: 'line two' },
        ],
      }),
    ).toBe('line one\nline two');
    expect(
      await convert({
        content: [
          { type: 'text', text: '[1,' },
          { type: 'text', text: '2]' },
        ],
      }),
    ).toEqual([1, 2]);
  });

  it('saves an image as an artifact in the host-only folder and gives the script its name, size and data', async () => {
    const saved = (await convert({ content: [image] })) as Record<string, unknown>;
    const bytes = Buffer.from(TINY_PNG_BASE64, 'base64');
    expect(saved).toEqual({
      type: 'image',
      name: expect.stringMatching(/^srv-get-tiny-image-[0-9a-f]{8}\.png$/),
      mimeType: 'image/png',
      bytes: bytes.length,
      data: TINY_PNG_BASE64,
    });
    expect(savedBytes(saved.name)).toEqual(bytes);
    expect(statSync(runFolder()).mode & 0o777).toBe(0o700);
  });

  it('gives the script no data for media over the inline limit (the artifact has them)', async () => {
    const large = Buffer.alloc(MAX_INLINE_MEDIA_BYTES + 1, 7);
    const saved = (await convert({
      content: [{ type: 'image', data: large.toString('base64'), mimeType: 'image/png' }],
    })) as Record<string, unknown>;
    expect(saved).not.toHaveProperty('data');
    expect(saved.bytes).toBe(large.length);
    expect(savedBytes(saved.name)).toEqual(large);
  });

  it('saves audio and embedded resources (text and blob), and returns resource links as dicts', async () => {
    const values = (await convert({
      content: [
        { type: 'text', text: '{"caption": true}' },
        { type: 'audio', data: Buffer.from('RIFF').toString('base64'), mimeType: 'audio/wav' },
        { type: 'resource', resource: { uri: 'file:///data/table.csv', text: 'a,b\n1,2\n' } },
        { type: 'resource', resource: { uri: 'memo://blob', blob: Buffer.from([1, 2, 3]).toString('base64') } },
        { type: 'resource_link', uri: 'file:///x.md', name: 'x.md' },
      ],
    })) as Record<string, unknown>[];
    expect(values[0]).toEqual({ caption: true });
    expect(values[1]).toMatchObject({ type: 'audio', mimeType: 'audio/wav' });
    expect(String(values[1]?.name).endsWith('.wav')).toBe(true);
    expect(values[2]).toMatchObject({ type: 'resource', uri: 'file:///data/table.csv', mimeType: 'text/plain' });
    expect(savedBytes(values[2]?.name).toString('utf8')).toBe('a,b\n1,2\n');
    expect(String(values[2]?.name).endsWith('.txt')).toBe(true);
    expect(values[3]).toMatchObject({ type: 'resource', uri: 'memo://blob', mimeType: 'application/octet-stream' });
    expect([...savedBytes(values[3]?.name)]).toEqual([1, 2, 3]);
    for (const value of values.slice(1, 4)) expect(value).not.toHaveProperty('path');
    expect(values[4]).toEqual({ type: 'resource_link', uri: 'file:///x.md', name: 'x.md' });
  });

  it('replaces media blocks mirrored in structuredContent by their saved file, saving each once', async () => {
    const artifactsDir = join(directory, 'mirrored');
    const result = (await convertUpstreamResult(
      { content: [image], structuredContent: { content: [image], note: 'kept' } },
      { server: 'fs', tool: 'read_media_file', artifactsDir },
    )) as { content: Record<string, unknown>[]; note: string };
    expect(result.note).toBe('kept');
    expect(result.content[0]).toMatchObject({ type: 'image', mimeType: 'image/png', data: TINY_PNG_BASE64 });
    expect(readdirSync(artifactsDir)).toHaveLength(1);
  });
});

describe('errorTextOf', () => {
  it('gives the text of an error result, or a fallback', () => {
    expect(errorTextOf({ content: [{ type: 'text', text: 'bad path' }], isError: true })).toBe('bad path');
    expect(errorTextOf({ content: [], isError: true })).toBe('the tool reported an error without a message');
  });
});
