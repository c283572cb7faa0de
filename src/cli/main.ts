#!/usr/bin/env node
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { constants, Script } from 'node:vm';
import { readBundle, readCodeCache, writeCodeCache } from './code-cache.js';

/**
 * The `codecall` command. `npm run build` bundles the command (command-line.ts and all it loads, packages aside)
 * into one script beside this file, which is compiled here with a V8 code cache kept in the state folder: a one-shot
 * `codecall run` otherwise spends tens of milliseconds parsing and compiling that script in every process. Node 20
 * caches no ES module, so the bundle is a plain script run through `vm.Script`. Without the bundle (tsc's output
 * alone) the modules are imported as they are.
 */

/** The bundled command, beside this file (see scripts/bundle-cli.js). */
const BUNDLE_FILE = fileURLToPath(new URL('./command-line-bundle.cjs', import.meta.url));
/** Ajv, bundled apart (see scripts/bundle-cli.js): loaded when the command first checks a tool's arguments. */
const AJV_BUNDLE_FILE = fileURLToPath(new URL('./ajv-bundle.cjs', import.meta.url));

/** The MCP SDK, bundled apart (see scripts/bundle-cli.js): loaded when the command first requires one of its modules. */
const MCP_SDK_BUNDLE_FILE = fileURLToPath(new URL('./mcp-sdk-bundle.cjs', import.meta.url));
/** What the command requires of the MCP SDK starts so (its bundle serves every such module, see commandRequire). */
const MCP_SDK_PREFIX = '@modelcontextprotocol/sdk/';

/** What a command name looks like (the first argument); another first argument keeps its cache under `other`. */
const COMMAND_NAME = /^[a-z][a-z-]{0,15}$/;

/**
 * Whose code caches this process reads and writes: a bundle's cache is kept per command, because V8 keeps in a cache
 * only the functions the process that made it compiled, and one command's are not another's (`codecall run` from a
 * cache made by `serve` compiled the rest of its path itself). The bundle file and the command.
 */
function cacheOwner(file: string): string {
  const command = process.argv[2];
  return `${file}#${command !== undefined && COMMAND_NAME.test(command) ? command : 'other'}`;
}

type Main = (argv: readonly string[]) => Promise<number>;
/** The MCP SDK bundle's export: the module of one of its specifiers, undefined for another. */
type McpSdkModules = (specifier: string) => unknown;

/** A script compiled here whose code cache is written once the command has run (it had none for its key). */
interface UncachedScript {
  readonly script: Script;
  readonly key: string;
  readonly file: string;
}

/** Scripts compiled without a usable code cache: their caches are written after the command ran. */
const uncachedScripts: UncachedScript[] = [];

/**
 * Compiles a bundled script read by `readBundle`, with its code cache when there is one for its key; the script is
 * the text of a function (see scripts/bundle-cli.js), compiled as it was read: not copied into another.
 */
