import type { Limits } from '../../core/limits.js';
import type { ExecuteResult } from '../../core/result.js';
import { formatBytes, formatSeconds } from '../../core/wording.js';

/** What hints need to know about the tool module. */
export interface HintContext {
  readonly moduleName: string;
  /** Importable names: functions of the root module and names of submodules. */
  readonly functionNames: readonly string[];
  readonly submoduleNames: readonly string[];
  readonly limits: Limits;
}

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
  const message = error.message;
  const importedName = /cannot import name '([^']+)' from '([^']+)'/.exec(message);
  if (error.type === 'ImportError' && importedName && importedName[2]?.split('.')[0] === moduleName) {
    return `"${importedName[2]}" has no function "${importedName[1]}"; the functions of ${moduleName} are: ${listNames(context.functionNames)}.`;
  }
  const missingModule = /No module named '([^']+)'/.exec(message);
  if (error.type === 'ModuleNotFoundError' && missingModule) {
    const missing = missingModule[1] ?? '';
    if (missing.split('.')[0] === moduleName) {
      return `There is no module "${missing}"; import from ${moduleName} (functions: ${listNames(context.functionNames)})${
        context.submoduleNames.length > 0
          ? ` or its submodules ${context.submoduleNames.map((name) => `${moduleName}.${name}`).join(', ')}`
          : ''
      }.`;
    }
    return `Module "${missing.split('.')[0]}" is not installed: only the Python standard library is available (json, re, csv, collections, urllib, ...) and the functions of ${moduleName}.`;
  }
  const undefinedName = /name '([^']+)' is not defined/.exec(message);
  if (error.type === 'NameError' && undefinedName && context.functionNames.includes(undefinedName[1] ?? '')) {
    return `Import the tool first: from ${moduleName} import ${undefinedName[1]}.`;
  }
  if (
    (error.type === 'AttributeError' &&
      /'(dict|list)' object has no attribute '(split|strip|lower|upper|replace|splitlines|startswith|endswith|find|encode)'/.test(
        message,
      )) ||
    (error.type === 'TypeError' &&
      /(string indices must be integers|expected string or bytes-like object, got '(dict|list)'|can only concatenate str \(not "(dict|list)"\))/.test(
        message,
      ))
  ) {
    return 'Tool results arrive as parsed Python values (dicts and lists), not JSON text: index them (result["key"]) instead of treating them as strings; print(result) shows their shape.';
  }
  return undefined;
}
