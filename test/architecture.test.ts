import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const sourceRoot = join(repositoryRoot, 'src');

/**
 * The layers of `src/`, lowest first. A file may import from its own folder and from folders of lower layers only;
 * folders that share a layer are siblings and import neither each other nor anything above. `index` is the root entry.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['core'],
  ['tools'],
  ['codegen', 'rpc', 'sandbox'],
  ['mcp-client', 'databases'],
  ['engine'],
  ['mcp-server', 'adapters'],
  ['remote'],
  ['cli'],
  ['index'],
];

/** One import of one file that points at a folder it may not depend on. */
interface LayerViolation {
  readonly file: string;
  readonly imported: string;
}

/** The top folder of `src/` a path belongs to (`index` for files directly in `src/`). */
function layerFolderOf(sourceRelativePath: string): string {
  const [first, second] = sourceRelativePath.split('/');
  return second === undefined ? 'index' : (first ?? 'index');
}

function layerIndexOf(folder: string): number {
  const index = LAYERS.findIndex((layer) => layer.includes(folder));
  if (index < 0) throw new Error(`src/${folder} is in no layer: add it to LAYERS in test/architecture.test.ts`);
  return index;
}

/** Relative specifiers of every static import, re-export, type import and dynamic import of a file. */
function importedSpecifiers(text: string): string[] {
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)'(\.{1,2}\/[^']+)'/g;
  return [...text.matchAll(pattern)].map((match) => match[1] ?? '');
}

/** Every import in `files` (paths relative to `src/`, with their text) that points to a higher or sibling layer. */
function findLayerViolations(files: ReadonlyMap<string, string>): LayerViolation[] {
  const violations: LayerViolation[] = [];
  for (const [file, text] of files) {
    const fromFolder = layerFolderOf(file);
    const fromLayer = layerIndexOf(fromFolder);
    for (const specifier of importedSpecifiers(text)) {
      const target = relative(sourceRoot, resolve(sourceRoot, dirname(file), specifier));
      if (target.startsWith('..')) continue;
      const toFolder = layerFolderOf(target);
      if (toFolder === fromFolder) continue;
      if (layerIndexOf(toFolder) >= fromLayer) violations.push({ file, imported: target });
    }
  }
  return violations;
}

function readSourceTree(): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(sourceRoot, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(sourceRoot, path), readFileSync(path, 'utf8'));
  }
  return files;
}

describe('architecture', () => {
  it('no file of src/ imports from a layer above its own or from a sibling layer', () => {
    const files = readSourceTree();
    expect(files.size).toBeGreaterThan(50);
    expect(findLayerViolations(files)).toEqual([]);
  });

  it('every folder of src/ belongs to a layer', () => {
    const folders = readdirSync(sourceRoot, { withFileTypes: true }).filter((entry) => entry.isDirectory());
    for (const folder of folders) expect(() => layerIndexOf(folder.name)).not.toThrow();
  });

  it('reports a back-edge, a sibling edge and a dynamic import upwards', () => {
    const files = new Map([
      ['core/errors.ts', "import { createCodecall } from '../engine/codecall.js';"],
      ['sandbox/runner.ts', "import type { Tool } from '../codegen/python-module.js';"],
      ['tools/registry.ts', "const source = await import('../mcp-client/upstream-tool-source.js');"],
      ['engine/codecall.ts', "import { CodecallError } from '../core/errors.js';\nimport './warm-pool.js';"],
      ['index.ts', "export { createCodecall } from './engine/codecall.js';"],
    ]);
    expect(findLayerViolations(files)).toEqual([
      { file: 'core/errors.ts', imported: 'engine/codecall.js' },
      { file: 'sandbox/runner.ts', imported: 'codegen/python-module.js' },
      { file: 'tools/registry.ts', imported: 'mcp-client/upstream-tool-source.js' },
    ]);
  });
});
