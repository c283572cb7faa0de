import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GeneratedPythonModule, generatePythonModule } from '../../src/codegen/python-module.js';
import type { ToolDescriptor } from '../../src/tools/types.js';
import { createPythonWorkspace, fileContent, type PythonWorkspace, resolvePython } from './python-harness.js';

// CODECALL_TEST_PYTHON runs these tests with another interpreter (e.g. python3.8, the oldest supported).
const python = process.env.CODECALL_TEST_PYTHON ?? resolvePython();

const QUOTE_DESCRIPTION = 'Has """triple""" quotes, a \\ backslash, C:\\path\\new and \\n.\r\nEnds with a quote "';

const tools: ToolDescriptor[] = [
  {
    name: 'read_file',
    description: 'Read a text file from the workspace.\nLines are numbered from 1.',
    inputSchema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path relative to the workspace.' },
        offset: { type: 'integer' },
        encoding: { type: 'string', default: 'utf-8' },
        options: { type: 'object', default: { strip: true } },
        marker: { type: ['string', 'null'], default: null },
      },
      required: ['path'],
    },
    outputSchema: { type: 'object', properties: { content: { type: 'string' }, size: { type: 'integer' } } },
  },
  {
    name: 'class',
    description: 'A tool named like a keyword, with awkward parameter names.',
    inputSchema: {
      type: 'object',
      properties: {
        from: { type: 'string' },
        'max-results': { type: 'integer' },
        max_results: { type: 'integer' },
        self: { type: 'string' },
        '1st': { type: 'boolean' },
        _call: { type: 'string' },
      },
      required: ['from'],
    },
  },
  {
    name: 'set_mode',
    description: 'Set the mode.',
    inputSchema: {
      type: 'object',
      properties: { mode: { enum: ['fast', 'safe'] }, level: { enum: [1, 2, 3], default: 2 } },
      required: ['mode'],
    },
  },
  { name: 'quote', description: QUOTE_DESCRIPTION, inputSchema: { type: 'object' } },
  {
    name: 'hostile',
    description: 'NUL \0, bidi \u202e, line separator \u2028, lone surrogate \ud800, emoji 😀, café.',
    inputSchema: {
      type: 'object',
      properties: { 'we"ird\\key\n': { type: 'string', default: 'a"b\\c\0\u2028' } },
    },
  },
  {
    name: 'free',
    description: 'Takes anything.',
    inputSchema: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true },
  },
  { name: 'search_tools', description: 'A tool that wants a reserved name.', inputSchema: { type: 'object' } },
  { name: 'list', description: 'A tool named like a builtin.', inputSchema: { type: 'object' } },
];

const github: ToolDescriptor[] = [
  {
    name: 'github/create_issue',
    description: 'Create an issue in a GitHub repository.',
    inputSchema: {
      type: 'object',
      properties: { title: { type: 'string' }, labels: { type: 'array', items: { type: 'string' } } },
      required: ['title'],
    },
  },
];

let generated: GeneratedPythonModule;
let workspace: PythonWorkspace;

/** Runs `script` and parses the JSON it prints on its last line. */
function runJson(script: string): unknown {
  const output = workspace.run(script).trimEnd().split('\n');
  return JSON.parse(output[output.length - 1] ?? 'null');
}

beforeAll(() => {
  generated = generatePythonModule({
    moduleName: 'tools',
    tools,
    modules: [{ name: 'github', description: 'GitHub, the forge.', tools: github }],
  });
  workspace = createPythonWorkspace(python, generated);
});

afterAll(() => workspace.remove());

