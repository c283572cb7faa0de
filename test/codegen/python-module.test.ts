import { describe, expect, it } from 'vitest';
import { MAX_DEF_LINE_LENGTH } from '../../src/codegen/python-function.js';
import { generatePythonModule } from '../../src/codegen/python-module.js';
import { CodecallError } from '../../src/core/errors.js';
import type { ToolDescriptor } from '../../src/tools/types.js';
import { fileContent, functionSource } from './python-harness.js';

const add: ToolDescriptor = {
  name: 'add',
  description: 'Add two numbers.',
  inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  outputSchema: { type: 'number' },
};

const createIssue: ToolDescriptor = {
  name: 'github/create_issue',
  description: 'Create an issue.',
  inputSchema: {
    type: 'object',
    properties: { title: { type: 'string' }, body: { type: 'string' } },
    required: ['title'],
  },
};

const HELPERS = `# Submodules load on first attribute access, so importing this package stays cheap.
def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(__name__ + "." + name)
    raise AttributeError("module '" + __name__ + "' has no attribute '" + name + "'")


# Optional arguments left at None are not sent, so the tool applies its own default.
def _call(wire_name, arguments, optional_arguments=None, extra_arguments=None):
    if optional_arguments is not None:
        for key, value in optional_arguments.items():
            if value is not None:
                arguments[key] = value
    if extra_arguments:
        arguments.update(extra_arguments)
    return _runtime_call(wire_name, arguments)`;

const ASYNC_HELPER = `# Optional arguments left at None are not sent, so the tool applies its own default.
async def _acall(wire_name, arguments, optional_arguments=None, extra_arguments=None):
    if optional_arguments is not None:
        for key, value in optional_arguments.items():
            if value is not None:
                arguments[key] = value
    if extra_arguments:
        arguments.update(extra_arguments)
    return await _runtime_acall(wire_name, arguments)`;

function generateOne(tool: ToolDescriptor): string {
  return fileContent(generatePythonModule({ moduleName: 'tools', tools: [tool] }), 'tools/__init__.py');
}

