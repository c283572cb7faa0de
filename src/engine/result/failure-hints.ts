import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { RUNTIME_HELPER_NAMES } from '../../codegen/python-identifiers.js';
import type { Limits } from '../../core/limits.js';
import type { ExecuteResult } from '../../core/result.js';
import { formatBytes, formatSeconds } from '../../core/wording.js';
import type { WorkspaceMount } from '../../core/workspace-mount.js';
import { closestName } from './name-suggestion.js';

/** What hints need to know about the tool module. */
export interface HintContext {
  readonly moduleName: string;
  /** Importable names: functions of the root module and names of submodules. */
  readonly functionNames: readonly string[];
  readonly submoduleNames: readonly string[];
  readonly limits: Limits;
  /** The workspace (host path) and how the script sees it; without it, the script is taken not to see it. */
  readonly workspace?: { readonly root: string; readonly mount: WorkspaceMount } | undefined;
  /** Notable third-party packages the interpreter can import, when probed; shown when a module is missing. */
  readonly importablePackages?: readonly string[] | undefined;
}

/** Helpers every generated module exports besides the tools: the runtime's, from the one list codegen writes. */
export const MODULE_HELPER_NAMES: readonly string[] = Object.freeze([
  ...RUNTIME_HELPER_NAMES,
  'search_tools',
  'ToolError',
]);

/** Folders of the workspace where a package is often kept although they are not on the import path. */
const SOURCE_FOLDERS = ['src', 'lib'];

const PYTHON_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Names listed in a hint at most. */
const MAX_NAMES_IN_HINT = 30;

function listNames(names: readonly string[]): string {
  if (names.length === 0) return '(none)';
  const shown = names.slice(0, MAX_NAMES_IN_HINT).join(', ');
  return names.length > MAX_NAMES_IN_HINT ? `${shown}, … (${names.length} in all)` : shown;
}

/**
 * Maps the common mistakes of model-written scripts to one actionable sentence: a tool that does not exist, a module
 * that is not installed, a tool result treated as a string, a tool used without importing it, and the limits.
 */
export function failureHint(result: Omit<ExecuteResult, 'hint'>, context: HintContext): string | undefined {
  const { moduleName, limits } = context;
  switch (result.reason) {
    case 'timeout':
      return `The script was stopped at its time limit of ${formatSeconds(limits.timeoutMs)}; do less per run, or run tool calls in parallel with ${moduleName}.aio and asyncio.gather.`;
    case 'tool_calls':
      return `The script reached the limit of ${limits.maxToolCalls} tool calls per run; split the work across several runs.`;
    case 'memory':
      return `The script ran out of memory (limit ${formatBytes(limits.memoryBytes)}); process the data in smaller pieces.`;
    case 'output':
      return `The script printed more than ${limits.maxOutputBytes} bytes and was stopped; print a summary, not raw data.`;
    case 'pids':
      return `The script started too many processes or threads (limit ${limits.maxProcesses}); use fewer.`;
    case 'cpu':
      return `The script used up its CPU time (${formatSeconds(limits.cpuSeconds * 1000)}); use a cheaper algorithm or less data.`;
    default:
      break;
  }
  const error = result.error;
  if (error === undefined) return undefined;
  return (
    diskHint(result, error.message, context) ??
    importHint(error.type, error.message, context) ??
    nameHint(error.type, error.message, context) ??
    fileHint(error.type, error.message, context) ??
    valueShapeHint(error.type, error.message)
  );
}

