import { CodecallError } from '../core/errors.js';
import type { RegisteredTool, ToolSource, ToolSourceListing, ToolSourceStatus } from '../tools/registered-tool.js';
import { normaliseInputSchema, normaliseOutputSchema } from '../tools/schema.js';
import type { JsonSchema, ToolContext, ToolDescriptor } from '../tools/types.js';
import { createArgumentValidator } from '../tools/validation.js';
import type { ResolvedDatabase } from './database-config.js';
import { DATABASE_DRIVERS, scrubSecrets } from './database-config.js';
import type { DatabaseConnection } from './database-connection.js';
import { formatDuration } from './database-connection.js';
import { errorMessage } from './query-result.js';

/** Names of a database's tools, in the order they are listed. */
export const DATABASE_TOOL_NAMES = ['query', 'tables', 'describe'] as const;

/**
 * A database as a {@link ToolSource}: the submodule `tools.<name>` with `query(sql, params=None)`, `tables()` and
 * `describe(table)`, wire names `<name>/query` and so on. The driver is loaded on the first `load()`, the database
 * is opened on the first call; close() ends its connections (or its SQLite worker).
 */
export function createDatabaseToolSource(database: ResolvedDatabase): ToolSource {
  return new DatabaseToolSource(database);
}

class DatabaseToolSource implements ToolSource {
  readonly name: string;
  readonly #database: ResolvedDatabase;
  #connection: Promise<DatabaseConnection> | undefined;
  #listing: ToolSourceListing | undefined;
  #status: ToolSourceStatus = { state: 'idle' };
  #closed = false;

  constructor(database: ResolvedDatabase) {
    this.name = database.name;
    this.#database = database;
  }

  async load(): Promise<ToolSourceListing> {
    this.#assertOpen();
    if (this.#listing !== undefined) return this.#listing;
    try {
      await this.#open();
    } catch (error) {
      this.#status = { state: 'failed', error: this.#scrub(errorMessage(error)) };
      throw error;
    }
    const listing: ToolSourceListing = {
      description: describeModule(this.#database),
      note: noteOf(this.#database),
      tools: this.#registerTools(),
    };
    this.#listing = listing;
    this.#status = { state: 'ready', toolCount: listing.tools.length };
    return listing;
  }

  status(): ToolSourceStatus {
    return this.#status;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connection = this.#connection;
    this.#connection = undefined;
    if (connection !== undefined) await (await connection.catch(() => undefined))?.close();
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new CodecallError('CLOSED', `database "${this.name}": its tool source was closed`, { database: this.name });
    }
  }

  /** The connection, made once; loading the driver module is what can fail here (a missing package). */
  #open(): Promise<DatabaseConnection> {
    const database = this.#database;
    this.#connection ??= (
      database.kind === 'sqlite'
        ? import('./sqlite-database.js').then((module) => module.openSqliteDatabase(database))
        : import('./postgres-database.js').then((module) => module.openPostgresDatabase(database))
    ).catch((error: unknown) => {
      this.#connection = undefined;
      throw error;
    });
    return this.#connection;
  }

  #registerTools(): RegisteredTool[] {
    const database = this.#database;
    const run =
      <Result>(tool: string, action: (connection: DatabaseConnection, signal: AbortSignal) => Promise<Result>) =>
      async (_args: unknown, context: ToolContext): Promise<Result> => {
        this.#assertOpen();
        try {
          return await action(await this.#open(), context.signal);
        } catch (error) {
          if (context.signal.aborted) throw error;
          // A fresh error: the driver's own (and its cause) may quote the connection string.
          throw new Error(this.#scrub(`${this.name}.${tool}: ${errorMessage(error)}`));
        }
      };
    const definitions: readonly {
      readonly tool: (typeof DATABASE_TOOL_NAMES)[number];
      readonly description: string;
      readonly inputSchema: JsonSchema;
      readonly outputSchema: JsonSchema;
      readonly invoke: (args: Record<string, unknown>, context: ToolContext) => Promise<unknown>;
    }[] = [
      {
        tool: 'query',
        description: describeQuery(database),
        inputSchema: QUERY_INPUT[database.kind],
        outputSchema: QUERY_OUTPUT,
        invoke: (args, context) =>
          run('query', (connection, signal) =>
            connection.query({ sql: args.sql as string, params: args.params, maxRows: database.maxRows }, signal),
          )(args, context),
      },
      {
        tool: 'tables',
        description:
          'Lists the tables and views of the database. System ones are left out; sorted by schema and name: ' +
          `[{"schema": ${database.kind === 'sqlite' ? '"main"' : '"public"'}, "name": "orders", "type": "table"}, ...]. ` +
          'type is "table", "view", "materialized view" or "foreign table".',
        inputSchema: { type: 'object', properties: {}, additionalProperties: false },
        outputSchema: TABLES_OUTPUT,
        invoke: (args, context) => run('tables', (connection, signal) => connection.tables(signal))(args, context),
      },
      {
        tool: 'describe',
        description:
          'Describes the columns of a table or view. Returns {"table": name, "columns": [{"name", "type", ' +
          '"nullable", "default", "primaryKey"}]}; "default" is the default expression as SQL text, or None.' +
          (database.kind === 'postgres' ? ' Name a table outside the search path as "schema.table".' : ''),
        inputSchema: {
          type: 'object',
          properties: { table: { type: 'string', minLength: 1, description: 'Name of the table or view.' } },
          required: ['table'],
          additionalProperties: false,
        },
        outputSchema: DESCRIBE_OUTPUT,
        invoke: (args, context) =>
          run('describe', (connection, signal) => connection.describe(args.table as string, signal))(args, context),
      },
    ];
    return definitions.map((definition) => {
      const wireName = `${this.name}/${definition.tool}`;
      const input = normaliseInputSchema(wireName, definition.inputSchema);
      const descriptor: ToolDescriptor = {
        name: wireName,
        description: definition.description,
        inputSchema: input.jsonSchema,
        outputSchema: normaliseOutputSchema(wireName, definition.outputSchema).jsonSchema,
      };
      return {
        descriptor,
        module: this.name,
        checkArguments: createArgumentValidator({
          toolName: wireName,
          inputSchema: input.jsonSchema,
          normalised: input,
        }),
        invoke: (args: unknown, context: ToolContext) => definition.invoke(args as Record<string, unknown>, context),
      };
    });
  }

  #scrub(text: string): string {
    return this.#database.kind === 'postgres' ? scrubSecrets(text, this.#database.secrets) : text;
  }
}