describe('generatePythonModule: the package layout', () => {
  const generated = generatePythonModule({
    moduleName: 'tools',
    tools: [add],
    modules: [{ name: 'github', description: 'GitHub access.\n\nUse it for issues.', tools: [createIssue] }],
  });

  it('writes a package, its aio module, the catalog and one package per submodule', () => {
    expect(generated.files.map((file) => file.path)).toEqual([
      'tools/__init__.py',
      'tools/aio.py',
      'tools/_catalog.py',
      'tools/github/__init__.py',
      'tools/github/aio.py',
    ]);
  });

  it('lists every function with its module, names, signature and summary', () => {
    expect(generated.functions).toEqual([
      {
        module: 'tools',
        pythonName: 'add',
        wireName: 'add',
        signature: 'add(a: float, b: float) -> float',
        summary: 'Add two numbers.',
      },
      {
        module: 'tools.github',
        pythonName: 'create_issue',
        wireName: 'github/create_issue',
        signature: 'create_issue(title: str, body: str | None = None) -> Any',
        summary: 'Create an issue.',
      },
    ]);
  });

  it('generates the root package: docstring, re-exports, lazy submodules, search_tools, functions', () => {
    expect(
      fileContent(generated, 'tools/__init__.py'),
    ).toBe(`"""Functions that call this host's tools: \`from tools import <function>\`.

Each function runs one tool on the host and returns its result as a parsed JSON value (dict, list, str, ...).
A failing tool raises ToolError. Optional arguments left at None are not sent, so the tool uses its default.

- tools.aio has the same functions as coroutines, for parallel calls:
  \`await asyncio.gather(tools.aio.first(...), tools.aio.second(...))\`
- tools.search_tools("query") finds functions by name and description; help(function) shows one.
- json_parse, shell_quote and retry are helpers of the runtime (see help()).
- save_artifact("name.ext", data) returns a file (bytes or str) with the result; open matplotlib figures come back as PNG.

Submodules, imported on first use:
- tools.github (1 function): GitHub access.
"""

from __future__ import annotations

from codecall_runtime import ToolError, json_parse, retry, save_artifact, shell_quote
from codecall_runtime import call as _runtime_call
from codecall_runtime import search_catalog as _search_catalog

__all__ = [
    "add",
    "ToolError",
    "search_tools",
    "json_parse",
    "shell_quote",
    "retry",
    "save_artifact",
]

_SUBMODULES = ("aio", "github")


${HELPERS}


def search_tools(query: str, limit: int = 10) -> list[dict]:
    """Finds functions by what they do, best matches first.

    Args:
        query (str): Words to look for in function names, signatures and descriptions.
        limit (int, optional): Most results to return. Defaults to 10.

    Returns:
        list[{"name": str, "signature": str, "description": str}]
        "name" is the dotted import path: "tools.<function>" or "tools.<submodule>.<function>".
    """
    from ._catalog import CATALOG

    return _search_catalog(CATALOG, query, limit)


def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a (float)
        b (float)

    Returns:
        float

    Raises:
        ToolError: when the tool fails.
    """
    return _call("add", {"a": a, "b": b})
`);
  });

  it('generates the aio module with async variants of the same signatures', () => {
    expect(
      fileContent(generated, 'tools/aio.py'),
    ).toBe(`"""Async variants of the functions in tools: same names and arguments, awaitable.

Calls awaited together run concurrently: \`results = await asyncio.gather(first(...), second(...))\`.
"""

from __future__ import annotations

from codecall_runtime import acall as _runtime_acall

__all__ = [
    "add",
]


${ASYNC_HELPER}


async def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a (float)
        b (float)

    Returns:
        float

    Raises:
        ToolError: when the tool fails.
    """
    return await _acall("add", {"a": a, "b": b})
`);
  });

  it('generates the catalog of every function, submodules included', () => {
    expect(
      fileContent(generated, 'tools/_catalog.py'),
    ).toBe(`"""Search index of every function in tools, loaded by search_tools() on first use."""

CATALOG = [
    ("tools.add", "add(a: float, b: float) -> float", "Add two numbers."),
    ("tools.github.create_issue", "create_issue(title: str, body: str | None = None) -> Any", "Create an issue."),
]
`);
  });

  it('generates a submodule without its source prefix in function names, sending the full wire name', () => {
    expect(
      fileContent(generated, 'tools/github/__init__.py'),
    ).toBe(`"""Functions of the tool source "github": \`from tools.github import <function>\`.

GitHub access.

Use it for issues.

Async variants for parallel calls are in tools.github.aio.
"""

from __future__ import annotations

from codecall_runtime import call as _runtime_call

__all__ = [
    "create_issue",
]

_SUBMODULES = ("aio",)


${HELPERS}


def create_issue(title: str, body: str | None = None) -> Any:
    """Create an issue.

    Args:
        title (str)
        body (str, optional)

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("github/create_issue", {"title": title}, {"body": body})
`);
  });

  it("generates the submodule's aio module", () => {
    expect(functionSource(fileContent(generated, 'tools/github/aio.py'), 'create_issue')).toBe(
      `async def create_issue(title: str, body: str | None = None) -> Any:
    """Create an issue.

    Args:
        title (str)
        body (str, optional)

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return await _acall("github/create_issue", {"title": title}, {"body": body})`,
    );
  });

  it('is deterministic', () => {
    const again = generatePythonModule({
      moduleName: 'tools',
      tools: [add],
      modules: [{ name: 'github', description: 'GitHub access.\n\nUse it for issues.', tools: [createIssue] }],
    });
    expect(again).toEqual(generated);
  });
});

