import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { CodecallError } from '../core/errors.js';
import { filePromises } from '../core/file-promises.js';
import type { Limits } from '../core/limits.js';
import { type CodecallOptions, createLocalCodecall } from '../engine/codecall.js';
import { formatResultForModel } from '../engine/result/format-result.js';
import { createCodecall } from '../remote/create-codecall.js';
import { DEFAULT_QUEUE_NAME } from '../remote/fleet-protocol.js';
import { DEFAULT_WORKER_CONCURRENCY, startFleetWorker } from '../remote/fleet-worker.js';
import { CLI_DEFAULTS, loadConfigFile } from './config-file.js';
import { HTTP_TOKEN_ENVIRONMENT_VARIABLE, type HttpTokenSetting, readHttpToken } from './http-token.js';
import { liveRunView } from './live-run-view.js';
import { terminalJson, terminalText } from './terminal-output.js';

/** Exit status: the script succeeded. */
export const EXIT_SUCCESS = 0;
/** Exit status: the script failed (error, timeout, limit). */
export const EXIT_SCRIPT_FAILED = 1;
/** Exit status: bad usage or configuration. */
export const EXIT_BAD_CONFIGURATION = 2;

const USAGE = `usage: codecall <command> [options]

commands:
  run <script.py | ->   run a Python script with the tools; prints what the model would see
  stubs                 print the generated Python module
  doctor                show the interpreter, the isolation available, and the limits
  serve                 serve execute_code as an MCP server on stdio (--http for Streamable HTTP)
  trace <result.json>   write a run's result (run --json) as one self-contained HTML page (-o FILE)
  worker --redis URL    run scripts from a worker fleet's queue on Redis; their tool calls go back to the agents

options:
  --config FILE         configuration file (default: ./codecall.json when present)
  --workspace DIR       folder the built-in file tools work in, and the script starts in (default: the current
                        directory)
  --workspace-mount M   how the script sees the workspace: read-only (default) | copy | read-write | none
  --timeout SECONDS     wall-clock limit of the run
  --sandbox MODE        auto | bubblewrap | none
  --python COMMAND      Python interpreter (default: python3)
  --json                run: print the whole result object as JSON
  -o, --output FILE     trace: the HTML file to write (default: standard output)
  --http PORT           serve: Streamable HTTP on 127.0.0.1:PORT instead of stdio; every request needs
                        "Authorization: Bearer <token>" (a random token is printed at start unless configured)
  --http unix:PATH      serve: Streamable HTTP on a Unix socket only this user can connect to (mode 0600)
  --host ADDRESS        serve: address to listen on with --http PORT (default 127.0.0.1)
  --token-file FILE     serve: the bearer token, from a file only this user can read (or set ${HTTP_TOKEN_ENVIRONMENT_VARIABLE})
  --allow-host NAME     serve: a further name accepted in Host and Origin (e.g. a proxy's); repeatable
  --allow-unsandboxed   serve, worker: run scripts without a sandbox when bubblewrap is not usable (sandbox
                        "auto"); without it they refuse to start there
  --redis URL           worker: the Redis (or Valkey) holding the queue, e.g. redis://queue.internal:6379
  --queue NAME          worker: the queue to take runs from (default ${DEFAULT_QUEUE_NAME})
  --concurrency N       worker: runs at once (default ${DEFAULT_WORKER_CONCURRENCY})
  --pool N              worker: interpreters kept started ahead of runs (default: the configuration's pool)
  --import MODULE       doctor: import MODULE inside the sandbox and say why it fails; repeatable or comma-separated
                        (default: the notable packages found)
  -h, --help            show this help
`;

/** The streams the command line reads and writes: the process's own in the `codecall` binary, any in tests. */
export interface CommandLineStreams {
  /** Where `run -` reads the script from, and `serve` its MCP messages. */
  readonly stdin: Readable;
  /** Where results, `stubs`, `doctor` and `serve`'s MCP messages go. */
  readonly stdout: Writable;
  /** Where errors and notices go. */
  readonly stderr: Writable;
}

class UsageError extends Error {}

/** The text of the file at `path`, or of the standard input for `-` (the only case where the input is read). */
async function readScript(path: string, streams: CommandLineStreams): Promise<string> {
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of streams.stdin)
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    // At once, as the configuration file (see config-file.ts): a script is read before its run's launch.
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `cannot read script ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

function parseTimeout(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(text.trim());
  if (!match) throw new UsageError(`--timeout takes seconds (e.g. 30, 2.5 or 500ms), got "${text}"`);
  const value = Number(match[1]);
  const milliseconds = match[2] === 'ms' ? value : value * 1000;
  if (milliseconds < 1) throw new UsageError(`--timeout must be positive, got "${text}"`);
  return Math.round(milliseconds);
}

/** Prefix of `--http` values naming a Unix socket. */
const UNIX_SOCKET_PREFIX = 'unix:';

/** Where `--http` listens: a TCP port, or a Unix socket. */
type HttpAddress = { readonly port: number } | { readonly socketPath: string };

function parseHttpAddress(text: string): HttpAddress {
  if (text.startsWith(UNIX_SOCKET_PREFIX)) {
    const socketPath = text.slice(UNIX_SOCKET_PREFIX.length);
    if (socketPath === '') throw new UsageError('--http unix:PATH needs the path of the socket to create');
    return { socketPath };
  }
  const port = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--http takes a port number from 0 to 65535 or unix:PATH, got "${text}"`);
  }
  return { port };
}

