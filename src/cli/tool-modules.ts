import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CodecallError } from '../core/errors.js';
import { filePromises } from '../core/file-promises.js';
import { importModule } from '../core/module-import.js';
import { checkToolDefinition } from '../tools/define-tool.js';
import type { Tool } from '../tools/types.js';

/** Options of {@link loadToolModules}. */
export interface LoadToolModulesOptions {
  /** The configuration file that names the modules (for messages). */
  readonly file: string;
  /** Folder the module paths are relative to (the configuration file's). */
  readonly baseDirectory: string;
}

/** Where a tool was found, for the duplicate-name error. */
interface ToolOrigin {
  readonly path: string;
  readonly exportName: string;
}

/**
 * Loads the `toolModules` of a configuration file: JavaScript modules (`.js`, `.mjs`, `.cjs`) whose default export,
 * or else every named export, is a tool made with `defineTool` or an array of them. Returns the tools in the order
 * found; the same tool object exported twice counts once.
 * @throws CodecallError `INVALID_CONFIG` for a bad list, a missing file, a module that fails to load, an export that
 *   is not a tool, a module without tools; `DUPLICATE_TOOL` when two tools share a name.
 */
export async function loadToolModules(value: unknown, options: LoadToolModulesOptions): Promise<Tool[]> {
  const { file } = options;
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item !== '')) {
    throw new CodecallError(
      'INVALID_CONFIG',
      `${file}: "toolModules" must be a list of paths of JavaScript modules, got ${JSON.stringify(value)}`,
      { file, key: 'toolModules' },
    );
  }
  const tools: Tool[] = [];
  const origins = new Map<string, ToolOrigin>();
  for (const path of value as string[]) {
    for (const { tool, exportName } of await loadModule(path, options)) {
      if (tools.includes(tool)) continue;
      const earlier = origins.get(tool.name);
      if (earlier !== undefined) {
        throw new CodecallError(
          'DUPLICATE_TOOL',
          `${file}: two tools are named "${tool.name}": export "${earlier.exportName}" of ${earlier.path} and ` +
            `export "${exportName}" of ${path}; tool names must be unique, so rename one of them`,
          { file, name: tool.name, modules: [earlier.path, path] },
        );
      }
      origins.set(tool.name, { path, exportName });
      tools.push(tool);
    }
  }
  return tools;
}

async function loadModule(
  path: string,
  options: LoadToolModulesOptions,
): Promise<{ tool: Tool; exportName: string }[]> {
  const { file } = options;
  const absolute = resolve(options.baseDirectory, path);
  const fail = (problem: string, details: Record<string, unknown> = {}): CodecallError =>
    new CodecallError('INVALID_CONFIG', `${file}: tool module ${path} ${problem}`, {
      file,
      key: 'toolModules',
      module: path,
      ...details,
    });
  try {
    if (!(await filePromises().stat(absolute)).isFile()) throw fail(`is not a file (${absolute})`);
  } catch (error) {
    if (error instanceof CodecallError) throw error;
    throw fail(`was not found (looked for ${absolute})`);
  }
  let namespace: Record<string, unknown>;
  try {
    namespace = await importModule<Record<string, unknown>>(pathToFileURL(absolute).href);
  } catch (error) {
    throw fail(`failed to load: ${error instanceof Error ? error.message : String(error)}`);
  }
  const exported =
    namespace.default !== undefined
      ? [['default', namespace.default] as const]
      : Object.entries(namespace).filter(([name]) => name !== 'default');
  const found: { tool: Tool; exportName: string }[] = [];
  for (const [exportName, value] of exported) {
    const candidates = Array.isArray(value) ? value : [value];
    candidates.forEach((candidate, index) => {
      const label = Array.isArray(value) ? `${exportName}[${index}]` : exportName;
      try {
        checkToolDefinition(candidate);
      } catch (error) {
        throw fail(
          `exports "${label}", which is not a tool made with defineTool or an array of them: ` +
            `${error instanceof Error ? error.message : String(error)}`,
          { export: label },
        );
      }
      found.push({ tool: candidate as Tool, exportName: label });
    });
  }
  if (found.length === 0) {
    throw fail('exports no tools: export defineTool(...) values (or an array of them) as default or by name');
  }
  return found;
}