describe('generatePythonModule: functions', () => {
  it('puts required parameters first, then optional ones with their schema defaults', () => {
    const source = generateOne({
      name: 'read_file',
      description: 'Read a text file from the workspace.\nLines are numbered from 1.',
      inputSchema: {
        type: 'object',
        properties: {
          offset: { type: 'integer', description: 'First line to read.' },
          path: { type: 'string', description: 'Path relative to the workspace.' },
          encoding: { type: 'string', default: 'utf-8' },
          follow_links: { type: 'boolean', default: false, description: 'Follow symbolic links.' },
          options: { type: 'object', default: { strip: true, skip: [1, 2] } },
          ratio: { type: 'number', default: 0.5 },
          marker: { type: ['string', 'null'], default: null },
        },
        required: ['path'],
      },
    });
    expect(functionSource(source, 'read_file')).toBe(`def read_file(
    path: str,
    offset: int | None = None,
    encoding: str = "utf-8",
    follow_links: bool = False,
    options: dict = {"strip": True, "skip": [1, 2]},
    ratio: float = 0.5,
    marker: str | None = None,
) -> Any:
    """Read a text file from the workspace.
    Lines are numbered from 1.

    Args:
        path (str): Path relative to the workspace.
        offset (int, optional): First line to read.
        encoding (str, optional): Defaults to "utf-8".
        follow_links (bool, optional): Follow symbolic links. Defaults to False.
        options (dict, optional): Defaults to {"strip": True, "skip": [1, 2]}.
        ratio (float, optional): Defaults to 0.5.
        marker (str | None, optional)

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("read_file", {"path": path, "encoding": encoding, "follow_links": follow_links, "options": options, "ratio": ratio}, {"offset": offset, "marker": marker})`);
  });

  it('renders enums as Literal, and lists long enums in the docstring instead', () => {
    const source = generateOne({
      name: 'set_mode',
      description: 'Set the mode.',
      inputSchema: {
        type: 'object',
        properties: {
          mode: { type: 'string', enum: ['fast', 'safe'], description: 'How to run.' },
          level: { enum: [1, 2, 3], default: 2 },
          color: { enum: ['red', 'green', null] },
          region: { type: 'string', enum: Array.from({ length: 32 }, (_, index) => `r${index}`) },
        },
        required: ['mode'],
      },
    });
    expect(functionSource(source, 'set_mode')).toBe(`def set_mode(
    mode: Literal["fast", "safe"],
    level: Literal[1, 2, 3] = 2,
    color: Literal["red", "green"] | None = None,
    region: str | None = None,
) -> Any:
    """Set the mode.

    Args:
        mode (Literal["fast", "safe"]): How to run.
        level (Literal[1, 2, 3], optional): Defaults to 2.
        color (Literal["red", "green"] | None, optional)
        region (str, optional): One of: "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "r16", "r17", "r18", "r19" and 12 more.

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("set_mode", {"mode": mode, "level": level}, {"color": color, "region": region})`);
  });

  it('keeps nested objects as dict (with their keys in the docstring) and types arrays and unions', () => {
    const source = generateOne({
      name: 'create_issue',
      description: 'Create an issue.',
      inputSchema: {
        type: 'object',
        properties: {
          labels: { type: 'array', items: { type: 'string' } },
          assignee: { type: 'object', properties: { login: { type: 'string' } }, required: ['login'] },
          matrix: { type: 'array', items: { type: 'array', items: { type: 'integer' } } },
          milestone: { anyOf: [{ type: 'integer' }, { type: 'string' }] },
          meta: { $ref: '#/$defs/meta' },
        },
        required: ['labels', 'assignee'],
      },
    });
    expect(functionSource(source, 'create_issue')).toBe(`def create_issue(
    labels: list[str],
    assignee: dict,
    matrix: list[list[int]] | None = None,
    milestone: int | str | None = None,
    meta: Any = None,
) -> Any:
    """Create an issue.

    Args:
        labels (list[str])
        assignee (dict): Shape: {"login": str}.
        matrix (list[list[int]], optional)
        milestone (int | str, optional)
        meta (Any, optional)

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("create_issue", {"labels": labels, "assignee": assignee}, {"matrix": matrix, "milestone": milestone, "meta": meta})`);
  });

  it('renames keyword, dashed, digit and colliding parameters but sends the original names', () => {
    const source = generateOne({
      name: 'class',
      description: 'Keyword tool.',
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
    });
    expect(functionSource(source, 'class_')).toBe(`def class_(
    from_: str,
    max_results_2: int | None = None,
    max_results: int | None = None,
    self: str | None = None,
    arg_1st: bool | None = None,
    _call_2: str | None = None,
) -> Any:
    """Keyword tool.

    Args:
        from_ (str): Sent as "from".
        max_results_2 (int, optional): Sent as "max-results".
        max_results (int, optional)
        self (str, optional)
        arg_1st (bool, optional): Sent as "1st".
        _call_2 (str, optional): Sent as "_call".

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("class", {"from": from_}, {"max-results": max_results_2, "max_results": max_results, "self": self, "1st": arg_1st, "_call": _call_2})`);
  });

  it('renames dashed, dotted, digit, colliding and reserved tool names', () => {
    const names = ['get-user', 'get.user', '2fa', 'search_tools', 'retry', 'aio', 'ToolError', 'json_parse', '_hidden'];
    const generated = generatePythonModule({
      moduleName: 'tools',
      tools: names.map((name) => ({ name, description: '', inputSchema: { type: 'object' } })),
      modules: [{ name: 'github', tools: [] }],
    });
    expect(generated.functions.map((fn) => [fn.wireName, fn.pythonName])).toEqual([
      ['get-user', 'get_user'],
      ['get.user', 'get_user_2'],
      ['2fa', 'tool_2fa'],
      ['search_tools', 'search_tools_2'],
      ['retry', 'retry_2'],
      ['aio', 'aio_2'],
      ['ToolError', 'ToolError_2'],
      ['json_parse', 'json_parse_2'],
      ['_hidden', 'hidden'],
    ]);
    const source = fileContent(generated, 'tools/__init__.py');
    expect(functionSource(source, 'get_user')).toBe(`def get_user() -> Any:
    """Calls the tool "get-user".

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("get-user", {})`);
    expect(functionSource(source, 'search_tools_2')).toContain('return _call("search_tools", {})');
  });

  it('never lets a root tool take the name of a submodule', () => {
    const generated = generatePythonModule({
      moduleName: 'tools',
      tools: [{ name: 'github', description: 'A root tool.', inputSchema: { type: 'object' } }],
      modules: [{ name: 'github', tools: [createIssue] }],
    });
    expect(generated.functions.map((fn) => `${fn.module}.${fn.pythonName}`)).toEqual([
      'tools.github_2',
      'tools.github.create_issue',
    ]);
  });

  it('escapes triple quotes and backslashes in docstrings', () => {
    const source = generateOne({
      name: 'quote',
      description: 'Has """triple""" quotes and a \\ backslash, C:\\path\\new and \\n literally.\nEnds with a quote "',
      inputSchema: {
        type: 'object',
        properties: { pattern: { type: 'string', description: 'A regex like \\d+ or """.' } },
      },
    });
    expect(functionSource(source, 'quote')).toBe(String.raw`def quote(pattern: str | None = None) -> Any:
    """Has ""\"triple""\" quotes and a \\ backslash, C:\\path\\new and \\n literally.
    Ends with a quote "

    Args:
        pattern (str, optional): A regex like \\d+ or ""\".

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("quote", {}, {"pattern": pattern})`);
  });

  it('documents the result shape from outputSchema and types the return', () => {
    const source = generateOne({
      name: 'stat',
      description: 'Stat a file.',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      outputSchema: {
        type: 'object',
        description: 'File facts.',
        properties: {
          size: { type: 'integer' },
          modified: { type: 'string' },
          kind: { enum: ['file', 'dir'] },
          children: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' } } } },
        },
      },
    });
    expect(functionSource(source, 'stat')).toBe(`def stat(path: str) -> dict:
    """Stat a file.

    Args:
        path (str)

    Returns:
        {"size": int, "modified": str, "kind": Literal["file", "dir"], "children": list[{"name": str}]}
        File facts.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("stat", {"path": path})`);
  });

  it('takes **extra_arguments when the schema allows more properties', () => {
    const source = generateOne({
      name: 'free',
      description: 'Free-form.',
      inputSchema: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true },
    });
    expect(functionSource(source, 'free')).toBe(`def free(a: str | None = None, **extra_arguments: Any) -> Any:
    """Free-form.

    Args:
        a (str, optional)
        **extra_arguments: More arguments, sent as given.

    Returns:
        The tool result as a parsed JSON value.

    Raises:
        ToolError: when the tool fails.
    """
    return _call("free", {}, {"a": a}, extra_arguments)`);
  });

  it('adds required names the schema does not describe, typed Any', () => {
    const source = generateOne({
      name: 'loose',
      description: 'Loose.',
      inputSchema: { type: 'object', properties: { a: { type: 'string' } }, required: ['b', 'a'] },
    });
    expect(functionSource(source, 'loose').split('\n')[0]).toBe('def loose(a: str, b: Any) -> Any:');
  });

  it('wraps each def line on its own: a 100-character def stays on one line while its async def is wrapped', () => {
    const parameter = 'p'.repeat(MAX_DEF_LINE_LENGTH - 'def fits(: str) -> Any:'.length);
    const generated = generatePythonModule({
      moduleName: 'tools',
      tools: [
        {
          name: 'fits',
          description: 'Fits.',
          inputSchema: { type: 'object', properties: { [parameter]: { type: 'string' } }, required: [parameter] },
        },
      ],
    });
    const syncLine = functionSource(fileContent(generated, 'tools/__init__.py'), 'fits').split('\n')[0];
    expect(syncLine).toBe(`def fits(${parameter}: str) -> Any:`);
    expect(syncLine).toHaveLength(MAX_DEF_LINE_LENGTH);
    expect(functionSource(fileContent(generated, 'tools/aio.py'), 'fits').split('\n').slice(0, 3)).toEqual([
      'async def fits(',
      `    ${parameter}: str,`,
      ') -> Any:',
    ]);
  });

  it('leaves unrepresentable or very long defaults to the tool', () => {
    const source = generateOne({
      name: 'defaults',
      description: 'Defaults.',
      inputSchema: {
        type: 'object',
        properties: {
          long: { type: 'string', default: 'x'.repeat(300) },
          odd: { type: 'number', default: Number.NaN },
        },
      },
    });
    expect(functionSource(source, 'defaults').split('\n')[0]).toBe(
      'def defaults(long: str | None = None, odd: float | None = None) -> Any:',
    );
  });
});