/** Options of `serve` beyond the codecall's own. */
interface ServeCommandOptions {
  readonly http: string | undefined;
  readonly host: string | undefined;
  readonly tokenFile: string | undefined;
  readonly allowedHosts: readonly string[] | undefined;
  /** Serve even when `sandbox: "auto"` finds no usable bubblewrap and would run scripts without a sandbox. */
  readonly allowUnsandboxed: boolean;
}

/**
 * The process's own streams, its standard input made when first read (`run -`, `serve`): Node makes a file's or
 * /dev/null's a file stream, whose modules (the promise file API among them) a run would otherwise load before its
 * launch for nothing.
 */
function processStreams(): CommandLineStreams {
  return {
    get stdin() {
      return process.stdin;
    },
    stdout: process.stdout,
    stderr: process.stderr,
  };
}

/**
 * Runs the command line with the given streams (the process's own by default); resolves with the exit status and
 * never rejects: an unexpected failure is reported on `stderr` as an internal error with status
 * {@link EXIT_SCRIPT_FAILED}.
 */
export async function main(argv: readonly string[], streams: CommandLineStreams = processStreams()): Promise<number> {
  try {
    return await runCommandLine(argv, streams);
  } catch (error) {
    streams.stderr.write(
      `codecall: internal error: ${terminalText(error instanceof Error ? (error.stack ?? error.message) : String(error))}\n`,
    );
    return EXIT_SCRIPT_FAILED;
  }
}

async function runCommandLine(argv: readonly string[], streams: CommandLineStreams): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    streams.stderr.write(`codecall: ${terminalText((error as Error).message)}\n${USAGE}`);
    return EXIT_BAD_CONFIGURATION;
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (values.help || command === undefined || command === 'help') {
    streams.stdout.write(USAGE);
    return command === undefined && !values.help ? EXIT_BAD_CONFIGURATION : EXIT_SUCCESS;
  }
  try {
    const fileOptions = await loadConfigFile(values.config);
    const options: Record<string, unknown> = { ...CLI_DEFAULTS, ...fileOptions };
    if (values.workspace !== undefined) options.workspace = values.workspace;
    if (values['workspace-mount'] !== undefined) options.workspaceMount = values['workspace-mount'];
    if (values.sandbox !== undefined) options.sandbox = values.sandbox;
    if (values.python !== undefined) options.python = values.python;
    if (values.timeout !== undefined) {
      options.limits = { ...(options.limits as Partial<Limits> | undefined), timeoutMs: parseTimeout(values.timeout) };
    }
    switch (command) {
      case 'run':
        return await runCommand(options as CodecallOptions, streams, {
          scriptPath: positionals[1],
          json: values.json === true,
          positionalCount: positionals.length,
        });
      case 'stubs':
        return await stubsCommand(options as CodecallOptions, streams);
      case 'doctor': {
        // Loaded for its command only (with the database and MCP modules it reads): `run` starts without them.
        const { checkImportNames, runDoctor } = await import('./doctor.js');
        return await runDoctor(options as CodecallOptions, streams.stdout, {
          imports: values.import === undefined ? undefined : checkImportNames(values.import),
          httpToken: () => readHttpToken({ tokenFile: values['token-file'], environment: process.env }),
        });
      }
      case 'serve':
        return await serveCommand(options as CodecallOptions, streams, {
          http: values.http,
          host: values.host,
          tokenFile: values['token-file'],
          allowedHosts: values['allow-host'],
          allowUnsandboxed: values['allow-unsandboxed'] === true,
        });
      case 'worker':
        return await workerCommand(options as CodecallOptions, streams, {
          redis: values.redis,
          queue: values.queue,
          concurrency: values.concurrency,
          pool: values.pool,
          allowUnsandboxed: values['allow-unsandboxed'] === true,
        });
      case 'trace':
        return await traceCommand(streams, {
          resultPath: positionals[1],
          outputPath: values.output,
          positionalCount: positionals.length,
        });
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || error instanceof CodecallError) {
      streams.stderr.write(`codecall: ${terminalText(error.message)}\n`);
      return EXIT_BAD_CONFIGURATION;
    }
    throw error;
  }
}

