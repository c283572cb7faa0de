import { isRecord } from '../core/values.js';
import type { JsonSchema, ToolDescriptor } from '../tools/types.js';
import { assignPythonIdentifiers } from './python-identifiers.js';
import {
  escapeDocstringText,
  MAX_DEFAULT_LITERAL_LENGTH,
  pythonStringLiteral,
  toPythonLiteral,
} from './python-literals.js';
import { pythonShapeOf, pythonTypeOf } from './python-types.js';

/** A `def` line longer than this is written with one parameter per line. */
export const MAX_DEF_LINE_LENGTH = 100;
/** Enum values listed in a parameter's docstring entry when they are not in its `Literal` type hint. */
export const MAX_LISTED_ENUM_VALUES = 20;

/** Name of the `**` parameter that takes arguments the schema allows beyond its properties. */
export const EXTRA_ARGUMENTS_NAME = 'extra_arguments';
/** The generated module's helper that sends a call (see `renderCallHelper`). */
export const SYNC_CALL_HELPER = '_call';
/** The generated `aio` module's helper that sends a call and awaits it. */
export const ASYNC_CALL_HELPER = '_acall';

const INDENT = '    ';
// Parameter names the function body uses itself: the call helpers, and `**extra_arguments` when the tool takes more.
const RESERVED_PARAMETER_NAMES: readonly string[] = [SYNC_CALL_HELPER, ASYNC_CALL_HELPER];
const RESERVED_WITH_EXTRA_ARGUMENTS: readonly string[] = [...RESERVED_PARAMETER_NAMES, EXTRA_ARGUMENTS_NAME];

/** One parameter of a generated function. */
export interface PythonParameter {
  /** Identifier in the signature. */
  readonly pythonName: string;
  /** Property name the value is sent under. */
  readonly wireName: string;
  /** Type hint as written in the signature. */
  readonly annotation: string;
  /** Type shown in the docstring (for an optional parameter, without the `| None` its `= None` default adds). */
  readonly documentedType: string;
  /** Python default literal; undefined for a required parameter. */
  readonly defaultLiteral?: string | undefined;
  /** Left out of the call when `None` (optional parameters whose Python default is `None`). */
  readonly omittedWhenNone: boolean;
  /** The property's description (or title), trimmed; empty when it has none. */
  readonly description: string;
  /** Keys of an object argument (`{"login": str}`), shown in the docstring; undefined when the type says it all. */
  readonly shape?: string | undefined;
  /** Enum values to list in the docstring because the type hint does not show them (too many for `Literal`). */
  readonly unlistedEnumValues?: readonly unknown[] | undefined;
}

/** Everything needed to write one tool's function, sync or async. */
export interface PythonFunctionPlan {
  /** Function name in its module. */
  readonly pythonName: string;
  /** Tool name the call is sent under. */
  readonly wireName: string;
  /** The tool's description as given (empty when it has none). */
  readonly description: string;
  /** Required parameters first, then optional ones, each group in schema order. */
  readonly parameters: readonly PythonParameter[];
  /** The schema allows more properties than it lists; they go through `**extra_arguments`. */
  readonly acceptsExtraArguments: boolean;
  /** Return type hint: from `outputSchema`, else `Any`. */
  readonly returnType: string;
  /** Result schema, rendered in the docstring's `Returns:` section. */
  readonly outputSchema?: JsonSchema | undefined;
  /** Each parameter as written in the signature, `**extra_arguments: Any` last when accepted. */
  readonly parameterTexts: readonly string[];
  /** `name(parameters) -> type`, on one line. */
  readonly signature: string;
}

function withNone(type: string): string {
  return type === 'Any' || type === 'None' || type.endsWith(' | None') ? type : `${type} | None`;
}

function schemaText(schema: JsonSchema): string {
  const text = typeof schema.description === 'string' ? schema.description : schema.title;
  return typeof text === 'string' ? text.trim() : '';
}

