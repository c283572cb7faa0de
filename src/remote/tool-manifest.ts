import type { Limits } from '../core/limits.js';
import { nodeCrypto } from '../core/node-crypto.js';
import type { Prepared } from '../engine/codecall.js';
import type { RegisteredTool, ToolSource } from '../tools/registered-tool.js';
import type { Tool, ToolContext, ToolDescriptor, ToolModuleDescriptor } from '../tools/types.js';

/**
 * What a worker needs to run an agent's scripts: the tools as descriptors (no handlers: calls go back to the agent),
 * the module name, the agent's limits and its redaction setting. Stored in Redis under its hash, so a job carries 32
 * characters instead of every schema.
 */
export interface ToolManifest {
  readonly moduleName: string;
  readonly tools: readonly ToolDescriptor[];
  readonly modules: readonly ToolModuleDescriptor[];
  readonly limits: Limits;
  readonly redactSecrets: boolean;
}

/** The manifest of an agent's prepared tools. */
export function manifestOf(
  prepared: Prepared,
  settings: { moduleName: string; limits: Limits; redactSecrets: boolean },
): ToolManifest {
  return {
    moduleName: settings.moduleName,
    tools: prepared.toolModules.tools,
    modules: prepared.toolModules.modules,
    limits: settings.limits,
    redactSecrets: settings.redactSecrets,
  };
}

/** The manifest as stored, and its hash. */
export function encodeManifest(manifest: ToolManifest): { json: string; hash: string } {
  const json = JSON.stringify(manifest);
  return { json, hash: nodeCrypto().createHash('sha256').update(json).digest('hex').slice(0, 32) };
}

/** Sends one tool call of a script to its agent and resolves with the agent's answer (rejects with its error). */
export type ForwardToolCall = (context: ToolContext, tool: string, args: unknown) => Promise<unknown>;

/**
 * The root tools of a manifest as worker-side tools: the same names and schemas (the worker checks the arguments as
 * the agent will), and an `execute` that forwards the call.
 */
export function forwardingTools(manifest: ToolManifest, forward: ForwardToolCall): Tool[] {
  return manifest.tools.map((descriptor) => ({
    name: descriptor.name,
    description: descriptor.description,
    inputSchema: descriptor.inputSchema,
    outputSchema: descriptor.outputSchema,
    execute: (args: unknown, context: ToolContext) => forward(context, descriptor.name, args),
  }));
}

/**
 * The submodules of a manifest (an agent's MCP servers and databases) as tool sources of the worker: listed from the
 * manifest, every call forwarded; the agent checks the arguments against the source's own schema.
 */
export function forwardingSources(manifest: ToolManifest, forward: ForwardToolCall): ToolSource[] {
  return manifest.modules.map((module) => {
    const tools: RegisteredTool[] = module.tools.map((descriptor) => ({
      descriptor,
      module: module.name,
      checkArguments: (args: unknown) => ({ ok: true, value: args }),
      invoke: (args: unknown, context: ToolContext) => forward(context, descriptor.name, args),
    }));
    const listing = { description: module.description, note: module.note, tools };
    return {
      name: module.name,
      load: () => Promise.resolve(listing),
      status: () => ({ state: 'ready', toolCount: tools.length }),
      close: () => Promise.resolve(),
    };
  });
}
