import type { ExecuteCodeInput, ExecuteCodeInputSchema } from '../codegen/execute-code-description.js';
import { executeCodeInputSchema } from '../codegen/execute-code-description.js';
import type { Codecall } from '../engine/codecall.js';

/** What an adapter needs from a codecall: the tool's definition and sessions. */
export type AdapterHost = Pick<Codecall, 'toolDefinition' | 'session'>;

/** What the adapters add to the description: state persists within a conversation. */
export const CONVERSATION_STATE_NOTE =
  ' Variables, imports and functions persist between calls of this tool in the same conversation, like notebook ' +
  'cells.';

/** `execute_code` as the adapters hand it to an SDK: name, description, and a fresh copy of the input schema. */
export interface AdapterToolDefinition {
  readonly name: string;
  readonly description: string;
  /** A mutable copy (SDKs may add to it). */
  readonly inputSchema: ExecuteCodeInputSchema;
}

/** The `execute_code` definition of a codecall, its description saying that state persists per conversation. */
export async function adapterToolDefinition(host: AdapterHost): Promise<AdapterToolDefinition> {
  const definition = await host.toolDefinition();
  return {
    name: definition.name,
    description: definition.description + CONVERSATION_STATE_NOTE,
    inputSchema: structuredClone(executeCodeInputSchema) as ExecuteCodeInputSchema,
  };
}

/**
 * Checks the arguments a model sent to `execute_code`: the script, or the sentence telling the model what was wrong
 * (a model's mistake goes back to the model as the tool's result, it is not thrown).
 */
export function parseExecuteCodeInput(toolName: string, input: unknown): ExecuteCodeInput | string {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return `${toolName} takes an object {"code": "<Python script>"}, got ${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}`;
  }
  const code = (input as { code?: unknown }).code;
  if (typeof code !== 'string') {
    return `${toolName}: argument 'code' must be a string holding the Python script to run (got ${code === undefined ? 'nothing' : typeof code})`;
  }
  return { code };
}

/** {@link parseExecuteCodeInput} for arguments that arrive as JSON text (OpenAI's function calls). */
export function parseExecuteCodeArgumentsJson(toolName: string, text: string): ExecuteCodeInput | string {
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch {
    return `${toolName}: the arguments are not valid JSON; send {"code": "<Python script>"}`;
  }
  return parseExecuteCodeInput(toolName, input);
}