/** Works out a tool function's name-independent parts: parameters, types, defaults, signature. */
export function planPythonFunction(tool: ToolDescriptor, pythonName: string): PythonFunctionPlan {
  const inputSchema: JsonSchema = isRecord(tool.inputSchema) ? tool.inputSchema : {};
  const properties = isRecord(inputSchema.properties) ? inputSchema.properties : {};
  const required = new Set<string>();
  if (Array.isArray(inputSchema.required)) {
    for (const name of inputSchema.required) if (typeof name === 'string') required.add(name);
  }
  // The properties in schema order, then required names the schema does not list.
  const wireNames = Object.keys(properties);
  if (required.size > 0) {
    const listed = new Set(wireNames);
    for (const name of required) if (!listed.has(name)) wireNames.push(name);
  }
  const acceptsExtraArguments =
    inputSchema.additionalProperties === true ||
    isRecord(inputSchema.additionalProperties) ||
    isRecord(inputSchema.patternProperties);
  const pythonNames = assignPythonIdentifiers(wireNames, {
    kind: 'parameter',
    reserved: acceptsExtraArguments ? RESERVED_WITH_EXTRA_ARGUMENTS : RESERVED_PARAMETER_NAMES,
  });

  const requiredParameters: PythonParameter[] = [];
  const optionalParameters: PythonParameter[] = [];
  wireNames.forEach((wireName, index) => {
    const property = Object.hasOwn(properties, wireName) ? properties[wireName] : undefined;
    const schema: JsonSchema = isRecord(property) ? property : {};
    const type = pythonTypeOf(property ?? {});
    const shape = type.includes('dict') ? pythonShapeOf(schema) : type;
    const isRequired = required.has(wireName);
    const literal = !isRequired && 'default' in schema ? toPythonLiteral(schema.default) : undefined;
    // A default that is absent, null, not JSON or too long becomes None: not sent, so the tool applies its own.
    const defaultsToNone =
      !isRequired && (literal === undefined || literal === 'None' || literal.length > MAX_DEFAULT_LITERAL_LENGTH);
    const parameter: PythonParameter = {
      pythonName: pythonNames[index] ?? wireName,
      wireName,
      annotation: defaultsToNone ? withNone(type) : type,
      documentedType: type,
      defaultLiteral: isRequired ? undefined : defaultsToNone ? 'None' : literal,
      omittedWhenNone: defaultsToNone,
      description: schemaText(schema),
      shape: shape === type ? undefined : shape,
      unlistedEnumValues: Array.isArray(schema.enum) && !type.includes('Literal[') ? schema.enum : undefined,
    };
    (isRequired ? requiredParameters : optionalParameters).push(parameter);
  });

  const parameters = [...requiredParameters, ...optionalParameters];
  const returnType = tool.outputSchema === undefined ? 'Any' : pythonTypeOf(tool.outputSchema);
  const parameterTexts = renderParameterTexts(parameters, acceptsExtraArguments);
  return {
    pythonName,
    wireName: tool.name,
    description: typeof tool.description === 'string' ? tool.description : '',
    parameters,
    acceptsExtraArguments,
    returnType,
    outputSchema: tool.outputSchema,
    parameterTexts,
    // Joined, so the plan keeps one flat string rather than a tree of parts.
    signature: [pythonName, '(', parameterTexts.join(', '), ') -> ', returnType].join(''),
  };
}

function renderParameterTexts(parameters: readonly PythonParameter[], acceptsExtraArguments: boolean): string[] {
  const texts = parameters.map((parameter) =>
    parameter.defaultLiteral === undefined
      ? `${parameter.pythonName}: ${parameter.annotation}`
      : `${parameter.pythonName}: ${parameter.annotation} = ${parameter.defaultLiteral}`,
  );
  if (acceptsExtraArguments) texts.push(`**${EXTRA_ARGUMENTS_NAME}: Any`);
  return texts;
}

/** The `def` and `async def` lines: each on one line when it fits, else one parameter per line. */
function renderDefLines(plan: PythonFunctionPlan): { readonly sync: string; readonly async: string } {
  const sync = `def ${plan.signature}:`;
  const async = `async ${sync}`;
  if (async.length <= MAX_DEF_LINE_LENGTH) return { sync, async };
  const multiLine = `${plan.pythonName}(\n${plan.parameterTexts.map((text) => `${INDENT}${text},\n`).join('')}) -> ${plan.returnType}:`;
  return {
    sync: sync.length <= MAX_DEF_LINE_LENGTH ? sync : `def ${multiLine}`,
    async: `async def ${multiLine}`,
  };
}

/** The arguments of the helper call: `"wire", {always sent}, {sent unless None}, extra_arguments`. */
function renderCallArguments(plan: PythonFunctionPlan): string {
  let sent = '';
  let omittable = '';
  for (const parameter of plan.parameters) {
    const entry = `${pythonStringLiteral(parameter.wireName)}: ${parameter.pythonName}`;
    if (parameter.omittedWhenNone) omittable = omittable === '' ? entry : `${omittable}, ${entry}`;
    else sent = sent === '' ? entry : `${sent}, ${entry}`;
  }
  let text = `${pythonStringLiteral(plan.wireName)}, {${sent}}`;
  if (omittable !== '') text += `, {${omittable}}`;
  else if (plan.acceptsExtraArguments) text += ', None';
  return plan.acceptsExtraArguments ? `${text}, ${EXTRA_ARGUMENTS_NAME}` : text;
}

const TRAILING_WHITESPACE = /[ \t]+(?=\n|$)/g;
const NON_EMPTY_LINE_START = /\n(?=[^\n])/g;