function parseCommandLine(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      config: { type: 'string' },
      workspace: { type: 'string' },
      timeout: { type: 'string' },
      sandbox: { type: 'string' },
      python: { type: 'string' },
      json: { type: 'boolean' },
      output: { type: 'string', short: 'o' },
      http: { type: 'string' },
      host: { type: 'string' },
      'token-file': { type: 'string' },
      'allow-host': { type: 'string', multiple: true },
      'allow-unsandboxed': { type: 'boolean' },
      import: { type: 'string', multiple: true },
      'workspace-mount': { type: 'string' },
      redis: { type: 'string' },
      queue: { type: 'string' },
      concurrency: { type: 'string' },
      pool: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

async function runCommand(
  options: CodecallOptions,
  streams: CommandLineStreams,
  run: { readonly scriptPath: string | undefined; readonly json: boolean; readonly positionalCount: number },
): Promise<number> {
  const { scriptPath, json } = run;
  if (scriptPath === undefined || run.positionalCount > 2) {
    throw new UsageError('run takes one script path, or - to read the script from standard input');
  }
  const code = await readScript(scriptPath, streams);
  // One run, which may call no tool: what it needs is loaded when it is needed (unless the configuration says).
  const codecall = createCodecall({ warmUp: false, ...options });
  const stopOnSignal = () => void codecall.close();
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    const result = await codecall.execute(code, { onEvent: liveRunView(streams) });
    streams.stdout.write(json ? `${terminalJson(result)}\n` : formatResultForModel(result));
    return result.status === 'success' ? EXIT_SUCCESS : EXIT_SCRIPT_FAILED;
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await codecall.close();
  }
}

async function traceCommand(
  streams: CommandLineStreams,
  trace: {
    readonly resultPath: string | undefined;
    readonly outputPath: string | undefined;
    readonly positionalCount: number;
  },
): Promise<number> {
  if (trace.resultPath === undefined || trace.positionalCount > 2) {
    throw new UsageError('trace takes one result file (from run --json), or - to read it from standard input');
  }
  const { resultPath } = trace;
  const source =
    resultPath === '-'
      ? await readScript(resultPath, streams)
      : await filePromises()
          .readFile(resultPath, 'utf8')
          .catch((error: NodeJS.ErrnoException) => {
            throw new UsageError(`cannot read the result ${resultPath}: ${error.code ?? error.message}`);
          });
  let result: unknown;
  try {
    result = JSON.parse(source);
  } catch {
    throw new UsageError(`${trace.resultPath} is not JSON; write one with codecall run --json`);
  }
  const { renderTraceHtml } = await import('./trace-viewer.js');
  const html = await renderTraceHtml(result);
  if (trace.outputPath === undefined) streams.stdout.write(html);
  else await filePromises().writeFile(trace.outputPath, html);
  return EXIT_SUCCESS;
}

async function stubsCommand(options: CodecallOptions, streams: CommandLineStreams): Promise<number> {
  const codecall = createCodecall(options);
  try {
    const generated = await codecall.generateModule();
    for (const file of generated.files) {
      streams.stdout.write(`# ===== ${file.path} =====\n${file.content}\n`);
    }
    return EXIT_SUCCESS;
  } finally {
    await codecall.close();
  }
}

async function serveCommand(
  options: CodecallOptions,
  streams: CommandLineStreams,
  serve: ServeCommandOptions,
): Promise<number> {
  const address = serve.http === undefined ? undefined : parseHttpAddress(serve.http);
  if (address === undefined) {
    for (const [flag, value] of [
      ['--host', serve.host],
      ['--token-file', serve.tokenFile],
      ['--allow-host', serve.allowedHosts],
    ] as const) {
      if (value !== undefined) throw new UsageError(`${flag} applies to serve --http only`);
    }
  } else if ('socketPath' in address && serve.host !== undefined) {
    throw new UsageError('--host applies to --http PORT, not to a Unix socket');
  }
  const tokenSetting =
    address === undefined ? undefined : await readHttpToken({ tokenFile: serve.tokenFile, environment: process.env });
  // Read once: nothing started later needs it in its environment.
  delete process.env[HTTP_TOKEN_ENVIRONMENT_VARIABLE];
  const codecall = createCodecall(options);
  // A server runs other people's code for long: losing the sandbox must be a decision, not a fallback.
  if ((options.sandbox ?? 'auto') === 'auto' && !serve.allowUnsandboxed && (await codecall.isolation()) === 'none') {
    await codecall.close();
    streams.stderr.write(
      'codecall: serve refuses to run scripts without a sandbox: bubblewrap is not usable here (see the warning ' +
        'above, or run codecall doctor). Install bubblewrap, or pass --allow-unsandboxed (or --sandbox none) to ' +
        'serve without one.\n',
    );
    return EXIT_BAD_CONFIGURATION;
  }
  let stopServing = (): void => {};
  const shutdown = new Promise<void>((resolve) => {
    stopServing = resolve;
  });
  process.once('SIGINT', stopServing);
  process.once('SIGTERM', stopServing);
  try {
    if (address !== undefined && tokenSetting !== undefined) {
      // Each transport's module alone: the MCP entry also loads the SDK's client side and the other transport (its
      // HTTP framework), tens of milliseconds of a stdio server's start.
      const { serveHttp } = await import('../mcp-server/streamable-http-server.js');
      const server = await serveHttp(codecall, {
        ...address,
        host: serve.host,
        token: tokenSetting.token,
        allowedHosts: serve.allowedHosts,
      });
      const where =
        server.socketPath === undefined
          ? `at ${server.url}`
          : `on the Unix socket ${server.socketPath} (mode 0600), endpoint ${server.url}`;
      streams.stderr.write(`codecall: serving execute_code over Streamable HTTP ${where}\n`);
      streams.stderr.write(describeToken(tokenSetting, server.token));
      await shutdown;
      await server.close();
    } else {
      const { serveStdio } = await import('../mcp-server/execute-code-server.js');
      const server = await serveStdio(codecall, { input: streams.stdin, output: streams.stdout });
      await Promise.race([shutdown, server.closed]);
    }
    await codecall.close();
    return EXIT_SUCCESS;
  } finally {
    process.off('SIGINT', stopServing);
    process.off('SIGTERM', stopServing);
  }
}

