import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import type { McpServerConfig } from '../../src/mcp-client/server-config.js';
import { describeNarrowing, narrowTools } from '../../src/mcp-client/tool-narrowing.js';
import { createMcpToolSource } from '../../src/mcp-client/upstream-tool-source.js';
import type { ToolSource } from '../../src/tools/registered-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { filesystemServer, memoryServer } from './mcp-test-servers.js';

const directory = mkdtempSync(join(tmpdir(), 'codecall-narrowing-'));
const filesRoot = join(directory, 'files');
mkdirSync(filesRoot);
writeFileSync(join(filesRoot, 'a.txt'), 'alpha\n');
const createCodecall = useCodecalls();
let sources: ToolSource[] = [];

/** The tools of server-memory and server-filesystem that carry `readOnlyHint: true`. */
const MEMORY_READ_ONLY = ['read_graph', 'search_nodes', 'open_nodes'];
const FILESYSTEM_READ_ONLY = [
  'read_file',
  'read_text_file',
  'read_media_file',
  'read_multiple_files',
  'list_directory',
  'list_directory_with_sizes',
  'directory_tree',
  'search_files',
  'get_file_info',
  'list_allowed_directories',
];

function source(name: string, config: McpServerConfig): ToolSource {
  const created = createMcpToolSource(name, config);
  sources.push(created);
  return created;
}

async function toolNames(toolSource: ToolSource): Promise<string[]> {
  const listing = await toolSource.load();
  return listing.tools.map((tool) => tool.descriptor.name.slice(toolSource.name.length + 1));
}

afterEach(async () => {
  await Promise.all(sources.map((toolSource) => toolSource.close()));
  sources = [];
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
});

describe('narrowing the tools of the reference MCP servers', () => {
  it('keeps only the tools server-memory annotates readOnlyHint: true, and says what it left out', async () => {
    const memory = source('memory', { ...memoryServer(join(directory, 'memory.jsonl')), readOnly: true });
    expect(await toolNames(memory)).toEqual(MEMORY_READ_ONLY);
    expect(memory.status()).toEqual({
      state: 'ready',
      toolCount: 3,
      narrowing: {
        total: 9,
        leftOut: [
          'create_entities',
          'create_relations',
          'add_observations',
          'delete_entities',
          'delete_observations',
          'delete_relations',
        ],
        rules: ['readOnly'],
      },
    });
    expect((await memory.load()).note).toBe("3 of the server's 9 tools (readOnly: only the tools it marks read-only)");
  });

  it('keeps the ten read-only tools of server-filesystem, none of the ones that write or move', async () => {
    const files = source('files', { ...filesystemServer(filesRoot), readOnly: true });
    expect(await toolNames(files)).toEqual(FILESYSTEM_READ_ONLY);
  });

  it('applies allowedTools, then disabledTools, then readOnly', async () => {
    const files = source('files', {
      ...filesystemServer(filesRoot),
      allowedTools: ['read_text_file', 'list_directory', 'write_file'],
      disabledTools: ['list_directory'],
    });
    expect(await toolNames(files)).toEqual(['read_text_file', 'write_file']);
    const readOnly = source('files2', {
      ...filesystemServer(filesRoot),
      allowedTools: ['read_text_file', 'write_file'],
      readOnly: true,
    });
    expect(await toolNames(readOnly)).toEqual(['read_text_file']);
    expect(readOnly.status()).toMatchObject({ narrowing: { total: 14, rules: ['allowedTools', 'readOnly'] } });
    const denied = source('memory', {
      ...memoryServer(join(directory, 'memory-denied.jsonl')),
      disabledTools: ['delete_entities', 'delete_observations', 'delete_relations'],
    });
    expect(await toolNames(denied)).toEqual([
      'create_entities',
      'create_relations',
      'add_observations',
      'read_graph',
      'search_nodes',
      'open_nodes',
    ]);
  });

  it('fails the server with INVALID_CONFIG when a list names a tool the server does not offer', async () => {
    const memory = source('memory', {
      ...memoryServer(join(directory, 'memory-typo.jsonl')),
      disabledTools: ['delete_entity'],
    });
    const error = await memory.load().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(CodecallError);
    expect((error as CodecallError).code).toBe('INVALID_CONFIG');
    expect((error as CodecallError).message).toBe(
      'MCP server "memory": disabledTools names "delete_entity", which the server does not offer; its tools are: ' +
        'create_entities, create_relations, add_observations, delete_entities, delete_observations, ' +
        'delete_relations, read_graph, search_nodes, open_nodes',
    );
    expect(memory.status()).toEqual({ state: 'failed', error: (error as Error).message });
  });
});

