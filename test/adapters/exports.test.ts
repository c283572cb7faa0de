import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as aiSdk from '../../src/adapters/ai-sdk.js';
import * as anthropic from '../../src/adapters/anthropic.js';
import * as openai from '../../src/adapters/openai.js';

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** What every adapter entry shares: conversation sessions, the model-facing content, the image caps. */
const SHARED_EXPORTS = [
  'CONVERSATION_STATE_NOTE',
  'ConversationSessions',
  'DEFAULT_CONVERSATION_ID',
  'DEFAULT_CONVERSATION_IDLE_MS',
  'MAX_CONVERSATION_ID_LENGTH',
  'MAX_MODEL_IMAGES',
  'MAX_MODEL_IMAGE_BYTES',
  'toModelContent',
];

/** The runtime exports of each adapter entry point, and the SDK it is for. */
const ADAPTERS = {
  'ai-sdk': { module: aiSdk, sdk: 'ai', exports: ['createAiSdkAdapter', 'toAiSdkToolOutput'] },
  openai: {
    module: openai,
    sdk: 'openai',
    exports: ['createOpenAIAdapter', 'toChatCompletionsMessages', 'toResponsesFunctionCallOutput'],
  },
  anthropic: { module: anthropic, sdk: '@anthropic-ai/sdk', exports: ['createAnthropicAdapter', 'toToolResultBlock'] },
} as const;

const SDKS: readonly string[] = Object.values(ADAPTERS).map((adapter) => adapter.sdk);

/** Every module the root entry loads (relative imports, followed), with the bare specifiers each one imports. */
function importsReachableFrom(entry: string): { files: string[]; packages: Set<string> } {
  const files: string[] = [];
  const packages = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (files.includes(file)) continue;
    files.push(file);
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)'([^']+)'/g)) {
      const specifier = match[1] ?? '';
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else packages.add(specifier);
    }
  }
  return { files: files.map((file) => relative(repositoryRoot, file)), packages };
}

describe('adapter entry points', () => {
  for (const [name, adapter] of Object.entries(ADAPTERS)) {
    it(`codecall/${name} exports exactly its adapter and the shared pieces`, () => {
      expect(Object.keys(adapter.module).sort()).toEqual([...adapter.exports, ...SHARED_EXPORTS].sort());
    });
  }

  it('package.json maps each subpath to its built entry, and lists each SDK as an optional peer', () => {
    const manifest = JSON.parse(readFileSync(join(repositoryRoot, 'package.json'), 'utf8'));
    for (const [name, adapter] of Object.entries(ADAPTERS)) {
      expect(manifest.exports[`./${name}`]).toEqual({
        types: `./dist/adapters/${name}.d.ts`,
        default: `./dist/adapters/${name}.js`,
      });
      expect(manifest.peerDependencies[adapter.sdk]).toEqual(expect.any(String));
      expect(manifest.peerDependenciesMeta[adapter.sdk]).toEqual({ optional: true });
      expect(manifest.devDependencies[adapter.sdk]).toEqual(expect.any(String));
      expect(manifest.dependencies[adapter.sdk]).toBeUndefined();
    }
  });

  it('the root entry loads no adapter and no agent SDK', () => {
    const { files, packages } = importsReachableFrom(join(repositoryRoot, 'src/index.ts'));
    expect(files.length).toBeGreaterThan(20);
    expect(files.filter((file) => file.startsWith('src/adapters/'))).toEqual([]);
    expect(
      [...packages].filter((specifier) => SDKS.some((sdk) => specifier === sdk || specifier.startsWith(`${sdk}/`))),
    ).toEqual([]);
  });
});
