import type { BufferedRead } from './buffered-read.js';
import type { ToolContext, ToolDescriptor } from './types.js';

/** Outcome of checking a call's arguments before the handler runs. */
export type ArgumentCheck =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly message: string };

/**
 * A tool as the engine dispatches it: a unique wire name, its JSON Schema descriptor, a validator and an invoker.
 * Built from `defineTool` tools, the built-in tools, and upstream MCP servers' tools.
 */
export interface RegisteredTool {
  /** Wire name, schemas and description (what codegen and the model-facing description read). */
  readonly descriptor: ToolDescriptor;
  /** Python submodule the tool lives in (`tools.<module>`); undefined for the root module. */
  readonly module?: string | undefined;
  /**
   * Checks arguments before the call; a failure reaches the script as a ToolError and the handler is not called.
   * The message names the tool and the bad field, e.g. `add: argument 'a' must be number (got "x")`.
   */
  checkArguments(args: unknown): ArgumentCheck | Promise<ArgumentCheck>;
  /**
   * Whether this call must be approved before it runs (given the checked arguments); absent when the tool never
   * needs approval.
   */
  readonly needsApproval?: ((args: unknown) => boolean | Promise<boolean>) | undefined;
  /** Runs the tool with checked arguments; a throw becomes a ToolError with the error's message. */
  invoke(args: unknown, context: ToolContext): Promise<unknown>;
  /**
   * What `invoke` does, reading into a buffer the tool-call server lends (built-in tools only; see `BufferedRead`).
   * Only the server calls it.
   */
  readonly bufferedRead?: BufferedRead | undefined;
}

/** A group of tools loaded on demand (e.g. one upstream MCP server), exposed as the submodule `tools.<name>`. */
export interface ToolSource {
  /** Submodule name as configured (codegen sanitises it). */
  readonly name: string;
  /**
   * Connects if needed and lists the tools. Called before runs that need the module; must be cheap when already
   * loaded. Wire names must be prefixed with `<name>/` so they are unique across sources.
   */
  load(): Promise<ToolSourceListing>;
  /** Status for `doctor` and the tool description: loaded, failed (with the error message), or not yet tried. */
  status(): ToolSourceStatus;
  /** Closes connections and child processes. */
  close(): Promise<void>;
}

/** What a tool source offers. */
export interface ToolSourceListing {
  /** Description of the group (e.g. an MCP server's instructions), shown in the module docstring. */
  readonly description?: string | undefined;
  /**
   * One line about the group for the model-facing description and the module docstring, e.g. "SQLite database,
   * read-only" or "3 of 9 tools: read-only ones only".
   */
  readonly note?: string | undefined;
  readonly tools: readonly RegisteredTool[];
}

/** Health of a tool source. */
export type ToolSourceStatus =
  | { readonly state: 'idle' }
  | { readonly state: 'ready'; readonly toolCount: number; readonly narrowing?: ToolSourceNarrowing | undefined }
  | { readonly state: 'failed'; readonly error: string };

/** How the configuration narrowed a source's tools (an MCP server's `allowedTools`, `disabledTools`, `readOnly`). */
export interface ToolSourceNarrowing {
  /** Tools the source offers before narrowing. */
  readonly total: number;
  /** Names of the tools left out, as the source names them. */
  readonly leftOut: readonly string[];
  /** The rules that applied, e.g. `["readOnly"]` or `["allowedTools", "disabledTools"]`. */
  readonly rules: readonly string[];
}