const PARAMS_DESCRIPTION = {
  sqlite:
    'Values bound to the placeholders: a list for ? (in order), or a dict for :name. Values: str, int, float, ' +
    'bool, None, or {"base64": "..."} for a BLOB.',
  postgres:
    'Values bound to $1, $2, ... (a list, in order). Values: str, int, float, bool, None, a list (a PostgreSQL ' +
    'array, e.g. for "id = ANY($1)"), a dict (sent as JSON text), or {"base64": "..."} for bytea.',
} as const;

const QUERY_INPUT: Readonly<Record<ResolvedDatabase['kind'], JsonSchema>> = {
  sqlite: queryInput('sqlite'),
  postgres: queryInput('postgres'),
};

function queryInput(kind: ResolvedDatabase['kind']): JsonSchema {
  return {
    type: 'object',
    properties: {
      sql: {
        type: 'string',
        minLength: 1,
        description: `One SQL statement (${DATABASE_DRIVERS[kind].engine} dialect).`,
      },
      params: {
        type: kind === 'sqlite' ? ['array', 'object', 'null'] : ['array', 'null'],
        default: null,
        description: PARAMS_DESCRIPTION[kind],
      },
    },
    required: ['sql'],
    additionalProperties: false,
  };
}

const QUERY_OUTPUT: JsonSchema = {
  type: 'object',
  properties: {
    columns: { type: 'array', items: { type: 'string' } },
    rows: { type: 'array', items: { type: 'object' } },
    rowCount: { type: 'integer' },
    truncated: { type: 'boolean' },
  },
};

const TABLES_OUTPUT: JsonSchema = {
  type: 'array',
  items: {
    type: 'object',
    properties: { schema: { type: 'string' }, name: { type: 'string' }, type: { type: 'string' } },
  },
};

const DESCRIBE_OUTPUT: JsonSchema = {
  type: 'object',
  properties: {
    table: { type: 'string' },
    columns: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          type: { type: 'string' },
          nullable: { type: 'boolean' },
          default: { type: ['string', 'null'] },
          primaryKey: { type: 'boolean' },
        },
      },
    },
  },
};

function formatCount(count: number): string {
  return String(count).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function accessOf(database: ResolvedDatabase): string {
  return database.readOnly ? 'read-only' : 'read-write';
}

function describeQuery(database: ResolvedDatabase): string {
  const engine = DATABASE_DRIVERS[database.kind].engine;
  const access = database.readOnly
    ? 'The database is read-only: a statement that would write is refused with a ToolError.'
    : 'The database is writable: each statement is committed on its own.';
  const values =
    database.kind === 'sqlite'
      ? 'Values: INTEGER → int, REAL → float (a whole one may come as int), TEXT → str, BLOB → {"base64": "..."}, NULL → None (SQLite has no date ' +
        'type: dates stored as text stay str).'
      : 'Values: integer types → int (bigint beyond 2**53 → str), real/double → float (a whole one may come as int), ' +
        'numeric/decimal → str with ' +
        'every digit (Decimal(value) or float(value)), date → "YYYY-MM-DD", timestamp/timestamptz → ISO str ' +
        '(datetime.fromisoformat), bytea → {"base64": "..."}, json → parsed, arrays → list, NULL → None, ' +
        'other types → their text.';
  return [
    `Runs one SQL statement (${engine} dialect) and returns its rows as dicts.`,
    'Returns {"columns": [names], "rows": [{column: value}, ...], "rowCount": n, "truncated": bool}.',
    `Bind values with placeholders and params instead of formatting them into the SQL. ${access}`,
    `At most ${formatCount(database.maxRows)} rows come back; "truncated" is true when there were more ` +
      '(aggregate in SQL, or page with LIMIT/OFFSET). A statement running longer than ' +
      `${formatDuration(database.statementTimeoutMs)} is stopped.`,
    values,
  ].join(' ');
}

function describeModule(database: ResolvedDatabase): string {
  return [
    database.kind === 'sqlite' ? `File: ${database.location}.` : `Server: ${database.location}.`,
    ...(database.description === undefined ? [] : [database.description.trim()]),
    "query(sql, params) runs one statement; tables() lists the tables; describe(table) lists a table's columns.",
  ].join('\n\n');
}

/** One line for the model-facing description: what the module is. */
function noteOf(database: ResolvedDatabase): string {
  const engine = DATABASE_DRIVERS[database.kind].engine;
  const summary = database.description?.trim().split('\n')[0];
  return `${engine} database, ${accessOf(database)}${summary === undefined ? '' : `: ${summary}`}`;
}
