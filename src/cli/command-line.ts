import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { CodecallError } from '../core/errors.js';
import type { Limits } from '../core/limits.js';
import { type CodecallOptions, createCodecall } from '../engine/codecall.js';
import { formatResultForModel } from '../engine/format-result.js';
import { CLI_DEFAULTS, loadConfigFile } from './config-file.js';
import { runDoctor } from './doctor.js';

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
  serve                 serve execute_code as an MCP server on stdio (--http PORT for Streamable HTTP)

options:
  --config FILE         configuration file (default: ./codecall.json when present)
  --workspace DIR       folder the built-in file tools work in (default: the current directory)
  --timeout SECONDS     wall-clock limit of the run
  --sandbox MODE        auto | bubblewrap | none
  --python COMMAND      Python interpreter (default: python3)
  --json                run: print the whole result object as JSON
  --http PORT           serve: Streamable HTTP on 127.0.0.1:PORT instead of stdio
  --host ADDRESS        serve: address to listen on with --http (default 127.0.0.1)
  --allow-unsandboxed   serve: run scripts without a sandbox when bubblewrap is not usable (sandbox "auto");
                        without it serve refuses to start there
  -h, --help            show this help
`;

class UsageError extends Error {}

async function readScript(path: string): Promise<string> {
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(path, 'utf8');
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

function parsePort(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--http takes a port number from 0 to 65535, got "${text}"`);
  }
  return port;
}

/** Runs the command line; resolves with the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    process.stderr.write(`codecall: ${(error as Error).message}\n${USAGE}`);
    return EXIT_BAD_CONFIGURATION;
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !values.help ? EXIT_BAD_CONFIGURATION : EXIT_SUCCESS;
  }
  try {
    const fileOptions = await loadConfigFile(values.config);
    const options: Record<string, unknown> = { ...CLI_DEFAULTS, ...fileOptions };
    if (values.workspace !== undefined) options.workspace = values.workspace;
    if (values.sandbox !== undefined) options.sandbox = values.sandbox;
    if (values.python !== undefined) options.python = values.python;
    if (values.timeout !== undefined) {
      options.limits = { ...(options.limits as Partial<Limits> | undefined), timeoutMs: parseTimeout(values.timeout) };
    }
    switch (command) {
      case 'run':
        return await runCommand(options as CodecallOptions, positionals[1], values.json === true, positionals.length);
      case 'stubs':
        return await stubsCommand(options as CodecallOptions);
      case 'doctor':
        return await runDoctor(options as CodecallOptions, process.stdout);
      case 'serve':
        return await serveCommand(options as CodecallOptions, {
          http: values.http,
          host: values.host,
          allowUnsandboxed: values['allow-unsandboxed'] === true,
        });
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || error instanceof CodecallError) {
      process.stderr.write(`codecall: ${error.message}\n`);
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
      http: { type: 'string' },
      host: { type: 'string' },
      'allow-unsandboxed': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

async function runCommand(
  options: CodecallOptions,
  scriptPath: string | undefined,
  json: boolean,
  positionalCount: number,
): Promise<number> {
  if (scriptPath === undefined || positionalCount > 2) {
    throw new UsageError('run takes one script path, or - to read the script from standard input');
  }
  const code = await readScript(scriptPath);
  const codecall = createCodecall(options);
  const stopOnSignal = () => void codecall.close();
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    const result = await codecall.execute(code);
    process.stdout.write(json ? `${JSON.stringify(result, null, 2)}\n` : formatResultForModel(result));
    return result.status === 'success' ? EXIT_SUCCESS : EXIT_SCRIPT_FAILED;
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await codecall.close();
  }
}

async function stubsCommand(options: CodecallOptions): Promise<number> {
  const codecall = createCodecall(options);
  try {
    const generated = await codecall.generateModule();
    for (const file of generated.files) {
      process.stdout.write(`# ===== ${file.path} =====\n${file.content}\n`);
    }
    return EXIT_SUCCESS;
  } finally {
    await codecall.close();
  }
}

/** Options of `codecall serve`. */
interface ServeCommandOptions {
  readonly http: string | undefined;
  readonly host: string | undefined;
  /** Serve even when `sandbox: "auto"` finds no usable bubblewrap and would run scripts without a sandbox. */
  readonly allowUnsandboxed: boolean;
}

async function serveCommand(options: CodecallOptions, serve: ServeCommandOptions): Promise<number> {
  const { http, host } = serve;
  const codecall = createCodecall(options);
  // A server runs other people's code for long: losing the sandbox must be a decision, not a fallback.
  if ((options.sandbox ?? 'auto') === 'auto' && !serve.allowUnsandboxed && (await codecall.isolation()) === 'none') {
    await codecall.close();
    process.stderr.write(
      'codecall: serve refuses to run scripts without a sandbox: bubblewrap is not usable here (see the warning ' +
        'above, or run codecall doctor). Install bubblewrap, or pass --allow-unsandboxed (or --sandbox none) to ' +
        'serve without one.\n',
    );
    return EXIT_BAD_CONFIGURATION;
  }
  const { serveHttp, serveStdio } = await import('../mcp-server/index.js');
  const shutdown = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  if (http !== undefined) {
    const server = await serveHttp(codecall, { port: parsePort(http), host: host ?? '127.0.0.1' });
    process.stderr.write(`codecall: serving execute_code over Streamable HTTP at ${server.url}\n`);
    await shutdown;
    await server.close();
  } else {
    const server = await serveStdio(codecall);
    await Promise.race([shutdown, server.closed]);
  }
  await codecall.close();
  return EXIT_SUCCESS;
}