describe('generatePythonModule: checks', () => {
  it.each(['', 'my.tools', 'class', '2tools', 'tööls', '__main__', 'codecall_runtime'])(
    'refuses the module name %j',
    (moduleName) => {
      expect(() => generatePythonModule({ moduleName, tools: [] })).toThrowError(
        expect.objectContaining({ code: 'INVALID_CONFIG', details: { moduleName } }),
      );
      expect(() => generatePythonModule({ moduleName, tools: [] })).toThrowError(CodecallError);
    },
  );

  it('accepts other identifiers such as hermes_tools', () => {
    const generated = generatePythonModule({ moduleName: 'hermes_tools', tools: [add] });
    expect(generated.files.map((file) => file.path)).toEqual([
      'hermes_tools/__init__.py',
      'hermes_tools/aio.py',
      'hermes_tools/_catalog.py',
    ]);
    expect(generated.functions[0]?.module).toBe('hermes_tools');
  });

  it('refuses two tools with the same wire name', () => {
    expect(() =>
      generatePythonModule({ moduleName: 'tools', tools: [add], modules: [{ name: 'math', tools: [add] }] }),
    ).toThrowError(expect.objectContaining({ code: 'DUPLICATE_TOOL', details: { name: 'add' } }));
  });

  it('names submodules safely and uniquely', () => {
    const generated = generatePythonModule({
      moduleName: 'tools',
      tools: [],
      modules: [
        { name: 'my-server', tools: [{ ...createIssue, name: 'my-server/create_issue' }] },
        { name: 'My.Server', tools: [] },
        { name: 'aio', tools: [] },
      ],
    });
    expect(generated.files.map((file) => file.path)).toEqual([
      'tools/__init__.py',
      'tools/aio.py',
      'tools/_catalog.py',
      'tools/my_server/__init__.py',
      'tools/my_server/aio.py',
      'tools/My_Server_2/__init__.py',
      'tools/My_Server_2/aio.py',
      'tools/aio_2/__init__.py',
      'tools/aio_2/aio.py',
    ]);
    expect(generated.functions[0]).toMatchObject({ module: 'tools.my_server', pythonName: 'create_issue' });
    expect(fileContent(generated, 'tools/__init__.py')).toContain(
      '_SUBMODULES = ("aio", "my_server", "My_Server_2", "aio_2")',
    );
  });
});
