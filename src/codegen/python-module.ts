import { CodecallError } from '../core/errors.js';
import { plural } from '../core/wording.js';
import type { ToolDescriptor, ToolModuleDescriptor } from '../tools/types.js';
import { shortenText, summarizeDescription } from './description-summary.js';
import {
  ASYNC_CALL_HELPER,
  type PythonFunctionPlan,
  planPythonFunction,
  type RenderedPythonFunction,
  renderPythonFunction,
  SYNC_CALL_HELPER,
} from './python-function.js';
import {
  assignPythonIdentifiers,
  isPythonIdentifier,
  RESERVED_MODULE_NAMES,
  RUNTIME_HELPER_NAMES,
} from './python-identifiers.js';
import { escapeDocstringText, pythonStringLiteral } from './python-literals.js';

/** Longest description stored per function in the `search_tools` catalog (`help()` shows the whole one). */
export const MAX_CATALOG_DESCRIPTION_LENGTH = 400;
/** Default `limit` of the generated `search_tools`. */
export const DEFAULT_SEARCH_TOOLS_LIMIT = 10;

/** Python package the generated code imports its runtime from (shipped in the package's `python/` folder). */
export const PYTHON_RUNTIME_PACKAGE = 'codecall_runtime';

/** One generated source file. */
export interface GeneratedFile {
  /** Path relative to a directory on `sys.path`, with `/` separators, e.g. `tools/github/aio.py`. */
  readonly path: string;
  /** UTF-8 Python source. */
  readonly content: string;
}

/** One tool function of the generated module. */
export interface GeneratedFunction {
  /** Dotted module the function is imported from, e.g. `tools` or `tools.github`. */
  readonly module: string;
  /** Function name in that module. */
  readonly pythonName: string;
  /** Tool name the call is sent under. */
  readonly wireName: string;
  /** One line: `read_file(path: str, offset: int | None = None) -> dict`. */
  readonly signature: string;
  /** First sentence of the description, at most `MAX_SUMMARY_LENGTH` (120) characters. */
  readonly summary: string;
}

/** One submodule of the generated package. */
export interface GeneratedSubmodule {
  /** Dotted name, e.g. `tools.github`. */
  readonly module: string;
  /** Name of the group as configured (e.g. the MCP server's or the database's name). */
  readonly configuredName: string;
  /** The group's one-line note, when it has one (e.g. "SQLite database, read-only"). */
  readonly note?: string | undefined;
}

/** The generated package: its files and an index of its functions. */
export interface GeneratedPythonModule {
  /** Files to write under one directory, which then goes on `sys.path`. */
  readonly files: readonly GeneratedFile[];
  /** Every tool function, root module first, then each submodule, in input order. */
  readonly functions: readonly GeneratedFunction[];
  /** Every submodule, in input order. */
  readonly submodules: readonly GeneratedSubmodule[];
}

/** Options of {@link generatePythonModule}. */
export interface GeneratePythonModuleOptions {
  /** Name of the top-level package, e.g. `tools`: a Python identifier without dots. */
  readonly moduleName: string;
  /** Tools of the top-level module. */
  readonly tools: readonly ToolDescriptor[];
  /** Groups that become submodules (`tools.github`), e.g. one per MCP server. */
  readonly modules?: readonly ToolModuleDescriptor[] | undefined;
}

interface PlannedModule {
  /** Dotted name, e.g. `tools.github`. */
  readonly dottedName: string;
  /** Directory of the package, e.g. `tools/github`. */
  readonly directory: string;
  /** Its tool functions, in input order. */
  readonly functions: readonly PythonFunctionPlan[];
  /** Source of each function, in the order of `functions`. */
  readonly rendered: readonly RenderedPythonFunction[];
}

interface PlannedSubmodule extends PlannedModule {
  /** Identifier under the root package. */
  readonly pythonName: string;
  /** Name as configured. */
  readonly configuredName: string;
  /** Description of the group, for the submodule's docstring (empty when it has none). */
  readonly description: string;
  /** The group's one-line note (empty when it has none). */
  readonly note: string;
}

function checkModuleName(moduleName: unknown): asserts moduleName is string {
  const valid =
    typeof moduleName === 'string' &&
    isPythonIdentifier(moduleName) &&
    moduleName !== PYTHON_RUNTIME_PACKAGE &&
    !(moduleName.startsWith('__') && moduleName.endsWith('__'));
  if (!valid) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `moduleName ${JSON.stringify(moduleName)} is not usable as a Python package name; use an ASCII identifier ` +
        `without dots that is not a keyword, a dunder name or "${PYTHON_RUNTIME_PACKAGE}", e.g. "tools"`,
      { moduleName },
    );
  }
}