describe('the generated module in a real Python', () => {
  it('parses with the Python 3.8 grammar', () => {
    const script = `
import ast, glob, json, os
names = []
for path in sorted(glob.glob(os.path.join(sys.path[0], "tools", "**", "*.py"), recursive=True)):
    with open(path, encoding="utf-8") as source:
        ast.parse(source.read(), path, feature_version=(3, 8))
    names.append(os.path.relpath(path, sys.path[0]))
print(json.dumps(names))`;
    expect(runJson(script)).toEqual([
      'tools/__init__.py',
      'tools/_catalog.py',
      'tools/aio.py',
      'tools/github/__init__.py',
      'tools/github/aio.py',
    ]);
  });

  it('imports without importing typing, the submodules, aio or the catalog', () => {
    const script = `
import json
import tools
loaded = sorted(name for name in sys.modules if name.startswith("tools") or name == "typing")
print(json.dumps({"loaded": loaded, "all": tools.__all__}))`;
    expect(runJson(script)).toEqual({
      loaded: ['tools'],
      all: [
        'read_file',
        'class_',
        'set_mode',
        'quote',
        'hostile',
        'free',
        'search_tools_2',
        'list',
        'ToolError',
        'search_tools',
        'json_parse',
        'shell_quote',
        'retry',
        'save_artifact',
      ],
    });
  });

  it('gives each function a real signature', () => {
    const script = `
import inspect, json
import tools
print(json.dumps({name: str(inspect.signature(getattr(tools, name))) for name in ["read_file", "class_", "set_mode", "free"]}))`;
    const signatures = runJson(script) as Record<string, string>;
    expect(signatures.read_file).toBe(
      "(path: 'str', offset: 'int | None' = None, encoding: 'str' = 'utf-8', options: 'dict' = {'strip': True}, " +
        "marker: 'str | None' = None) -> 'dict'",
    );
    expect(signatures.class_).toBe(
      "(from_: 'str', max_results_2: 'int | None' = None, max_results: 'int | None' = None, " +
        "self: 'str | None' = None, arg_1st: 'bool | None' = None, _call_2: 'str | None' = None) -> 'Any'",
    );
    // Python re-renders string annotations from their syntax tree: quotes and tuple brackets vary by version.
    expect(signatures.set_mode).toMatch(
      /^\(mode: "Literal\[\(?'fast', 'safe'\)?\]", level: 'Literal\[\(?1, 2, 3\)?\]' = 2\) -> 'Any'$/,
    );
    expect(signatures.free).toBe("(a: 'str | None' = None, **extra_arguments: 'Any') -> 'Any'");
  });

  it('sends the wire name and the original property names, leaving out optional Nones', () => {
    const script = `
import json
import tools, codecall_runtime
tools.read_file("notes.txt")
tools.read_file("notes.txt", 3, marker="m", encoding="latin-1")
tools.read_file(path="notes.txt", offset=None, marker=None)
tools.class_("a", max_results_2=5, max_results=6, self="s", arg_1st=True, _call_2="c")
tools.set_mode("fast")
tools.free(a="x", anything=[1], **{"dashed-key": 2})
tools.search_tools_2()
tools.list()
print(json.dumps(codecall_runtime.CALLS))`;
    expect(runJson(script)).toEqual([
      ['read_file', { path: 'notes.txt', encoding: 'utf-8', options: { strip: true } }],
      ['read_file', { path: 'notes.txt', encoding: 'latin-1', options: { strip: true }, offset: 3, marker: 'm' }],
      ['read_file', { path: 'notes.txt', encoding: 'utf-8', options: { strip: true } }],
      ['class', { from: 'a', 'max-results': 5, max_results: 6, self: 's', '1st': true, _call: 'c' }],
      ['set_mode', { mode: 'fast', level: 2 }],
      ['free', { a: 'x', anything: [1], 'dashed-key': 2 }],
      ['search_tools', {}],
      ['list', {}],
    ]);
  });

  it('does not share argument dictionaries between calls', () => {
    const script = `
import json
import tools
first = tools.read_file("a")["params"]
first["options"]["strip"] = False
first["path"] = "changed"
print(json.dumps(tools.read_file("b")["params"]))`;
    // The default dict itself is shared (as any Python default); the arguments dict is fresh per call.
    expect(runJson(script)).toEqual({ path: 'b', encoding: 'utf-8', options: { strip: false } });
  });

  it('runs the aio variants concurrently with asyncio.gather', () => {
    const script = `
import asyncio, inspect, json
import tools

async def main():
    return await asyncio.gather(tools.aio.read_file("a"), tools.aio.set_mode("safe", level=3))

results = asyncio.run(main())
print(json.dumps({
    "results": results,
    "coroutine": inspect.iscoroutinefunction(tools.aio.read_file),
    "same_signature": str(inspect.signature(tools.aio.read_file)) == str(inspect.signature(tools.read_file)),
    "same_doc": tools.aio.read_file.__doc__ == tools.read_file.__doc__,
}))`;
    expect(runJson(script)).toEqual({
      results: [
        { called: 'read_file', params: { path: 'a', encoding: 'utf-8', options: { strip: true } } },
        { called: 'set_mode', params: { mode: 'safe', level: 3 } },
      ],
      coroutine: true,
      same_signature: true,
      same_doc: true,
    });
  });

  it('loads submodules on first use, by attribute or by import', () => {
    const script = `
import json
import tools
before = "tools.github" in sys.modules
by_attribute = tools.github.create_issue("Bug", labels=["x"])
from tools.github import create_issue
from tools.github.aio import create_issue as create_issue_async
import asyncio
by_async = asyncio.run(tools.github.aio.create_issue("Async"))
try:
    tools.missing
    missing = None
except AttributeError as error:
    missing = str(error)
print(json.dumps({
    "before": before,
    "by_attribute": by_attribute,
    "same": create_issue is tools.github.create_issue,
    "by_async": by_async,
    "missing": missing,
    "hasattr": hasattr(tools.github, "nope"),
}))`;
    expect(runJson(script)).toEqual({
      before: false,
      by_attribute: { called: 'github/create_issue', params: { title: 'Bug', labels: ['x'] } },
      same: true,
      by_async: { called: 'github/create_issue', params: { title: 'Async' } },
      missing: "module 'tools' has no attribute 'missing'",
      hasattr: false,
    });
  });

  it('re-exports the runtime helpers', () => {
    const script = `
import json
import tools, codecall_runtime
print(json.dumps([getattr(tools, name) is getattr(codecall_runtime, name) for name in ["ToolError", "json_parse", "shell_quote", "retry", "save_artifact"]]))`;
    expect(runJson(script)).toEqual([true, true, true, true, true]);
  });

  it('finds tools with search_tools, loading the catalog only then', () => {
    const script = `
import json
import tools
before = "tools._catalog" in sys.modules
found = tools.search_tools("github issue", limit=2)
print(json.dumps({"before": before, "found": found}))`;
    expect(runJson(script)).toEqual({
      before: false,
      found: [
        {
          name: 'tools.github.create_issue',
          signature: 'create_issue(title: str, labels: list[str] | None = None) -> Any',
          description: 'Create an issue in a GitHub repository.',
        },
      ],
    });
  });

  it('renders help() for functions, the package and submodules', () => {
    const script = `
import json, pydoc
import tools
print(json.dumps({
    "function": pydoc.render_doc(tools.read_file, renderer=pydoc.plaintext),
    "package": pydoc.render_doc(tools, renderer=pydoc.plaintext),
    "submodule": pydoc.render_doc(tools.github, renderer=pydoc.plaintext),
}))`;
    const help = runJson(script) as Record<string, string>;
    // pydoc wraps long signatures from Python 3.13 on, and older versions indent blank docstring lines.
    const functionHelp = (help.function ?? '').replace(/^[ \t]+$/gm, '');
    expect(functionHelp).toMatch(/read_file\(\s*path: 'str',\s*offset: 'int \| None' = None,/);
    expect(functionHelp).toContain(`    Read a text file from the workspace.
    Lines are numbered from 1.

    Args:
        path (str): Path relative to the workspace.
        offset (int, optional)
        encoding (str, optional): Defaults to "utf-8".
        options (dict, optional): Defaults to {"strip": True}.
        marker (str | None, optional)

    Returns:
        {"content": str, "size": int}

    Raises:
        ToolError: when the tool fails.`);
    expect(help.package).toContain('tools.search_tools("query") finds functions');
    expect(help.package).toContain('set_mode(mode:');
    expect(help.submodule).toContain('GitHub, the forge.');
  });

  it('keeps descriptions with triple quotes, backslashes and hostile characters exact', () => {
    const script = `
import inspect, json
import tools
print(json.dumps({
    "quote": inspect.getdoc(tools.quote).split("\\n\\n")[0],
    "hostile": inspect.getdoc(tools.hostile).split("\\n\\n")[0],
    "signature": str(inspect.signature(tools.hostile)),
    "call": tools.hostile()["params"],
}))`;
    expect(runJson(script)).toEqual({
      quote: QUOTE_DESCRIPTION.replace('\r\n', '\n'),
      hostile: 'NUL \0, bidi \u202e, line separator \u2028, lone surrogate \ufffd, emoji 😀, café.',
      signature: "(we_ird_key_: 'str' = 'a\"b\\\\c\\x00\\u2028') -> 'Any'",
      call: { 'we"ird\\key\n': 'a"b\\c\0\u2028' },
    });
  });
});

describe('a large generated module', () => {
  const TOOL_COUNT = 500;
  const manyTools: ToolDescriptor[] = Array.from({ length: TOOL_COUNT }, (_, index) => ({
    name: `tool_number_${index}`,
    description:
      `Does thing number ${index} with the given inputs. It reads the path, applies the mode and returns a ` +
      'summary of what happened, including counts.',
    inputSchema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path of the file to work on.' },
        mode: { type: 'string', enum: ['fast', 'slow', 'careful'], description: 'How to work.' },
        limit: { type: 'integer', default: 10, description: 'Most items.' },
        tags: { type: 'array', items: { type: 'string' }, description: 'Tags to add.' },
      },
      required: ['path'],
    },
    outputSchema: { type: 'object', properties: { ok: { type: 'boolean' }, count: { type: 'integer' } } },
  }));

  // Its speed is a bench figure (`codegen, 500 tools`): the time printed here is for reading, not asserted.
  it(`generates ${TOOL_COUNT} tools, the same text every time`, () => {
    const cold = performance.now();
    const first = generatePythonModule({ moduleName: 'tools', tools: manyTools });
    const coldMs = performance.now() - cold;
    const durations: number[] = [];
    for (let round = 0; round < 20; round += 1) {
      const start = performance.now();
      const again = generatePythonModule({ moduleName: 'tools', tools: manyTools });
      durations.push(performance.now() - start);
      expect(again).toEqual(first);
    }
    durations.sort((a, b) => a - b);
    const medianMs = durations[durations.length >> 1] ?? Number.NaN;
    console.log(
      `codegen: ${TOOL_COUNT} tools in ${medianMs.toFixed(1)} ms (median of 20 warm runs; first run ${coldMs.toFixed(1)} ms)`,
    );
    const definitions = (path: string) =>
      fileContent(first, path).match(/^(async )?def tool_number_\d+\(/gm)?.length ?? 0;
    expect(definitions('tools/__init__.py')).toBe(TOOL_COUNT);
    expect(definitions('tools/aio.py')).toBe(TOOL_COUNT);
  });

  // Its speed is a bench figure (`import of the generated module`); here, what makes it fast: with precompiled
  // bytecode the import compiles none of the module's files.
  it(`imports ${TOOL_COUNT} tools in Python, compiling nothing with precompiled bytecode`, () => {
    const large = createPythonWorkspace(python, generatePythonModule({ moduleName: 'tools', tools: manyTools }));
    try {
      const measure = `
import json, time
import importlib.machinery
compiled = []
source_to_code = importlib.machinery.SourceFileLoader.source_to_code
def counting_source_to_code(self, data, path, *args, **kwargs):
    compiled.append(path)
    return source_to_code(self, data, path, *args, **kwargs)
importlib.machinery.SourceFileLoader.source_to_code = counting_source_to_code
import codecall_runtime
start = time.perf_counter()
import tools
milliseconds = (time.perf_counter() - start) * 1000
print(json.dumps({"ms": milliseconds, "compiled": sorted(path.split("/tools/")[-1] for path in compiled if "/tools/" in path)}))`;
      const fromSource = JSON.parse(large.run(measure)) as { ms: number; compiled: string[] };
      execFileSync(python, ['-m', 'compileall', '-q', '--invalidation-mode', 'unchecked-hash', large.directory]);
      const precompiled = JSON.parse(large.run(measure)) as { ms: number; compiled: string[] };
      console.log(
        `python import of ${TOOL_COUNT} tools: ${fromSource.ms.toFixed(1)} ms compiling from source, ` +
          `${precompiled.ms.toFixed(1)} ms with precompiled bytecode`,
      );
      expect(fromSource.compiled).toEqual(['__init__.py']);
      expect(precompiled.compiled).toEqual([]);
      expect(large.run('import tools\nprint(tools.tool_number_499("p")["params"])')).toBe(
        "{'path': 'p', 'limit': 10}\n",
      );
    } finally {
      large.remove();
    }
  });
});
