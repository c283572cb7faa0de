import type { Limits } from '../core/limits.js';
import { formatBytes, formatCount, formatSeconds, plural } from '../core/wording.js';
import type { WorkspaceMount } from '../core/workspace-mount.js';
import { shortenText } from './description-summary.js';
import type { GeneratedFunction, GeneratedSubmodule } from './python-module.js';

/** Name of the one tool codecall gives the model. */
export const EXECUTE_CODE_TOOL_NAME = 'execute_code';

/** Functions listed one by one in the description; with more, it lists modules and points to `search_tools`. */
export const DEFAULT_MAX_LISTED_FUNCTIONS = 40;
/** Longest note of a submodule shown beside its functions. */
export const MAX_NOTE_LENGTH = 160;
/** Longest error message shown for a tool source that failed to load. */
export const MAX_FAILED_SOURCE_ERROR_LENGTH = 300;

/** JSON Schema of the `execute_code` arguments. */
export interface ExecuteCodeInputSchema {
  type: 'object';
  properties: { code: { type: 'string'; description: string } };
  required: ['code'];
  additionalProperties: false;
}

/** Arguments of the `execute_code` tool, as {@link executeCodeInputSchema} describes them. */
export interface ExecuteCodeInput {
  /** The Python script to run. */
  code: string;
}

/** The `execute_code` input schema: one required string, `code`. Frozen; copy it if an SDK wants to mutate it. */
export const executeCodeInputSchema: ExecuteCodeInputSchema = Object.freeze({
  type: 'object',
  properties: Object.freeze({
    code: Object.freeze({
      type: 'string',
      description:
        'A complete Python 3 script. Import the tools as functions from the generated module and print only the ' +
        'results you need: what the script prints is all that comes back.',
    }),
  }),
  required: Object.freeze(['code']),
  additionalProperties: false,
}) as ExecuteCodeInputSchema;

/** Options of {@link describeExecuteCodeTool}. */
export interface DescribeExecuteCodeToolOptions {
  /** Name of the generated package, e.g. `tools`. */
  readonly moduleName: string;
  /** The generated functions (see `generatePythonModule`). */
  readonly functions: readonly GeneratedFunction[];
  /** The generated submodules (see `generatePythonModule`): their notes are shown beside their functions. */
  readonly submodules?: readonly GeneratedSubmodule[] | undefined;
  /** The configured limits, stated to the model as they are. */
  readonly limits: Limits;
  /** Isolation the runs get; `auto` when it is not known yet. Without it, isolation is not mentioned. */
  readonly isolation?: 'none' | 'bubblewrap' | 'auto' | undefined;
  /** Set when the runs have less isolation than was asked for (no sandbox): the model is told so. */
  readonly isolationWarning?: string | undefined;
  /** Whether runs may use the network; stated when `isolation` is `bubblewrap` (no other level can take it away). */
  readonly network?: boolean | undefined;
  /** How the script sees the workspace; stated with where to write. Without it, the workspace is not mentioned. */
  readonly workspaceMount?: WorkspaceMount | undefined;
  /** Tool sources that could not be loaded, with their error, so the model knows what is missing and why. */
  readonly failedSources?: readonly { readonly name: string; readonly error: string }[] | undefined;
  /**
   * What the interpreter can import besides the standard library (notable packages by name, the others counted);
   * without it the description says only the standard library is available.
   */
  readonly importable?: { readonly notable: readonly string[]; readonly others: number } | undefined;
  /** List functions one by one up to this many; default {@link DEFAULT_MAX_LISTED_FUNCTIONS}. */
  readonly maxListedFunctions?: number | undefined;
}

function groupByModule(functions: readonly GeneratedFunction[]): Map<string, GeneratedFunction[]> {
  const groups = new Map<string, GeneratedFunction[]>();
  for (const fn of functions) {
    const group = groups.get(fn.module);
    if (group === undefined) groups.set(fn.module, [fn]);
    else group.push(fn);
  }
  return groups;
}

