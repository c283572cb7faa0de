// Bundles the `codecall` command after tsc has built dist/: src/cli/command-line.ts and everything it loads, packages
// aside, into dist/cli/command-line-bundle.cjs, and the loader src/cli/main.ts into dist/cli/main.cjs (the `codecall`
// command) and dist/cli/main.js. Why: a one-shot `codecall run` spent more time in Node's ES module loader, resolving
// and compiling about a hundred small modules one by one, than in the run itself; one bundle loads in a fraction of
// that, and as a plain script it can be compiled with a V8 code cache, which Node 20 offers for no ES module (the
// loader keeps the cache in the state folder).
// Commands loaded on demand (doctor, serve's MCP server, trace, databases, upstream servers) are in the bundle but
// only initialised when used. The library entries (dist/index.js, dist/mcp-server/...) stay tsc's plain modules.
// Packages (the MCP SDK, Ajv, optional peers) are not bundled: they resolve from node_modules as before, but for Ajv
// and the MCP SDK, which the command also has in bundles of their own (see AJV_ENTRY, MCP_SDK_SPECIFIERS). The bundle
// sits in dist/cli/ itself, at the depth of the modules it replaces, so paths taken from import.meta.url (the Python
// runtime, package.json) resolve the same.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

const OUTPUT_DIRECTORY = 'dist/cli';
/** The bundled command (read by main.js: keep the two names equal). */
const BUNDLE_FILE = 'command-line-bundle.cjs';
/** Prefix of the chunk files earlier builds wrote, removed so that no stale chunk stays in dist/cli. */
const OLD_CHUNK_PREFIX = 'bundle-';
/**
 * The function the bundle's text is the body of, written into the file itself, so that main.js compiles the file's
 * text as it was read: wrapped at run time, it would be copied whole once more (half a megabyte of fresh memory). Its
 * parameters are what main.js passes (keep the two equal).
 */
const BUNDLE_FUNCTION_START =
  '(function (exports, require, module, __filename, __dirname, __codecallModuleUrl, __codecallImport, __codecallLoadAjv) {';
/** Ajv's bundle (read by main.js: keep the two names equal). */
const AJV_BUNDLE_FILE = 'ajv-bundle.cjs';
/**
 * The function a package's bundle (Ajv's, the MCP SDK's) is the body of: a CommonJS module's parameters (main.js
 * passes them).
 */
const MODULE_FUNCTION_START = '(function (exports, require, module, __filename, __dirname) {';
/**
 * What Ajv's bundle exports: each class required when first asked for, so that only the draft a run's tools use is
 * initialised (esbuild keeps a bundled module's initialisation for its first `require`).
 */
const AJV_ENTRY = `module.exports = {
  get Ajv() { return require('ajv').Ajv; },
  get Ajv2019() { return require('ajv/dist/2019.js').Ajv2019; },
  get Ajv2020() { return require('ajv/dist/2020.js').Ajv2020; },
};
`;
const BUNDLE_FUNCTION_END = '})';
/** The MCP SDK's bundle (read by main.js: keep the two names equal). */
const MCP_SDK_BUNDLE_FILE = 'mcp-sdk-bundle.cjs';
/**
 * The MCP SDK modules the command requires (main.js serves each from the SDK's bundle): all of them, so that the
 * command holds one copy of each SDK class (an `McpError` from the client must be one to the server). The build fails
 * when the command requires another.
 */
const MCP_SDK_SPECIFIERS = [
  '@modelcontextprotocol/sdk/client/index.js',
  '@modelcontextprotocol/sdk/client/stdio.js',
  '@modelcontextprotocol/sdk/client/streamableHttp.js',
  '@modelcontextprotocol/sdk/server/index.js',
  '@modelcontextprotocol/sdk/server/stdio.js',
  '@modelcontextprotocol/sdk/server/streamableHttp.js',
  '@modelcontextprotocol/sdk/types.js',
];
/**
 * What the SDK's bundle exports: a function giving the module of a specifier of MCP_SDK_SPECIFIERS (undefined for
 * another), each module initialised when first asked for, so a stdio server sets up neither the client nor HTTP.
 */
const MCP_SDK_ENTRY = `const modules = {
${MCP_SDK_SPECIFIERS.map((specifier) => `  ${JSON.stringify(specifier)}: () => require(${JSON.stringify(specifier)}),`).join('\n')}
};
module.exports = (specifier) => (Object.hasOwn(modules, specifier) ? modules[specifier]() : undefined);
`;
/** How the command's bundle requires a module of the MCP SDK (esbuild writes external requires so). */
const MCP_SDK_REQUIRE = /require\("(@modelcontextprotocol\/sdk\/[^"]+)"\)/g;

