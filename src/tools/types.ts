/** A JSON Schema object (any draft); codecall reads the common keywords and passes the rest through. */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * A Standard Schema value (https://standardschema.dev), e.g. a zod v4 schema. codecall validates with
 * `~standard.validate` and reads its JSON Schema from `~standard.jsonSchema` (zod >= 4.2).
 */
export interface StandardSchema<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (
      value: unknown,
    ) =>
      | { readonly value: Output; readonly issues?: undefined }
      | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<unknown> }> }
      | Promise<
          | { readonly value: Output; readonly issues?: undefined }
          | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<unknown> }> }
        >;
    readonly jsonSchema?: {
      readonly input: (options: { readonly target: string }) => Record<string, unknown>;
      readonly output?: (options: { readonly target: string }) => Record<string, unknown>;
    };
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

/** What a tool's `execute` receives besides its arguments. */
export interface ToolContext {
  /** Fires when the run ends, times out, is aborted, or the tool call times out. */
  readonly signal: AbortSignal;
  /** Id of the run that made the call. */
  readonly runId: string;
  /** Name of the tool being called (its wire name). */
  readonly toolName: string;
  /**
   * Directory where the call may save files (images, downloads) that should reach the caller as artifacts. Read it
   * while the call runs: first read after the call's run or session cell has ended, it throws (that folder is closed).
   */
  readonly artifactsDir: string;
}

/**
 * A function deciding from a call's validated arguments whether it needs approval. Declared through a method so it
 * is checked like `execute` (a tool with typed arguments still fits a list of tools).
 */
export type ApprovalCheck<Args> = {
  check(args: Args): boolean | Promise<boolean>;
}['check'];

/** A tool the script can call. `inputSchema` describes the keyword arguments of its Python function. */
export interface Tool<Args = Record<string, unknown>, Result = unknown> {
  /** Name on the wire and, sanitised, of the Python function: letters, digits, `_`, `-`, `.`; at most 128. */
  readonly name: string;
  /** What the tool does; becomes the Python docstring and part of the model-facing description. */
  readonly description: string;
  /** JSON Schema of the arguments object (type `object`), or a Standard Schema such as a zod object. */
  readonly inputSchema: JsonSchema | StandardSchema<unknown, Args>;
  /** Shape of the result, documented in the docstring. */
  readonly outputSchema?: JsonSchema | StandardSchema | undefined;
  /**
   * Whether a call must be approved by the codecall's `approveToolCall` hook before it runs: `true`, or a function of
   * the validated arguments (as the AI SDK names it). A call that needs approval and has no hook to ask is denied.
   */
  readonly needsApproval?: boolean | ApprovalCheck<Args> | undefined;
  /** Runs the tool on the host. The returned value must be JSON-serialisable. */
  execute(args: Args, context: ToolContext): Result | Promise<Result>;
}

/** A tool in the form codegen and the model-facing description need: JSON Schema only. */
export interface ToolDescriptor {
  /** Wire name (the name the host dispatches on). */
  readonly name: string;
  /** Description as given. */
  readonly description: string;
  /** Arguments as a JSON Schema object. */
  readonly inputSchema: JsonSchema;
  /** Result shape as a JSON Schema object, when known. */
  readonly outputSchema?: JsonSchema | undefined;
}

/** A group of tools that becomes a Python submodule (`from tools.<module> import fn`), e.g. one MCP server. */
export interface ToolModuleDescriptor {
  /** Python submodule name as configured (sanitised by codegen). */
  readonly name: string;
  /** Human description of the group (e.g. the MCP server's instructions). */
  readonly description?: string | undefined;
  /** One line about the group shown beside its functions (e.g. "SQLite database, read-only"). */
  readonly note?: string | undefined;
  /** Tools of the group. Wire names must be unique across all groups. */
  readonly tools: readonly ToolDescriptor[];
}