function describeFunctions(
  moduleName: string,
  functions: readonly GeneratedFunction[],
  maxListed: number,
  notes: ReadonlyMap<string, string>,
): string {
  if (functions.length === 0) return `\`${moduleName}\` has no functions at the moment.`;
  const groups = groupByModule(functions);
  if (functions.length <= maxListed) {
    const sections = [...groups].map(([module, members]) => {
      const lines = members.map((fn) => `- ${fn.signature}${fn.summary === '' ? '' : ` — ${fn.summary}`}`);
      const note = notes.get(module);
      const header = `Functions in \`${module}\` (\`from ${module} import ...\`):`;
      return [header, ...(note === undefined ? [] : [sentence(note)]), ...lines].join('\n');
    });
    return sections.join('\n\n');
  }
  const modules = [...groups].map(([module, members]) => {
    const note = notes.get(module);
    return `- \`${module}\`: ${plural(members.length, 'function')}${note === undefined ? '' : ` — ${sentence(note)}`}`;
  });
  return [
    `There are ${formatCount(functions.length)} functions, too many to list here:`,
    ...modules,
    `Find the ones you need with \`print(${moduleName}.search_tools("what you want to do"))\` (name, signature and ` +
      `description of the best matches) and read one's arguments with \`help(${moduleName}.<function>)\`.`,
  ].join('\n');
}

/** A note as a sentence: ending with a full stop. */
function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

/** The limits in words; the disk limit only where it holds (under bubblewrap). */
function describeLimits(limits: Limits, diskBounded: boolean): string {
  return (
    `Limits: the script is stopped after ${formatSeconds(limits.timeoutMs)} and may make at most ` +
    `${plural(limits.maxToolCalls, 'tool call')}; one tool call may take up to ` +
    `${formatSeconds(limits.toolCallTimeoutMs)}. You see at most ${formatCount(limits.maxStdoutBytes)} bytes of ` +
    'output (the beginning and the end of longer output), so print summaries, not raw data. Error messages and ' +
    `tracebacks are cut to ${formatCount(limits.maxErrorBytes)} bytes.` +
    (diskBounded
      ? ` Files the script writes (working directory, TMPDIR and /tmp together) may take ${formatBytes(limits.maxDiskBytes)}; ` +
        'past that, writes fail with OSError "No space left on device".'
      : '')
  );
}

const SANDBOX_NOTE = 'reach files and services outside it through the tools.';

/** What the model is told when no sandbox could be had: it should not count on one. */
export const UNSANDBOXED_NOTE =
  'Warning: no sandbox is available here. The script runs as a plain process on the host, not isolated from it: ' +
  'reach files and services through the tools, and do not run anything you would not run on the host itself.';

function describeIsolation(
  isolation: DescribeExecuteCodeToolOptions['isolation'],
  network: boolean | undefined,
  workspaceMount: WorkspaceMount | undefined,
): string {
  if (isolation === 'auto') return `The script may run in a sandbox; ${SANDBOX_NOTE}`;
  if (isolation !== 'bubblewrap') return '';
  const networkNote = network === undefined ? '' : network ? ' It may use the network.' : ' It has no network access.';
  if (workspaceMount !== undefined && workspaceMount !== 'none') {
    return `The script runs in a sandbox; reach services outside it through the tools.${networkNote}`;
  }
  return `The script runs in a sandbox with a private working directory; ${SANDBOX_NOTE}${networkNote}`;
}

function describeImportable(importable: DescribeExecuteCodeToolOptions['importable']): string {
  if (importable === undefined || (importable.notable.length === 0 && importable.others === 0)) {
    return 'Only the Python standard library is available.';
  }
  const others = importable.others === 0 ? '' : plural(importable.others, 'other module');
  const named = importable.notable.join(', ');
  const list = named === '' ? others : others === '' ? named : `${named} and ${others}`;
  return `Installed besides the Python standard library: ${list}.`;
}