describe('narrowed tools in scripts and in the description', () => {
  it('leaves the filtered tools out of the module: the script cannot import or call them', async () => {
    const codecall = createCodecall({
      mcpServers: { memory: { ...memoryServer(join(directory, 'memory-script.jsonl')), readOnly: true } },
    });
    const result = await codecall.execute(
      [
        'import tools.memory',
        'print(sorted(tools.memory.__all__))',
        'try:',
        '    from tools.memory import create_entities',
        'except ImportError:',
        '    print("no create_entities")',
        'from tools.memory import read_graph',
        'print(read_graph())',
        'print("only the tools it marks read-only" in tools.memory.__doc__)',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(
      "['open_nodes', 'read_graph', 'search_nodes']\nno create_entities\n{'entities': [], 'relations': []}\nTrue\n",
    );
    const description = await codecall.describe();
    expect(description).toContain(
      "Functions in `tools.memory` (`from tools.memory import ...`):\n3 of the server's 9 tools (readOnly: only the tools it marks read-only).\n- read_graph()",
    );
    expect(description).not.toContain('create_entities');
  });

  it('shows a server failed by a misnamed tool among the failed sources of the description', async () => {
    const codecall = createCodecall({
      builtinTools: [],
      mcpServers: { memory: { ...memoryServer(join(directory, 'memory-typo2.jsonl')), allowedTools: ['readgraph'] } },
    });
    const description = await codecall.describe();
    expect(description).toContain(
      'These tool sources failed to load, so their functions are missing:\n- memory: MCP server "memory": allowedTools names "readgraph"',
    );
  });

  it('gives a script with files:read the file tools that read, and no write_file', async () => {
    const codecall = createCodecall({ builtinTools: ['files:read'], workspace: filesRoot });
    const result = await codecall.execute(
      [
        'import tools',
        'print(sorted(name for name in tools.__all__ if name.endswith("_file") or name.endswith("_files")))',
        'print(tools.read_file("a.txt")["content"].strip())',
        'from tools import write_file',
      ].join('\n'),
    );
    expect(result.stdout).toBe("['list_files', 'read_file', 'search_files']\nalpha\n");
    expect(result.error?.type).toBe('ImportError');
    expect(await codecall.describe()).not.toContain('write_file');
  });
});

describe('narrowTools', () => {
  const tools = [
    { name: 'read', annotations: { readOnlyHint: true } },
    { name: 'write', annotations: { readOnlyHint: false } },
    { name: 'unannotated' },
  ];

  it('changes nothing without rules, and counts a tool without the annotation as one that may write', () => {
    expect(narrowTools('s', tools, {})).toEqual({ tools, narrowing: undefined });
    const narrowed = narrowTools('s', tools, { readOnly: true });
    expect(narrowed.tools.map((tool) => tool.name)).toEqual(['read']);
    expect(describeNarrowing(narrowed.narrowing ?? { total: 0, leftOut: [], rules: [] })).toBe(
      "1 of the server's 3 tools (readOnly: only the tools it marks read-only)",
    );
    expect(narrowTools('s', tools, { readOnly: false }).narrowing).toBeUndefined();
  });
});
