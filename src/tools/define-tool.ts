import { CodecallError } from '../core/errors.js';
import { isPlainObject, isStandardSchema } from './schema.js';
import type { ApprovalCheck, JsonSchema, StandardSchema, Tool, ToolContext } from './types.js';
import { describeKind } from './value-description.js';

/** Valid wire names: letters, digits, `_`, `-` and `.`, 1 to 128 characters. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * The arguments `execute` receives for an input schema: the Standard Schema's output type (after defaults and
 * transforms, e.g. `z.infer` of a zod object), or `Record<string, unknown>` for a plain JSON Schema.
 */
export type InferToolArguments<Schema> = Schema extends { readonly '~standard': { readonly types?: infer Types } }
  ? NonNullable<Types> extends { readonly output: infer Output }
    ? Output
    : Record<string, unknown>
  : Record<string, unknown>;

/** What `defineTool` accepts: a {@link Tool} whose `execute` is typed from its input schema. */
export interface ToolDefinition<Schema extends JsonSchema | StandardSchema, Result> {
  /** Wire name: letters, digits, `_`, `-`, `.`; at most 128. */
  readonly name: string;
  /** What the tool does; becomes the Python docstring. */
  readonly description: string;
  /** JSON Schema of the arguments object (type `object`), or a Standard Schema such as a zod object. */
  readonly inputSchema: Schema;
  /** Shape of the result, documented in the docstring. */
  readonly outputSchema?: JsonSchema | StandardSchema | undefined;
  /**
   * Whether a call must be approved by the codecall's `approveToolCall` hook before it runs: `true`, or a function of
   * the validated arguments. A call that needs approval and has no hook to ask is denied.
   */
  readonly needsApproval?: boolean | ApprovalCheck<InferToolArguments<Schema>> | undefined;
  /** Runs the tool on the host with validated arguments. The returned value must be JSON-serialisable. */
  execute(args: InferToolArguments<Schema>, context: ToolContext): Result | Promise<Result>;
}

/**
 * Defines a tool, checking it at once so a bad definition fails where it is written rather than at the first run.
 * With a zod (Standard Schema) `inputSchema`, `execute` receives the schema's inferred type.
 *
 * @throws CodecallError('INVALID_TOOL') naming the tool and what is wrong with it.
 */
export function defineTool<Schema extends JsonSchema | StandardSchema, Result = unknown>(
  tool: ToolDefinition<Schema, Result>,
): Tool<InferToolArguments<Schema>, Result> {
  checkToolDefinition(tool);
  return tool as unknown as Tool<InferToolArguments<Schema>, Result>;
}

/**
 * Checks the shape of a tool definition (name, description, schemas, execute) without converting its schemas.
 *
 * @throws CodecallError('INVALID_TOOL') naming the tool and the problem.
 */
export function checkToolDefinition(tool: unknown): asserts tool is Tool {
  if (typeof tool !== 'object' || tool === null) {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool: expected an object with name, description, inputSchema and execute (got ${describeKind(tool)})`,
      { problem: 'not an object' },
    );
  }
  const { name, description, inputSchema, outputSchema, execute, needsApproval } = tool as Record<string, unknown>;
  if (typeof name !== 'string') {
    throw new CodecallError('INVALID_TOOL', `invalid tool: name must be a string (got ${describeKind(name)})`, {
      field: 'name',
      problem: 'not a string',
    });
  }
  if (!TOOL_NAME_PATTERN.test(name)) {
    throw new CodecallError(
      'INVALID_TOOL',
      `invalid tool name ${JSON.stringify(name)}: use 1 to 128 letters, digits, '_', '-' or '.' ` +
        '(it is the wire name and, made valid, the Python function name)',
      { tool: name, field: 'name', problem: 'invalid characters or length' },
    );
  }
  if (typeof description !== 'string') {
    throw invalidField(name, 'description', `must be a string (got ${describeKind(description)})`);
  }
  // A Standard Schema's type is checked when it is converted at registration; a JSON Schema's is checked here.
  if (!isStandardSchema(inputSchema)) {
    if (!isPlainObject(inputSchema)) {
      throw invalidField(
        name,
        'inputSchema',
        'must be a JSON Schema object with "type": "object" or a Standard Schema such as a zod object ' +
          `(got ${describeKind(inputSchema)})`,
      );
    }
    if (inputSchema.type !== 'object') {
      throw invalidField(
        name,
        'inputSchema',
        'must describe an object of named arguments ("type": "object"), but its type is ' +
          `${inputSchema.type === undefined ? 'missing' : JSON.stringify(inputSchema.type)}`,
      );
    }
  }
  if (outputSchema !== undefined && !isStandardSchema(outputSchema) && !isPlainObject(outputSchema)) {
    throw invalidField(
      name,
      'outputSchema',
      `must be a JSON Schema object or a Standard Schema when given (got ${describeKind(outputSchema)})`,
    );
  }
  if (typeof execute !== 'function') {
    throw invalidField(name, 'execute', `must be a function (got ${describeKind(execute)})`);
  }
  if (needsApproval !== undefined && typeof needsApproval !== 'boolean' && typeof needsApproval !== 'function') {
    throw invalidField(
      name,
      'needsApproval',
      `must be true, false or a function of the arguments (got ${describeKind(needsApproval)})`,
    );
  }
}

function invalidField(toolName: string, field: string, problem: string): CodecallError {
  return new CodecallError('INVALID_TOOL', `invalid tool '${toolName}': ${field} ${problem}`, {
    tool: toolName,
    field,
    problem,
  });
}