const SCRATCH_NOTE =
  'Write scratch files under os.environ["TMPDIR"] and files meant for the user under ' +
  'os.environ["CODECALL_ARTIFACTS_DIR"].';

/** The workspace mode in words: where the script starts, what it may read, where its writes go. */
export function describeWorkspaceMount(mount: WorkspaceMount): string {
  switch (mount) {
    case 'none':
      return "The script does not see the workspace's files: it starts in a private directory; reach the files through the tools.";
    case 'read-only':
      return (
        'Workspace: the script starts in the workspace (its working directory, mounted read-only): read files with ' +
        `relative paths, open() and os.walk("."), and import its modules; it cannot change them there. ${SCRATCH_NOTE}`
      );
    case 'copy':
      return (
        'Workspace: the script starts in a throwaway copy of the workspace (its working directory): read, import, ' +
        `run and change files there freely; every change is discarded when the run ends. ${SCRATCH_NOTE}`
      );
    case 'read-write':
      return (
        'Workspace: the script starts in the workspace (its working directory) with write access: files it ' +
        `writes or deletes there change the real workspace. ${SCRATCH_NOTE}`
      );
  }
}

/**
 * The model-facing description of the `execute_code` tool: what it does and how to use it, the available functions
 * (one line each, or the modules and a pointer to `search_tools` when there are more than `maxListedFunctions`), the
 * configured limits in words, and the tool sources that failed to load. Deterministic.
 */
export function describeExecuteCodeTool(options: DescribeExecuteCodeToolOptions): string {
  const { moduleName, functions, limits } = options;
  const maxListed = options.maxListedFunctions ?? DEFAULT_MAX_LISTED_FUNCTIONS;
  const example = functions.find((fn) => fn.module === moduleName)?.pythonName ?? '<function>';
  const overview =
    'Runs a Python 3 script and returns what it prints. ' +
    `Import the tools as functions from \`${moduleName}\` (\`from ${moduleName} import ${example}\`); ` +
    'each call runs the tool and returns its result as a parsed value (dict, list, str, ...). ' +
    'Only printed output comes back to you, so do the work in the script (loops, filtering, combining results) ' +
    `and print just what you need. A failing tool raises \`${moduleName}.ToolError\`. ` +
    `For parallel calls, \`await asyncio.gather(...)\` over the same functions in \`${moduleName}.aio\`. ` +
    `Helpers in \`${moduleName}\`: \`json_parse(text, default=None)\` (lenient JSON), \`shell_quote(value)\`, ` +
    '`retry(fn, *args, max_attempts=3, delay=1.0)` (retries on any exception) and `search_tools(query)`. ' +
    `To return a file or a chart, call \`${moduleName}.save_artifact(name, data)\` (bytes or str); matplotlib ` +
    'figures left open and images saved in the working directory come back as files too. ' +
    describeImportable(options.importable);
  const notes = new Map<string, string>();
  for (const submodule of options.submodules ?? []) {
    if (submodule.note !== undefined) notes.set(submodule.module, shortenText(submodule.note, MAX_NOTE_LENGTH));
  }
  const sections = [
    overview,
    describeFunctions(moduleName, functions, maxListed, notes),
    describeLimits(limits, options.isolation === 'bubblewrap'),
  ];
  const isolationNote = describeIsolation(options.isolation, options.network, options.workspaceMount);
  if (isolationNote !== '') sections.push(isolationNote);
  if (options.workspaceMount !== undefined) sections.push(describeWorkspaceMount(options.workspaceMount));
  if (options.isolationWarning !== undefined) sections.push(UNSANDBOXED_NOTE);
  const failed = options.failedSources ?? [];
  if (failed.length > 0) {
    const lines = failed.map(
      (source) => `- ${source.name}: ${shortenText(source.error, MAX_FAILED_SOURCE_ERROR_LENGTH) || 'unknown error'}`,
    );
    sections.push(['These tool sources failed to load, so their functions are missing:', ...lines].join('\n'));
  }
  return sections.join('\n\n');
}
