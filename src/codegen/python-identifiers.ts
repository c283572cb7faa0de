/**
 * Words that cannot be Python identifiers on any supported version (3.8+): the keywords, plus `__debug__` (assigning
 * it is a SyntaxError) and `__peg_parser__` (a keyword in Python 3.9 only). Soft keywords (`match`, `case`, `type`,
 * `_`) are valid identifiers and are not listed.
 */
export const PYTHON_KEYWORDS: ReadonlySet<string> = new Set([
  'False',
  'None',
  'True',
  'and',
  'as',
  'assert',
  'async',
  'await',
  'break',
  'class',
  'continue',
  'def',
  'del',
  'elif',
  'else',
  'except',
  'finally',
  'for',
  'from',
  'global',
  'if',
  'import',
  'in',
  'is',
  'lambda',
  'nonlocal',
  'not',
  'or',
  'pass',
  'raise',
  'return',
  'try',
  'while',
  'with',
  'yield',
  '__debug__',
  '__peg_parser__',
]);

/** Helpers of the runtime the generated root module re-exports next to `ToolError` (`from tools import retry`). */
export const RUNTIME_HELPER_NAMES: readonly string[] = Object.freeze([
  'json_parse',
  'shell_quote',
  'retry',
  'save_artifact',
]);

/**
 * Names the generated module defines itself, so no tool function or submodule may take them: `ToolError` and the
 * re-exported runtime helpers, `search_tools`, the `aio` submodule, and `AttributeError` (the module's lazy `__getattr__` raises it, so a
 * function of that name would break attribute lookup). Names starting with `_` are reserved as well (see
 * {@link PythonNameKind}).
 */
export const RESERVED_MODULE_NAMES: readonly string[] = Object.freeze([
  'ToolError',
  'aio',
  'search_tools',
  ...RUNTIME_HELPER_NAMES,
  'AttributeError',
]);

/**
 * What a name is for, which decides its fallback word and whether a leading `_` may stay:
 * - `function`: a tool function (fallback `tool`; leading underscores removed, they belong to the module's internals);
 * - `module`: a submodule (fallback `module`; leading underscores removed; compared case-insensitively, because
 *   submodules are directories and some file systems ignore case);
 * - `parameter`: a function parameter (fallback `arg`; a leading `_` stays).
 */
export type PythonNameKind = 'function' | 'module' | 'parameter';

const FALLBACK_WORDS: Readonly<Record<PythonNameKind, string>> = {
  function: 'tool',
  module: 'module',
  parameter: 'arg',
};

const PYTHON_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INVALID_CHARACTER_RUN = /[^A-Za-z0-9_]+/g;
const LEADING_UNDERSCORES = /^_+/;
const LEADING_DIGIT = /^[0-9]/;

/** True when `text` is an ASCII Python identifier that is not a keyword. */
export function isPythonIdentifier(text: string): boolean {
  return PYTHON_IDENTIFIER.test(text) && !PYTHON_KEYWORDS.has(text);
}

/**
 * Turns an arbitrary name into a valid ASCII Python identifier, without checking collisions. The rules, in order:
 * 1. every run of characters other than ASCII letters, digits and `_` becomes one `_` (`max-results` → `max_results`,
 *    `read file!` → `read_file_`, `café` → `caf_`);
 * 2. for functions and modules, leading underscores are removed (`_private` → `private`);
 * 3. an empty result becomes the fallback word: `tool`, `module` or `arg`;
 * 4. a leading digit gets the fallback word and `_` in front (`2fa` → `tool_2fa` for a function, `arg_2fa` for a
 *    parameter);
 * 5. a keyword gets `_` appended (`class` → `class_`, `None` → `None_`, `async` → `async_`).
 */
export function toPythonIdentifier(name: string, kind: PythonNameKind): string {
  if (PYTHON_IDENTIFIER.test(name) && !PYTHON_KEYWORDS.has(name) && (kind === 'parameter' || name[0] !== '_')) {
    return name;
  }
  const fallback = FALLBACK_WORDS[kind];
  let identifier = name.replace(INVALID_CHARACTER_RUN, '_');
  if (kind !== 'parameter') identifier = identifier.replace(LEADING_UNDERSCORES, '');
  if (identifier === '') return fallback;
  if (LEADING_DIGIT.test(identifier)) identifier = `${fallback}_${identifier}`;
  if (PYTHON_KEYWORDS.has(identifier)) identifier = `${identifier}_`;
  return identifier;
}

/** Options of {@link assignPythonIdentifiers}. */
export interface AssignPythonIdentifiersOptions {
  /** What the names are for (see {@link PythonNameKind}). */
  readonly kind: PythonNameKind;
  /** Names that count as already taken, e.g. {@link RESERVED_MODULE_NAMES}. */
  readonly reserved?: Iterable<string> | undefined;
}

/**
 * Gives each name a valid Python identifier (see {@link toPythonIdentifier}) that differs from every other one and
 * from the reserved names. A taken identifier gets `_2`, `_3`, ... appended. Names that are already valid, unreserved
 * identifiers are assigned first, so they keep their spelling even when an earlier name sanitises to the same text
 * (`["a-b", "a_b"]` → `["a_b_2", "a_b"]`). Deterministic: the result depends only on the inputs and their order.
 * @returns one identifier per name, in the same order.
 */
export function assignPythonIdentifiers(names: readonly string[], options: AssignPythonIdentifiersOptions): string[] {
  // Submodules are directories; on case-insensitive file systems `GitHub` and `github` would be the same one.
  const comparable = options.kind === 'module' ? (text: string) => text.toLowerCase() : (text: string) => text;
  const taken = new Set<string>();
  for (const name of options.reserved ?? []) taken.add(comparable(name));
  const assigned: (string | undefined)[] = names.map(() => undefined);

  names.forEach((name, index) => {
    if (toPythonIdentifier(name, options.kind) === name && !taken.has(comparable(name))) {
      taken.add(comparable(name));
      assigned[index] = name;
    }
  });
  names.forEach((name, index) => {
    if (assigned[index] !== undefined) return;
    const base = toPythonIdentifier(name, options.kind);
    let candidate = base;
    for (let suffix = 2; taken.has(comparable(candidate)); suffix += 1) candidate = `${base}_${suffix}`;
    taken.add(comparable(candidate));
    assigned[index] = candidate;
  });
  return assigned.map((identifier) => identifier ?? '');
}
