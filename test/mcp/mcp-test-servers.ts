import { constants, openSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { McpStdioServerConfig } from '../../src/mcp-client/server-config.js';
import type { ToolContext } from '../../src/tools/types.js';

const require = createRequire(import.meta.url);

/** A 1x1 PNG (the same one the fixture server returns). */
export const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';

/** Root of the repository (for `dist/`). */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The built command line, spawned by the serve tests (`npm test` builds first). */
export const CLI_PATH = join(REPOSITORY_ROOT, 'dist', 'cli', 'main.js');
/** The fixture MCP server (SDK-based) used for the HTTP transport and content types. */
export const FIXTURE_SERVER_PATH = fileURLToPath(new URL('./fixtures/fixture-mcp-server.mjs', import.meta.url));

/** Absolute path of the first `bin` script of an installed package. */
export function packageBin(packageName: string): string {
  const manifestPath = require.resolve(`${packageName}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin: string | Record<string, string> };
  const bin = typeof manifest.bin === 'string' ? manifest.bin : Object.values(manifest.bin)[0];
  if (bin === undefined) throw new Error(`${packageName} has no bin`);
  return join(dirname(manifestPath), bin);
}

/** server-memory started with `node`, its graph kept in `memoryFile` (never beside the package). */
export function memoryServer(memoryFile: string): McpStdioServerConfig {
  return {
    command: process.execPath,
    args: [packageBin('@modelcontextprotocol/server-memory')],
    env: { MEMORY_FILE_PATH: memoryFile },
  };
}

/** server-filesystem started with `node`, confined to `root`. */
export function filesystemServer(root: string): McpStdioServerConfig {
  return { command: process.execPath, args: [packageBin('@modelcontextprotocol/server-filesystem'), root] };
}

/** A context for calling a tool source's tools directly. */
export function toolContext(artifactsDir: string, signal?: AbortSignal): ToolContext {
  return { signal: signal ?? new AbortController().signal, runId: 'test-run', toolName: 'test', artifactsDir };
}

/** Child processes of `parentPid` whose command line contains `marker` (Linux /proc). */
export function childProcesses(parentPid: number, marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name in stat is parenthesised and may contain spaces; the ppid follows the state after it.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== parentPid) continue;
      const commandLine = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\u0000', ' ');
      if (commandLine.includes(marker)) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** The one child process of `parentPid` running `marker`; fails when there is none or several. */
export function onlyChildProcess(parentPid: number, marker: string): number {
  const pids = childProcesses(parentPid, marker);
  if (pids.length !== 1) throw new Error(`expected one child running ${marker}, found ${pids.length}`);
  return pids[0] as number;
}

/** True while a process with this pid exists, zombies included (a killed child is gone once it is reaped). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls until `condition` holds (or throws after `timeoutMs`). */
export async function waitUntil(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Waits until some process opens the FIFO at `path` for reading (a tool call blocked on it), then opens it for
 * writing and returns that descriptor: the reader stays blocked, waiting for data, until the descriptor is closed.
 */
export async function waitForFifoReader(path: string, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      // Fails with ENXIO while nobody has the FIFO open for reading.
      return openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO' || Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
