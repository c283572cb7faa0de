import { type DatabaseConfig, parseDatabases } from '../../src/databases/database-config.js';
import { createDatabaseToolSource } from '../../src/databases/database-tool-source.js';
import type { QueryResult, TableDescription, TableEntry } from '../../src/databases/query-result.js';
import type { ToolSource } from '../../src/tools/registered-tool.js';
import type { ToolContext } from '../../src/tools/types.js';

/** A database's tools called directly, as the tool-call server calls them (arguments checked first). */
export interface DatabaseTools {
  readonly source: ToolSource;
  query(sql: string, params?: unknown, signal?: AbortSignal): Promise<QueryResult>;
  tables(): Promise<TableEntry[]>;
  describe(table: string): Promise<TableDescription>;
  close(): Promise<void>;
}

/** Opens one database's tool source from its configuration, as `createCodecall({ databases })` would. */
export function openDatabaseTools(
  config: DatabaseConfig,
  options: { readonly name?: string; readonly baseDirectory?: string } = {},
): DatabaseTools {
  const name = options.name ?? 'db';
  const database = parseDatabases({ [name]: config }, { baseDirectory: options.baseDirectory ?? process.cwd() })[name];
  if (database === undefined) throw new Error('no database');
  const source = createDatabaseToolSource(database);
  const call = async (tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> => {
    const listing = await source.load();
    const registered = listing.tools.find((candidate) => candidate.descriptor.name === `${name}/${tool}`);
    if (registered === undefined) throw new Error(`no tool ${tool}`);
    const checked = await registered.checkArguments(args);
    if (!checked.ok) throw new Error(checked.message);
    const context: ToolContext = {
      signal: signal ?? new AbortController().signal,
      runId: 'test-run',
      toolName: `${name}/${tool}`,
      artifactsDir: '',
    };
    return registered.invoke(checked.value, context);
  };
  return {
    source,
    query: (sql, params, signal) =>
      call('query', params === undefined ? { sql } : { sql, params }, signal) as Promise<QueryResult>,
    tables: () => call('tables', {}) as Promise<TableEntry[]>,
    describe: (table) => call('describe', { table }) as Promise<TableDescription>,
    close: () => source.close(),
  };
}

/** Plain copies of result rows (they are objects without a prototype), for `toEqual`. */
export function plainRows(result: QueryResult): Record<string, unknown>[] {
  return result.rows.map((row) => ({ ...row }));
}