function parseCount(flag: string, text: string | undefined, minimum: number): number | undefined {
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < minimum) {
    throw new UsageError(`${flag} takes a whole number of at least ${minimum}, got "${text}"`);
  }
  return value;
}

/**
 * `codecall worker`: takes runs from the fleet's queue until SIGINT or SIGTERM, then finishes the runs in progress.
 * Tools, limits and the module name come from each agent; the sandbox, interpreter, pool and state folder are this
 * machine's configuration.
 */
async function workerCommand(
  options: CodecallOptions,
  streams: CommandLineStreams,
  worker: {
    readonly redis: string | undefined;
    readonly queue: string | undefined;
    readonly concurrency: string | undefined;
    readonly pool: string | undefined;
    readonly allowUnsandboxed: boolean;
  },
): Promise<number> {
  const redis = worker.redis ?? options.remote?.redis;
  if (redis === undefined)
    throw new UsageError('worker needs --redis URL (or "remote": { "redis": URL } in the configuration)');
  const concurrency = parseCount('--concurrency', worker.concurrency, 1);
  const poolSize = parseCount('--pool', worker.pool, 0);
  const { sandbox, python, stateDir, env, envPassthrough, network, readOnlyPaths, sessions, outputs, pool } = options;
  const codecallOptions = {
    sandbox,
    python,
    stateDir,
    env,
    envPassthrough,
    network,
    readOnlyPaths,
    sessions,
    outputs,
    pool: poolSize === undefined ? pool : { size: poolSize },
  };
  const probe = createLocalCodecall({ sandbox, python });
  const isolation = await probe.isolation().finally(() => probe.close());
  if ((sandbox ?? 'auto') === 'auto' && !worker.allowUnsandboxed && isolation === 'none') {
    streams.stderr.write(
      'codecall: worker refuses to run scripts without a sandbox: bubblewrap is not usable here (run codecall ' +
        'doctor). Install bubblewrap, or pass --allow-unsandboxed (or --sandbox none) to run without one.\n',
    );
    return EXIT_BAD_CONFIGURATION;
  }
  const queue = worker.queue ?? options.remote?.queue;
  const started = await startFleetWorker({ redis, queue, concurrency, codecall: codecallOptions });
  let stop = (): void => {};
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  streams.stderr.write(
    `codecall: worker ${started.id} takes runs from queue "${queue ?? DEFAULT_QUEUE_NAME}" ` +
      `(concurrency ${concurrency ?? DEFAULT_WORKER_CONCURRENCY}, isolation ${isolation})\n`,
  );
  try {
    await stopped;
    streams.stderr.write('codecall: worker stopping: finishing the runs in progress\n');
    await started.close();
    return EXIT_SUCCESS;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** What `serve --http` tells its user about the token: where it comes from, and the generated one itself. */
function describeToken(setting: HttpTokenSetting, token: string): string {
  if (setting.token !== undefined) {
    return `codecall: every request needs "Authorization: Bearer <token>" with the token from ${setting.source}\n`;
  }
  return (
    `codecall: every request needs "Authorization: Bearer <token>"; bearer token generated for this start: ${token}\n` +
    `codecall: to keep one across restarts, set ${HTTP_TOKEN_ENVIRONMENT_VARIABLE} or give --token-file FILE\n`
  );
}