function importHint(type: string, message: string, context: HintContext): string | undefined {
  const { moduleName } = context;
  const importedName = /cannot import name '([^']+)' from '([^']+)'/.exec(message);
  if (type === 'ImportError' && importedName && importedName[2]?.split('.')[0] === moduleName) {
    const wanted = importedName[1] ?? '';
    const suggestion = closestName(wanted, [...context.functionNames, ...MODULE_HELPER_NAMES]);
    const didYouMean = suggestion === undefined ? '' : `did you mean "${suggestion}"? `;
    return `"${importedName[2]}" has no function "${wanted}"; ${didYouMean}the functions of ${moduleName} are: ${listNames(context.functionNames)}.`;
  }
  const missingAttribute = /module '([^']+)' has no attribute '([^']+)'/.exec(message);
  if (type === 'AttributeError' && missingAttribute && missingAttribute[1]?.split('.')[0] === moduleName) {
    const suggestion = closestName(missingAttribute[2] ?? '', [
      ...context.functionNames,
      ...MODULE_HELPER_NAMES,
      ...context.submoduleNames,
    ]);
    const didYouMean = suggestion === undefined ? '' : `did you mean "${suggestion}"? `;
    return `"${missingAttribute[1]}" has no function "${missingAttribute[2]}"; ${didYouMean}the functions of ${moduleName} are: ${listNames(context.functionNames)}.`;
  }
  const missingModule = /No module named '([^']+)'/.exec(message);
  if (type !== 'ModuleNotFoundError' || !missingModule) return undefined;
  const missing = missingModule[1] ?? '';
  const topLevel = missing.split('.')[0] ?? '';
  if (topLevel === moduleName) {
    return `There is no module "${missing}"; import from ${moduleName} (functions: ${listNames(context.functionNames)})${
      context.submoduleNames.length > 0
        ? ` or its submodules ${context.submoduleNames.map((name) => `${moduleName}.${name}`).join(', ')}`
        : ''
    }.`;
  }
  const inWorkspace = findWorkspaceModule(topLevel, context);
  if (inWorkspace !== undefined) return workspaceModuleHint(topLevel, inWorkspace, context);
  const packages = context.importablePackages;
  const available =
    packages === undefined
      ? 'only the Python standard library is available (json, re, csv, collections, urllib, ...)'
      : packages.length === 0
        ? 'the interpreter has the Python standard library and no notable third-party packages'
        : `besides the standard library the interpreter has ${packages.join(', ')}`;
  return `Module "${topLevel}" is not installed: ${available}, and the functions of ${context.moduleName}.`;
}

// Where the workspace holds a module of this name: '' at its root, or a source folder; undefined when it does not.
function findWorkspaceModule(name: string, context: HintContext): string | undefined {
  const root = context.workspace?.root;
  if (root === undefined || !PYTHON_IDENTIFIER.test(name)) return undefined;
  for (const folder of ['', ...SOURCE_FOLDERS]) {
    for (const entry of [name, `${name}.py`]) {
      try {
        lstatSync(join(root, folder, entry));
        return folder;
      } catch {
        // Not there; try the next place.
      }
    }
  }
  return undefined;
}

function workspaceModuleHint(name: string, folder: string, context: HintContext): string {
  const place = folder === '' ? 'the workspace' : `the workspace folder "${folder}"`;
  const mount = context.workspace?.mount ?? 'none';
  if (mount === 'none') {
    return `Module "${name}" is in ${place}, but the script does not see the workspace (workspaceMount "none"): it can only read files through the tools; mount the workspace (workspaceMount "read-only") to import it.`;
  }
  if (folder === '') {
    return `Module "${name}" is in the workspace but did not import: check that it is a package (a folder with __init__.py) or a .py file, and that its own imports exist.`;
  }
  return `Module "${name}" is in ${place}, which is not on the import path: add it first with sys.path.insert(0, "${folder}") (the script starts in the workspace).`;
}

/**
 * ENOSPC. Under bubblewrap it is the run's own disk limit (a value, not a kill: the script may catch it); without a
 * sandbox it is the host's disk.
 */
function diskHint(result: Omit<ExecuteResult, 'hint'>, message: string, context: HintContext): string | undefined {
  // Writing through a memory map into a file whose pages the tmpfs cannot give is SIGBUS, not ENOSPC.
  if (result.isolation === 'bubblewrap' && result.signal === 'SIGBUS') {
    return `The script was killed by SIGBUS: most likely it wrote through a memory map (mmap) into a file past the disk limit of ${formatBytes(context.limits.maxDiskBytes)} per run; write less, or write files with write() to get an OSError instead.`;
  }
  if (!/No space left on device/.test(message)) return undefined;
  if (result.isolation === 'bubblewrap') {
    return `The script's files reached the disk limit of ${formatBytes(context.limits.maxDiskBytes)} per run (working directory, TMPDIR and /tmp together): delete files it no longer needs, write less, or keep data in memory and print a summary.`;
  }
  return 'The disk the script writes to is full: write less, or delete files it no longer needs.';
}