function checkUniqueWireNames(tools: readonly ToolDescriptor[]): void {
  const seen = new Set<string>();
  for (const tool of tools) {
    if (seen.has(tool.name)) {
      throw new CodecallError(
        'DUPLICATE_TOOL',
        `two tools are named ${JSON.stringify(tool.name)}; give each tool a unique name`,
        { name: tool.name },
      );
    }
    seen.add(tool.name);
  }
}

function planFunctions(
  tools: readonly ToolDescriptor[],
  options: { readonly wirePrefix: string; readonly reserved: readonly string[] },
): Pick<PlannedModule, 'functions' | 'rendered'> {
  // A source's wire names carry its name as a prefix (`github/create_issue`); inside `tools.github` it is redundant.
  const baseNames = tools.map((tool) =>
    options.wirePrefix !== '' && tool.name.startsWith(options.wirePrefix)
      ? tool.name.slice(options.wirePrefix.length)
      : tool.name,
  );
  const pythonNames = assignPythonIdentifiers(baseNames, { kind: 'function', reserved: options.reserved });
  const functions = tools.map((tool, index) => planPythonFunction(tool, pythonNames[index] ?? tool.name));
  return { functions, rendered: functions.map((plan) => renderPythonFunction(plan)) };
}

function renderAll(names: readonly string[]): string | string[] {
  if (names.length === 0) return '__all__ = []';
  return ['__all__ = [', ...names.map((name) => `    ${pythonStringLiteral(name)},`), ']'];
}

function renderModuleDocstring(text: string): string {
  const escaped = escapeDocstringText(text.trim());
  return escaped.includes('\n') ? `"""${escaped}\n"""` : `"""${escaped}"""`;
}

/**
 * A module: docstring and header blocks one blank line apart, then definitions two blank lines apart (PEP 8).
 * A header block given as lines is written one line after the other.
 */
function renderPythonFile(parts: {
  readonly docstring: string;
  readonly header: readonly (string | readonly string[])[];
  readonly definitions: readonly string[];
}): string {
  // One join over every piece: the file is copied once, not once per nesting level (a big file is costly to copy).
  const pieces: string[] = [renderModuleDocstring(parts.docstring)];
  for (const block of parts.header) {
    pieces.push('\n\n');
    if (typeof block === 'string') pieces.push(block);
    else
      block.forEach((line, index) => {
        if (index > 0) pieces.push('\n');
        pieces.push(line);
      });
  }
  for (const definition of parts.definitions) pieces.push('\n\n\n', definition);
  pieces.push('\n');
  return pieces.join('');
}

function renderImports(names: readonly string[]): string {
  return names.map((name) => `from ${PYTHON_RUNTIME_PACKAGE} import ${name}`).join('\n');
}

function renderSubmoduleNames(names: readonly string[]): string {
  const literals = names.map(pythonStringLiteral);
  return `_SUBMODULES = (${literals.join(', ')}${literals.length === 1 ? ',' : ''})`;
}

const LAZY_SUBMODULES_SOURCE = [
  '# Submodules load on first attribute access, so importing this package stays cheap.',
  'def __getattr__(name):',
  '    if name in _SUBMODULES:',
  '        import importlib',
  '',
  '        return importlib.import_module(__name__ + "." + name)',
  '    raise AttributeError("module \'" + __name__ + "\' has no attribute \'" + name + "\'")',
].join('\n');

function renderCallHelper(options: { readonly isAsync: boolean }): string {
  const name = options.isAsync ? ASYNC_CALL_HELPER : SYNC_CALL_HELPER;
  const send = options.isAsync ? 'await _runtime_acall' : '_runtime_call';
  return [
    '# Optional arguments left at None are not sent, so the tool applies its own default.',
    `${options.isAsync ? 'async def' : 'def'} ${name}(wire_name, arguments, optional_arguments=None, extra_arguments=None):`,
    '    if optional_arguments is not None:',
    '        for key, value in optional_arguments.items():',
    '            if value is not None:',
    '                arguments[key] = value',
    '    if extra_arguments:',
    '        arguments.update(extra_arguments)',
    `    return ${send}(wire_name, arguments)`,
  ].join('\n');
}

