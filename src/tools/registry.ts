import { CodecallError } from '../core/errors.js';
import { bufferedReadOf } from './buffered-read.js';
import { checkToolDefinition } from './define-tool.js';
import type { RegisteredTool } from './registered-tool.js';
import { normaliseInputSchema, normaliseOutputSchema } from './schema.js';
import type { Tool, ToolContext, ToolDescriptor } from './types.js';
import { createArgumentValidator } from './validation.js';

/** The tools of one codecall instance, looked up by wire name. */
export interface ToolRegistry {
  /** The tool with this wire name, or undefined (the caller answers "unknown tool"). */
  get(wireName: string): RegisteredTool | undefined;
  /** Every tool, in registration order. */
  list(): readonly RegisteredTool[];
  /** Number of tools. */
  readonly size: number;
}

/**
 * Prepares a tool for dispatch: checks the definition, normalises its schemas to JSON Schema once, and builds its
 * argument check (compiled lazily) and invoker. `invoke` expects arguments that passed `checkArguments` (pass the
 * check's `value`, which has defaults applied) and awaits `execute(args, context)`.
 *
 * @throws CodecallError('INVALID_TOOL') when the definition or a schema is unusable.
 */
export function registerTool(tool: Tool): RegisteredTool {
  checkToolDefinition(tool);
  const input = normaliseInputSchema(tool.name, tool.inputSchema);
  const output = tool.outputSchema === undefined ? undefined : normaliseOutputSchema(tool.name, tool.outputSchema);
  const descriptor: ToolDescriptor = Object.freeze({
    name: tool.name,
    description: tool.description,
    inputSchema: input.jsonSchema,
    outputSchema: output?.jsonSchema,
  });
  const checkArguments = createArgumentValidator({
    toolName: tool.name,
    inputSchema: tool.inputSchema,
    normalised: input,
  });
  // Captured now so later mutation of the definition object cannot change what runs.
  const execute = tool.execute;
  const needsApproval = approvalCheckOf(tool);
  return Object.freeze({
    descriptor,
    module: undefined,
    checkArguments,
    needsApproval,
    bufferedRead: bufferedReadOf(tool),
    invoke(args: unknown, context: ToolContext): Promise<unknown> {
      // Not an async function: on every call's hot path, that would add a promise and two ticks around the handler's.
      try {
        const result: unknown = execute.call(tool, args as Record<string, unknown>, context);
        return result instanceof Promise ? result : Promise.resolve(result);
      } catch (error) {
        return Promise.reject(error);
      }
    },
  });
}

/** The registered form of `needsApproval`: none when the tool never needs approval. */
function approvalCheckOf(tool: Tool): RegisteredTool['needsApproval'] {
  const { needsApproval } = tool;
  if (needsApproval === undefined || needsApproval === false) return undefined;
  if (needsApproval === true) return () => true;
  return (args) => needsApproval.call(tool, args as Record<string, unknown>);
}

/**
 * Indexes tools by wire name.
 *
 * @throws CodecallError('DUPLICATE_TOOL') when two tools share a wire name.
 */
export function createToolRegistry(tools: readonly RegisteredTool[]): ToolRegistry {
  const byName = new Map<string, RegisteredTool>();
  for (const tool of tools) {
    const name = tool.descriptor.name;
    const existing = byName.get(name);
    if (existing !== undefined) {
      throw new CodecallError(
        'DUPLICATE_TOOL',
        `two tools are named '${name}'${describeModules(existing, tool)}; wire names must be unique, so rename one of them`,
        { name, modules: [existing.module ?? null, tool.module ?? null] },
      );
    }
    byName.set(name, tool);
  }
  const list = Object.freeze([...byName.values()]);
  return Object.freeze({
    get: (wireName: string) => byName.get(wireName),
    list: () => list,
    size: byName.size,
  });
}

function describeModules(first: RegisteredTool, second: RegisteredTool): string {
  if (first.module === undefined && second.module === undefined) return '';
  const where = (tool: RegisteredTool): string => (tool.module === undefined ? 'the root module' : `'${tool.module}'`);
  return ` (in ${where(first)} and ${where(second)})`;
}