function compileBundled(
  file: string,
  bundle: { readonly source: string; readonly key: string; readonly spare: Buffer },
) {
  // Into the buffer the bundle was read into, decoded already: fresh memory would cost a page fault per page.
  const cachedData = readCodeCache(bundle.key, cacheOwner(file), bundle.spare);
  const script = new Script(bundle.source, {
    filename: file,
    cachedData,
    // Its imports on demand go through __codecallImport (src/core/module-import.ts); this is a fallback only.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  if (cachedData === undefined || script.cachedDataRejected === true) {
    uncachedScripts.push({ script, key: bundle.key, file });
  }
  return script;
}

/**
 * The exports of a package's bundle (a CommonJS module's body, see scripts/bundle-cli.js), compiled with its own code
 * cache; undefined when the file is not there.
 */
function loadPackageBundle(file: string): unknown {
  const bundle = readBundle(file);
  if (bundle === undefined) return undefined;
  const module = { exports: {} };
  compileBundled(file, bundle).runInThisContext()(
    module.exports,
    createRequire(file),
    module,
    file,
    fileURLToPath(new URL('.', import.meta.url)),
  );
  return module.exports;
}

/**
 * Ajv's classes from the Ajv bundle; undefined without that bundle (the command's argument checks then import the
 * package). Loaded from node_modules, Ajv's eighty-odd modules took a one-shot run tens of milliseconds to resolve and
 * compile at its first tool call.
 */
function loadAjvBundle(): unknown {
  return loadPackageBundle(AJV_BUNDLE_FILE);
}

/** The MCP SDK bundle's modules, or null when it is not there or does not compile (the package is required then). */
function loadMcpSdkBundle(): McpSdkModules | null {
  try {
    const modules = loadPackageBundle(MCP_SDK_BUNDLE_FILE);
    return typeof modules === 'function' ? (modules as McpSdkModules) : null;
  } catch {
    return null;
  }
}

/**
 * The `require` of the command's bundle: modules of the MCP SDK from the SDK's bundle, loaded at the first of them
 * (`serve`, upstream servers), everything else from node_modules. From node_modules, the SDK's modules took `serve`
 * a large part of its start to resolve and compile before it answered `initialize`. Without the SDK's bundle,
 * or for a module it lacks (the build checks there is none), the package.
 */
function commandRequire(): NodeJS.Require {
  const nodeRequire = createRequire(BUNDLE_FILE);
  let sdkModules: McpSdkModules | null | undefined;
  const required = (specifier: string): unknown => {
    if (specifier.startsWith(MCP_SDK_PREFIX)) {
      sdkModules ??= loadMcpSdkBundle();
      const module = sdkModules?.(specifier);
      if (module !== undefined) return module;
    }
    return nodeRequire(specifier);
  };
  return Object.assign(required, {
    resolve: nodeRequire.resolve,
    cache: nodeRequire.cache,
    extensions: nodeRequire.extensions,
    main: nodeRequire.main,
  });
}

function loadBundle(source: string, key: string, spare: Buffer): Main {
  const script = compileBundled(BUNDLE_FILE, { source, key, spare });
  const module = { exports: {} as { main?: Main } };
  script.runInThisContext()(
    module.exports,
    commandRequire(),
    module,
    BUNDLE_FILE,
    fileURLToPath(new URL('.', import.meta.url)),
    // The bundle stands where the modules it holds were: paths taken from import.meta.url resolve the same.
    import.meta.url,
    // Packages and tool modules it imports on demand, resolved from here (the bundle's folder) by this module.
    (specifier: string) => import(specifier),
    // Ajv for its argument checks (see src/tools/validation.ts).
    loadAjvBundle,
  );
  if (module.exports.main === undefined) throw new Error(`${BUNDLE_FILE} exports no main`);
  return module.exports.main;
}

/**
 * Ends the process with `status` once what the command wrote to stdout and stderr has left it. `main` resolves when
 * the command's work is over (a run's directory, sandbox and namespaces are gone; `exit` listeners still run), so
 * nothing is lost by not waiting for the event loop to empty; what is saved is Node's teardown of the V8 heap, which a
 * natural exit pays page by page and `process.exit` skips (tens of milliseconds of a one-shot `codecall run`). Writes
 * to a pipe can still be queued in the process: an empty write's callback comes after them.
 */
async function exitOnceWritten(status: number): Promise<void> {
  process.exitCode = status;
  await Promise.all(
    [process.stdout, process.stderr].map((stream) => new Promise<void>((resolve) => stream.write('', () => resolve()))),
  );
  process.exit(status);
}

/** Runs the command: the bundle when there is one, the plain modules otherwise. */
async function start(): Promise<void> {
  const bundleFile = readBundle(BUNDLE_FILE);
  if (bundleFile === undefined) {
    // A name esbuild does not follow: the fallback must stay the module itself, not a second bundle of it.
    const commandLine = './command-line.js';
    const { main } = (await import(commandLine)) as typeof import('./command-line.js');
    await exitOnceWritten(await main(process.argv.slice(2)));
    return;
  }
  const { source, key, spare } = bundleFile;
  const main = loadBundle(source, key, spare);
  const status = await main(process.argv.slice(2));
  // Made after the command ran, so a cache holds the functions it compiled on the way, not only the top level.
  for (const { script, key: cacheKey, file } of uncachedScripts)
    writeCodeCache(cacheKey, script.createCachedData(), cacheOwner(file));
  await exitOnceWritten(status);
}

// No top-level await: the same code is built as a CommonJS entry too (see scripts/bundle-cli.js).
void start();
