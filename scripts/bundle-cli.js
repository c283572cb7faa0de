// Bundles the `codecall` command (src/cli/main.ts) into dist/cli/main.js and a few chunks beside it, after tsc has
// built dist/. Why: a one-shot `codecall run` spent more time in Node's ES module loader, resolving and compiling
// about a hundred small modules one by one, than in the run itself; one bundle loads in a fraction of that.
// The library entries (dist/index.js, dist/mcp-server/...) stay tsc's plain modules; only the binary is bundled.
// Commands loaded on demand (doctor, serve's MCP server, trace, databases, upstream servers) stay separate chunks,
// so `run` never compiles them. Packages (the MCP SDK, Ajv, optional peers) are not bundled: they resolve from
// node_modules as before. The chunks sit in dist/cli/ itself, at the depth of the modules they replace, so paths
// taken from import.meta.url (the Python runtime, package.json) resolve the same.
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

const OUTPUT_DIRECTORY = 'dist/cli';
/** Prefix of every chunk file, so the next build can remove the chunks of this one (their names carry hashes). */
const CHUNK_PREFIX = 'bundle-';

for (const name of readdirSync(OUTPUT_DIRECTORY)) {
  if (name.startsWith(CHUNK_PREFIX)) rmSync(join(OUTPUT_DIRECTORY, name));
}
await build({
  entryPoints: ['src/cli/main.ts'],
  outdir: OUTPUT_DIRECTORY,
  chunkNames: `${CHUNK_PREFIX}[name]-[hash]`,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