function nameHint(type: string, message: string, context: HintContext): string | undefined {
  const undefinedName = /name '([^']+)' is not defined/.exec(message);
  if (type !== 'NameError' || !undefinedName) return undefined;
  const name = undefinedName[1] ?? '';
  const { moduleName } = context;
  if (context.functionNames.includes(name)) return `Import the tool first: from ${moduleName} import ${name}.`;
  if (MODULE_HELPER_NAMES.includes(name)) return `Import the helper first: from ${moduleName} import ${name}.`;
  const suggestion = closestName(name, [...context.functionNames, ...MODULE_HELPER_NAMES]);
  if (suggestion !== undefined) {
    return `"${name}" is not defined; did you mean "${suggestion}"? Import it first: from ${moduleName} import ${suggestion}.`;
  }
  return undefined;
}

function fileHint(type: string, message: string, context: HintContext): string | undefined {
  const mount = context.workspace?.mount ?? 'none';
  const hasFileTools = context.functionNames.includes('read_file');
  const missingFile = /No such file or directory: '([^']*)'/.exec(message);
  if (type === 'FileNotFoundError' && missingFile) {
    const path = missingFile[1] ?? '';
    if (mount === 'none') {
      const tools = hasFileTools
        ? `read it with ${context.moduleName}.read_file("${path}") and find files with list_files`
        : 'it has no file tools either, so ask for the workspace to be mounted (workspaceMount "read-only")';
      return `"${path}" is not visible to the script: it runs in a private directory and does not see the workspace (workspaceMount "none"); ${tools}.`;
    }
    return `"${path}" does not exist: the script starts in the workspace (mounted ${mount}), so relative paths start there; look with os.listdir(".")${
      hasFileTools ? ' or list_files(".", recursive=True)' : ''
    } and mind the spelling.`;
  }
  if (/Read-only file system/.test(message) && mount === 'read-only') {
    return `The workspace is mounted read-only: write scratch files under os.environ["TMPDIR"] and files to return under os.environ["CODECALL_ARTIFACTS_DIR"]${
      hasFileTools ? `, or change workspace files with ${context.moduleName}.write_file` : ''
    }.`;
  }
  return undefined;
}

function valueShapeHint(type: string, message: string): string | undefined {
  if (
    (type === 'AttributeError' &&
      /'(dict|list)' object has no attribute '(split|strip|lower|upper|replace|splitlines|startswith|endswith|find|encode)'/.test(
        message,
      )) ||
    (type === 'TypeError' &&
      /(string indices must be integers|expected string or bytes-like object, got '(dict|list)'|can only concatenate str \(not "(dict|list)"\))/.test(
        message,
      ))
  ) {
    return 'Tool results arrive as parsed Python values (dicts and lists), not JSON text: index them (result["key"]) instead of treating them as strings; print(result) shows their shape.';
  }
  if (
    (type === 'KeyError' && /^-?\d+$/.test(message)) ||
    (type === 'TypeError' &&
      /('dict_(keys|values|items)' object is not subscriptable|unhashable type: 'slice'|cannot unpack non-iterable)/.test(
        message,
      ))
  ) {
    return 'A dict is indexed by key, not by position: if this is a tool result, print(result) shows its keys; use result["key"], or list(result.values()) for its values in order.';
  }
  if (type === 'ValueError' && /(too many|not enough) values to unpack/.test(message)) {
    return 'If you unpacked a tool result: a dict unpacks to its keys, not its values; take the values by key (result["key"]) — print(result) shows its shape.';
  }
  return undefined;
}