/** Drops whitespace at the ends of lines (searching for it first: the regex alone is slow on long text). */
function trimLineEnds(text: string): string {
  const hasTrailing = text.includes(' \n') || text.includes('\t\n') || text.endsWith(' ') || text.endsWith('\t');
  return hasTrailing ? text.replace(TRAILING_WHITESPACE, '') : text;
}

/** Indents every non-empty line (trailing whitespace is left to {@link renderDocstring}). */
function indentBlock(text: string, indent: string): string {
  if (!text.includes('\n')) return text === '' ? '' : `${indent}${text}`;
  return `${text.startsWith('\n') || text === '' ? '' : indent}${text.replace(NON_EMPTY_LINE_START, `\n${indent}`)}`;
}

function formatEnumValues(values: readonly unknown[]): string {
  const shown = values.slice(0, MAX_LISTED_ENUM_VALUES).map((value) => toPythonLiteral(value) ?? String(value));
  const more = values.length - shown.length;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

function withNote(text: string, note: string): string {
  return text === '' ? note : `${text} ${note}`;
}

function renderParameterEntry(parameter: PythonParameter): string {
  const optional = parameter.defaultLiteral !== undefined;
  const head = `${parameter.pythonName} (${parameter.documentedType}${optional ? ', optional' : ''})`;
  // The notes, one space apart.
  let text = parameter.description;
  if (parameter.shape !== undefined) text = withNote(text, `Shape: ${parameter.shape}.`);
  if (parameter.unlistedEnumValues !== undefined) {
    text = withNote(text, `One of: ${formatEnumValues(parameter.unlistedEnumValues)}.`);
  }
  if (parameter.defaultLiteral !== undefined && parameter.defaultLiteral !== 'None') {
    text = withNote(text, `Defaults to ${parameter.defaultLiteral}.`);
  }
  if (parameter.wireName !== parameter.pythonName) {
    text = withNote(text, `Sent as ${pythonStringLiteral(parameter.wireName)}.`);
  }
  if (text === '') return head;
  if (!text.includes('\n')) return `${head}: ${text}`;
  const [first = '', ...rest] = text.split('\n');
  return [`${head}: ${first}`, ...rest.map((line) => `${INDENT}${line}`)].join('\n');
}

/** The docstring's text (unescaped, unindented): description, Args, Returns, Raises. */
export function renderDocstringText(plan: PythonFunctionPlan): string {
  const description = plan.description.trim();
  const sections = [description === '' ? `Calls the tool ${pythonStringLiteral(plan.wireName)}.` : description];
  if (plan.parameters.length > 0 || plan.acceptsExtraArguments) {
    const entries = plan.parameters.map(renderParameterEntry);
    if (plan.acceptsExtraArguments) entries.push(`**${EXTRA_ARGUMENTS_NAME}: More arguments, sent as given.`);
    sections.push(`Args:\n${entries.map((entry) => indentBlock(entry, INDENT)).join('\n')}`);
  }
  const returns =
    plan.outputSchema === undefined ? ['The tool result as a parsed JSON value.'] : [pythonShapeOf(plan.outputSchema)];
  const outputDescription = plan.outputSchema === undefined ? '' : schemaText(plan.outputSchema);
  if (outputDescription !== '') returns.push(outputDescription);
  sections.push(`Returns:\n${indentBlock(returns.join('\n'), INDENT)}`);
  sections.push(`Raises:\n${INDENT}ToolError: when the tool fails.`);
  return sections.join('\n\n');
}

/** A `"""docstring"""` block indented for a function body. */
export function renderDocstring(text: string, indent: string): string {
  const body = trimLineEnds(escapeDocstringText(text)).replace(NON_EMPTY_LINE_START, `\n${indent}`);
  return `${indent}"""${body}\n${indent}"""`;
}

/** The two renderings of one tool function. */
export interface RenderedPythonFunction {
  /** `def name(...)` calling `_call`. */
  readonly sync: string;
  /** `async def name(...)` awaiting `_acall`, for the `aio` module. */
  readonly async: string;
}

/**
 * The source of one tool function, sync and async: `def` line, docstring, and a body that is a single call of the
 * module's helper (`_call`, or `await _acall`) with the arguments keyed by their original property names.
 */
export function renderPythonFunction(plan: PythonFunctionPlan): RenderedPythonFunction {
  const docstring = renderDocstring(renderDocstringText(plan), INDENT);
  const callArguments = renderCallArguments(plan);
  const defLines = renderDefLines(plan);
  // Joined rather than concatenated: a flat string made now, while its parts are fresh, is cheaper to keep and to
  // copy into the module than a tree of parts spread over the heap.
  return {
    sync: [defLines.sync, docstring, `${INDENT}return ${SYNC_CALL_HELPER}(${callArguments})`].join('\n'),
    async: [defLines.async, docstring, `${INDENT}return await ${ASYNC_CALL_HELPER}(${callArguments})`].join('\n'),
  };
}