function renderSearchTools(moduleName: string): string {
  return `def search_tools(query: str, limit: int = ${DEFAULT_SEARCH_TOOLS_LIMIT}) -> list[dict]:
    """Finds functions by what they do, best matches first.

    Args:
        query (str): Words to look for in function names, signatures and descriptions.
        limit (int, optional): Most results to return. Defaults to ${DEFAULT_SEARCH_TOOLS_LIMIT}.

    Returns:
        list[{"name": str, "signature": str, "description": str}]
        "name" is the dotted import path: "${moduleName}.<function>" or "${moduleName}.<submodule>.<function>".
    """
    from ._catalog import CATALOG

    return _search_catalog(CATALOG, query, limit)`;
}

function renderRootModule(moduleName: string, root: PlannedModule, submodules: readonly PlannedSubmodule[]): string {
  const submoduleLines = submodules.map((submodule) => {
    const summary = submodule.note.trim() || summarizeDescription(submodule.description);
    const count = plural(submodule.functions.length, 'function');
    return `- ${submodule.dottedName} (${count})${summary === '' ? '' : `: ${summary}`}`;
  });
  const docstring = [
    `Functions that call this host's tools: \`from ${moduleName} import <function>\`.`,
    '',
    'Each function runs one tool on the host and returns its result as a parsed JSON value (dict, list, str, ...).',
    'A failing tool raises ToolError. Optional arguments left at None are not sent, so the tool uses its default.',
    '',
    `- ${moduleName}.aio has the same functions as coroutines, for parallel calls:`,
    `  \`await asyncio.gather(${moduleName}.aio.first(...), ${moduleName}.aio.second(...))\``,
    `- ${moduleName}.search_tools("query") finds functions by name and description; help(function) shows one.`,
    '- json_parse, shell_quote and retry are helpers of the runtime (see help()).',
    '- save_artifact("name.ext", data) returns a file (bytes or str) with the result; open matplotlib figures come back as PNG.',
    ...(submoduleLines.length > 0 ? ['', 'Submodules, imported on first use:', ...submoduleLines] : []),
  ].join('\n');
  const exported = [
    ...root.functions.map((plan) => plan.pythonName),
    'ToolError',
    'search_tools',
    ...RUNTIME_HELPER_NAMES,
  ];
  return renderPythonFile({
    docstring,
    header: [
      'from __future__ import annotations',
      renderImports([
        ['ToolError', ...[...RUNTIME_HELPER_NAMES].sort()].join(', '),
        'call as _runtime_call',
        'search_catalog as _search_catalog',
      ]),
      renderAll(exported),
      renderSubmoduleNames(['aio', ...submodules.map((submodule) => submodule.pythonName)]),
    ],
    definitions: [
      LAZY_SUBMODULES_SOURCE,
      renderCallHelper({ isAsync: false }),
      renderSearchTools(moduleName),
      ...root.rendered.map((rendered) => rendered.sync),
    ],
  });
}

function renderSubmodule(submodule: PlannedSubmodule): string {
  const description = submodule.description.trim();
  const note = submodule.note.trim();
  const docstring = [
    `Functions of the tool source ${pythonStringLiteral(submodule.configuredName)}: ` +
      `\`from ${submodule.dottedName} import <function>\`.`,
    ...(note === '' ? [] : ['', /[.!?]$/.test(note) ? note : `${note}.`]),
    ...(description === '' ? [] : ['', description]),
    '',
    `Async variants for parallel calls are in ${submodule.dottedName}.aio.`,
  ].join('\n');
  return renderPythonFile({
    docstring,
    header: [
      'from __future__ import annotations',
      renderImports(['call as _runtime_call']),
      renderAll(submodule.functions.map((plan) => plan.pythonName)),
      renderSubmoduleNames(['aio']),
    ],
    definitions: [
      LAZY_SUBMODULES_SOURCE,
      renderCallHelper({ isAsync: false }),
      ...submodule.rendered.map((rendered) => rendered.sync),
    ],
  });
}

function renderAioModule(module: PlannedModule): string {
  const docstring = [
    `Async variants of the functions in ${module.dottedName}: same names and arguments, awaitable.`,
    '',
    'Calls awaited together run concurrently: `results = await asyncio.gather(first(...), second(...))`.',
  ].join('\n');
  return renderPythonFile({
    docstring,
    header: [
      'from __future__ import annotations',
      renderImports(['acall as _runtime_acall']),
      renderAll(module.functions.map((plan) => plan.pythonName)),
    ],
    definitions: [renderCallHelper({ isAsync: true }), ...module.rendered.map((rendered) => rendered.async)],
  });
}

