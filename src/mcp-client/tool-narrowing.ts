import { CodecallError } from '../core/errors.js';
import type { ToolSourceNarrowing } from '../tools/registered-tool.js';
import type { McpServerConfig } from './server-config.js';

/** What narrowing reads of a server's tool. */
export interface NarrowableTool {
  readonly name: string;
  readonly annotations?: { readonly readOnlyHint?: boolean | undefined } | undefined;
}

/** The tools that remain, and how many were left out by which rules (undefined when nothing narrows the server). */
export interface NarrowedTools<Tool extends NarrowableTool> {
  readonly tools: Tool[];
  readonly narrowing: ToolSourceNarrowing | undefined;
}

/**
 * Applies a server's `allowedTools`, `disabledTools` and `readOnly` to the tools it lists: a tool remains when it is
 * allowed (every tool when there is no `allowedTools`), not disabled, and, with `readOnly`, annotated
 * `readOnlyHint: true` (a tool without the annotation counts as one that may write).
 * @throws CodecallError `INVALID_CONFIG` when `allowedTools` or `disabledTools` names a tool the server does not
 *   list: a typo would otherwise leave a tool meant to be turned off in place, or silently drop one.
 */
export function narrowTools<Tool extends NarrowableTool>(
  serverName: string,
  tools: readonly Tool[],
  config: Pick<McpServerConfig, 'allowedTools' | 'disabledTools' | 'readOnly'>,
): NarrowedTools<Tool> {
  const { allowedTools, disabledTools, readOnly } = config;
  if (allowedTools === undefined && disabledTools === undefined && readOnly !== true) {
    return { tools: [...tools], narrowing: undefined };
  }
  const names = new Set(tools.map((tool) => tool.name));
  for (const [key, list] of [
    ['allowedTools', allowedTools],
    ['disabledTools', disabledTools],
  ] as const) {
    const unknown = (list ?? []).filter((name) => !names.has(name));
    if (unknown.length > 0) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `MCP server "${serverName}": ${key} names ${unknown.map((name) => `"${name}"`).join(', ')}, which the ` +
          `server does not offer; its tools are: ${[...names].join(', ') || '(none)'}`,
        { server: serverName, key, unknown, tools: [...names] },
      );
    }
  }
  const allowed = allowedTools === undefined ? undefined : new Set(allowedTools);
  const disabled = new Set(disabledTools ?? []);
  const kept = tools.filter(
    (tool) =>
      (allowed === undefined || allowed.has(tool.name)) &&
      !disabled.has(tool.name) &&
      (readOnly !== true || tool.annotations?.readOnlyHint === true),
  );
  const keptNames = new Set(kept.map((tool) => tool.name));
  return {
    tools: kept,
    narrowing: {
      total: tools.length,
      leftOut: tools.filter((tool) => !keptNames.has(tool.name)).map((tool) => tool.name),
      rules: [
        ...(allowedTools === undefined ? [] : ['allowedTools']),
        ...(disabledTools === undefined ? [] : ['disabledTools']),
        ...(readOnly === true ? ['readOnly'] : []),
      ],
    },
  };
}

/**
 * One line saying how a source was narrowed, e.g. "3 of the server's 9 tools (readOnly: only the tools it marks
 * read-only)".
 */
export function describeNarrowing(narrowing: ToolSourceNarrowing): string {
  const kept = narrowing.total - narrowing.leftOut.length;
  const rules = narrowing.rules.map((rule) =>
    rule === 'readOnly' ? 'readOnly: only the tools it marks read-only' : rule,
  );
  return `${kept} of the server's ${narrowing.total} tools (${rules.join(', ')})`;
}