/**
 * Bundles packages, from an entry's text (`contents`, named `sourcefile` in messages), into `file` in dist/cli: the
 * body of a CommonJS module's function, which main.js compiles with a code cache of its own.
 */
function buildPackageBundle(contents, sourcefile, file) {
  return build({
    stdin: { contents, resolveDir: process.cwd(), sourcefile, loader: 'js' },
    outfile: join(OUTPUT_DIRECTORY, file),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    minifyWhitespace: true,
    banner: { js: MODULE_FUNCTION_START },
    footer: { js: BUNDLE_FUNCTION_END },
    logLevel: 'warning',
  });
}

for (const name of readdirSync(OUTPUT_DIRECTORY)) {
  if (name.startsWith(OLD_CHUNK_PREFIX)) rmSync(join(OUTPUT_DIRECTORY, name));
}
// The command itself, as one plain script that main.js compiles with a V8 code cache (Node 20 caches no ES module).
// It stands beside main.js, where the modules it holds stood: paths taken from import.meta.url resolve the same.
await build({
  entryPoints: ['src/cli/command-line.ts'],
  outfile: join(OUTPUT_DIRECTORY, BUNDLE_FILE),
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  // __CODECALL_BUNDLED__: code that must know it runs from the bundle (see src/engine/codecall-preparation.ts).
  define: { 'import.meta.url': '__codecallModuleUrl', __CODECALL_BUNDLED__: 'true' },
  // Without the whitespace a start reads, decodes and checks against its code cache a quarter less text; names stay
  // (no identifier is renamed), so stack traces still name every function, and the source map maps them back.
  minifyWhitespace: true,
  banner: { js: BUNDLE_FUNCTION_START },
  footer: { js: BUNDLE_FUNCTION_END },
  sourcemap: true,
  logLevel: 'warning',
});
// Ajv, which checks the arguments of a run's first tool call, as a script of its own that main.js compiles with its own
// code cache when the command first needs it: from node_modules its eighty-odd modules took a one-shot `codecall run`
// tens of milliseconds to resolve and compile at that call, and in the command's bundle its code would be read and
// its cache loaded by every run, calling tools or not. The library entries import the package as before.
await buildPackageBundle(AJV_ENTRY, 'ajv-entry.cjs', AJV_BUNDLE_FILE);
// The MCP SDK (its server for `serve`, its client for upstream servers, their zod schemas and Ajv), as a script of its
// own that main.js compiles with its own code cache when the command first requires one of its modules: from
// node_modules, its modules took `serve` a large part of its start to resolve and compile before it answered
// `initialize`. The library entries (codecall/mcp) import the package as before.
const commandBundle = readFileSync(join(OUTPUT_DIRECTORY, BUNDLE_FILE), 'utf8');
const unbundled = [...new Set([...commandBundle.matchAll(MCP_SDK_REQUIRE)].map((match) => match[1]))].filter(
  (specifier) => !MCP_SDK_SPECIFIERS.includes(specifier),
);
if (unbundled.length > 0) {
  throw new Error(
    `the command requires MCP SDK modules its SDK bundle lacks: add ${unbundled.join(', ')} to MCP_SDK_SPECIFIERS`,
  );
}
await buildPackageBundle(MCP_SDK_ENTRY, 'mcp-sdk-entry.cjs', MCP_SDK_BUNDLE_FILE);
// The loader: reads the bundle and its code cache, falls back to the plain modules when there is no bundle. Built
// twice: main.cjs, the installed `codecall` command, is CommonJS because Node sets up its ES module loader (about ten
// milliseconds of a one-shot `codecall run`) only for an ES module entry; main.js, the same loader as an ES module,
// stays for `node dist/cli/main.js`.
const loader = {
  entryPoints: ['src/cli/main.ts'],
  bundle: true,
  platform: 'node',
  target: 'node20',
  packages: 'external',
  logLevel: 'warning',
};
await build({ ...loader, outfile: join(OUTPUT_DIRECTORY, 'main.js'), format: 'esm' });
await build({
  ...loader,
  outfile: join(OUTPUT_DIRECTORY, 'main.cjs'),
  format: 'cjs',
  // A CommonJS module has no import.meta: its URL from __filename, before anything reads it.
  define: { 'import.meta.url': '__codecallLoaderUrl' },
  banner: { js: `'use strict';\nconst __codecallLoaderUrl = require('node:url').pathToFileURL(__filename).href;` },
});