function renderCatalog(moduleName: string, modules: readonly PlannedModule[]): string {
  const rows = modules.flatMap((module) =>
    module.functions.map((plan) => {
      const description = shortenText(plan.description, MAX_CATALOG_DESCRIPTION_LENGTH);
      const fields = [`${module.dottedName}.${plan.pythonName}`, plan.signature, description];
      return `    (${fields.map(pythonStringLiteral).join(', ')}),`;
    }),
  );
  return renderPythonFile({
    docstring: `Search index of every function in ${moduleName}, loaded by search_tools() on first use.`,
    header: [rows.length === 0 ? 'CATALOG = []' : ['CATALOG = [', ...rows, ']']],
    definitions: [],
  });
}

function toGeneratedFunctions(module: PlannedModule): GeneratedFunction[] {
  return module.functions.map((plan) => ({
    module: module.dottedName,
    pythonName: plan.pythonName,
    wireName: plan.wireName,
    signature: plan.signature,
    summary: summarizeDescription(plan.description),
  }));
}

/**
 * Checks what {@link generatePythonModule} checks of its input, without generating anything.
 * @throws CodecallError `INVALID_CONFIG` when `moduleName` is not a usable package name; `DUPLICATE_TOOL` when two
 *   tools share a wire name.
 */
export function checkPythonModuleInput(options: GeneratePythonModuleOptions): void {
  checkModuleName(options.moduleName);
  checkUniqueWireNames([...options.tools, ...(options.modules ?? []).flatMap((group) => group.tools)]);
}

/**
 * Generates the Python package the model's scripts import (`from tools import read_file`): one function per tool
 * with a real signature and docstring, `tools.aio` with async variants, a lazily imported submodule per tool group
 * (`tools.github`, with its own `aio`), and a catalog behind `tools.search_tools(query)`. The output depends only on
 * the input (same input, same text).
 * @throws CodecallError `INVALID_CONFIG` when `moduleName` is not a usable package name; `DUPLICATE_TOOL` when two
 *   tools share a wire name.
 */
export function generatePythonModule(options: GeneratePythonModuleOptions): GeneratedPythonModule {
  const { moduleName, tools } = options;
  checkPythonModuleInput(options);
  const groups = options.modules ?? [];

  const submoduleNames = assignPythonIdentifiers(
    groups.map((group) => group.name),
    { kind: 'module', reserved: RESERVED_MODULE_NAMES },
  );
  const submodules: PlannedSubmodule[] = groups.map((group, index) => {
    const pythonName = submoduleNames[index] ?? group.name;
    return {
      pythonName,
      configuredName: group.name,
      description: typeof group.description === 'string' ? group.description : '',
      note: typeof group.note === 'string' ? group.note : '',
      dottedName: `${moduleName}.${pythonName}`,
      directory: `${moduleName}/${pythonName}`,
      ...planFunctions(group.tools, { wirePrefix: `${group.name}/`, reserved: RESERVED_MODULE_NAMES }),
    };
  });
  const root: PlannedModule = {
    dottedName: moduleName,
    directory: moduleName,
    ...planFunctions(tools, { wirePrefix: '', reserved: [...RESERVED_MODULE_NAMES, ...submoduleNames] }),
  };

  const files: GeneratedFile[] = [
    { path: `${moduleName}/__init__.py`, content: renderRootModule(moduleName, root, submodules) },
    { path: `${moduleName}/aio.py`, content: renderAioModule(root) },
    { path: `${moduleName}/_catalog.py`, content: renderCatalog(moduleName, [root, ...submodules]) },
  ];
  for (const submodule of submodules) {
    files.push({ path: `${submodule.directory}/__init__.py`, content: renderSubmodule(submodule) });
    files.push({ path: `${submodule.directory}/aio.py`, content: renderAioModule(submodule) });
  }
  return {
    files,
    functions: [root, ...submodules].flatMap(toGeneratedFunctions),
    submodules: submodules.map((submodule) => ({
      module: submodule.dottedName,
      configuredName: submodule.configuredName,
      ...(submodule.note === '' ? {} : { note: submodule.note }),
    })),
  };
}
