import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { checkPythonModuleInput, type GeneratedPythonModule, generatePythonModule } from '../codegen/python-module.js';
import { CodecallError } from '../core/errors.js';
import { fileSignature, hostCacheDirectory } from '../core/host-cache.js';
import { nextTurn } from '../core/waiting.js';
import type { ResolvedDatabase } from '../databases/database-config.js';
import type { McpServerConfig } from '../mcp-client/server-config.js';
import { resolvePythonInterpreter } from '../sandbox/interpreter.js';
import { importablePackagesOf } from '../sandbox/notable-packages.js';
import type { SandboxRunner } from '../sandbox/runner.js';
import { createSandboxRunner } from '../sandbox/select-runner.js';
import { resolveBuiltinTools } from '../tools/builtin-tool-sets.js';
import type { RegisteredTool, ToolSource } from '../tools/registered-tool.js';
import { createToolRegistry, registerTool } from '../tools/registry.js';
import type { ToolDescriptor, ToolModuleDescriptor } from '../tools/types.js';
import { prepareArgumentValidator } from '../tools/validation.js';
import type { ResolvedCodecallOptions } from './codecall-options.js';
import type { RunEnvironment } from './launch/interpreter-launch.js';
import {
  materializeInterpreterCommands,
  materializeModule,
  pythonFileSignatures,
  readPythonFiles,
} from './launch/module-cache.js';
import { findPlacedFolder, findPlacedModule, recordPlacedFolder, recordPlacedModule } from './launch/placed-modules.js';
import { prepareStateDirectories, type StateDirectories } from './launch/state-directory.js';

/** Directory of the shipped Python runtime (`python/` at the package root). */
export const RUNTIME_DIR = fileURLToPath(new URL('../../python/', import.meta.url));

/** `true` in the bundled command (scripts/bundle-cli.js defines it), undeclared elsewhere. */
declare const __CODECALL_BUNDLED__: boolean | undefined;

/**
 * The folders whose code makes a generated module (the generator and the helpers it imports: tsc's output, or the
 * sources under a test runner), every code file of them taken, so a file added there counts without a list to keep:
 * a module placed by other code is not reused on its record (see `placed-modules.ts`). The bundled command holds all
 * of that code, so there its own file stands for it (one stat instead of one per file).
 */
const GENERATOR_FOLDERS = ['codegen', 'core'];
const BUNDLED_COMMAND = 'cli/command-line-bundle.cjs';

let generatorSignatures: readonly (string | null)[] | undefined;

/** A module's code (`.js`, or `.ts` under a test runner), not its declarations or source map. */
function isCodeFile(name: string): boolean {
  return name.endsWith('.js') || (name.endsWith('.ts') && !name.endsWith('.d.ts'));
}

/** Signatures of the code that generates modules (see {@link GENERATOR_FOLDERS}), read once per process. */
function generatorCode(): readonly (string | null)[] {
  const pathOf = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));
  const bundled = typeof __CODECALL_BUNDLED__ !== 'undefined' && __CODECALL_BUNDLED__;
  generatorSignatures ??= bundled
    ? [`bundle:${fileSignature(pathOf(BUNDLED_COMMAND)) ?? ''}`]
    : GENERATOR_FOLDERS.flatMap((folder) => {
        try {
          return readdirSync(pathOf(folder))
            .filter(isCodeFile)
            .sort()
            .map((name) => `${folder}/${name}:${fileSignature(pathOf(`${folder}/${name}`)) ?? ''}`);
        } catch {
          return [`${folder}:missing`];
        }
      });
  return generatorSignatures;
}

/** What runs of a codecall need, prepared on first use and reused while the tool list stays the same. */
export interface Prepared {
  readonly environment: RunEnvironment;
  readonly generated: GeneratedPythonModule;
  /** Upstream servers that could not be listed, with the reason. */
  readonly failedSources: readonly { name: string; error: string }[];
  /** The tools of the root module and the submodules, as codegen read them (what a remote worker rebuilds). */
  readonly toolModules: {
    readonly tools: readonly ToolDescriptor[];
    readonly modules: readonly ToolModuleDescriptor[];
  };
  /** The state folder's host-only cache folder; undefined when it cannot be trusted. */
  readonly hostCacheDirectory: string | undefined;
}

/** Internal options of a preparation that the public options cannot express. */
export interface PreparationExtras {
  /** Tool sources given as they are (a remote worker's stand-ins for an agent's submodules). */
  readonly toolSources?: readonly ToolSource[] | undefined;
}

/**
 * The preparation of a codecall's runs: its tools (host, built-in and upstream), the generated module, the
 * interpreter, the sandbox runner and the state folders. The static tools and module are checked when it is made;
 * everything else happens on first use.
 */
export class CodecallPreparation {
  readonly #options: ResolvedCodecallOptions;
  readonly #staticTools: readonly RegisteredTool[];
  #staticModule: GeneratedPythonModule | undefined;
  readonly #serverNames: readonly string[];
  readonly #databaseNames: readonly string[];
  readonly #extraSources: readonly ToolSource[];
  #directories: StateDirectories | undefined;
  #runner: Promise<SandboxRunner> | undefined;
  #sources: Promise<ToolSource[]> | undefined;
  #prepared: { key: string; value: Promise<Prepared> } | undefined;
  #warmedUp: Promise<void> | undefined;
  #hostCache: { readonly directory: string | undefined } | undefined;

  /** @throws CodecallError `INVALID_CONFIG` / `INVALID_TOOL` / `DUPLICATE_TOOL` naming the bad tool or module name. */
  constructor(options: ResolvedCodecallOptions, extras: PreparationExtras = {}) {
    this.#options = options;
    this.#extraSources = extras.toolSources ?? [];
    this.#staticTools = [
      ...resolveBuiltinTools({
        names: options.builtinTools,
        workspace: options.workspace,
        stateDir: options.stateRoot,
        files: options.files,
      }).map((tool) => registerTool(tool)),
      ...options.tools.map((tool) => registerTool(tool)),
    ];
    // Checks wire-name uniqueness now, so a duplicate is a configuration error at creation.
    createToolRegistry(this.#staticTools);
    this.#serverNames = Object.keys(options.mcpServers);
    this.#databaseNames = Object.keys(options.databases);
    // Checked up front: a bad module name or tool name surfaces here, not at the first run. The module itself is
    // generated when a run needs it, unless an earlier process placed it for the same input (see #moduleFor).
    checkPythonModuleInput({ moduleName: options.moduleName, tools: this.#staticTools.map((tool) => tool.descriptor) });
  }

  /**
   * Readies the argument checks of the static tools: loads the checker and compiles the first tool's schema (the
   * costly part, tens of milliseconds); the other schemas are compiled in the background one per turn of the event
   * loop, so a long tool list never blocks it. Resolves when the first part is done; never rejects.
   */
  warmUp(): Promise<void> {
    if (this.#warmedUp === undefined) {
      const [first, ...others] = this.#staticTools;
      this.#warmedUp = (first === undefined ? Promise.resolve() : prepareArgumentValidator(first.checkArguments)).then(
        () => {
          void compileOneByOne(others);
        },
      );
    }
    return this.#warmedUp;
  }

  /** The sandbox runner, selected once. */
  runner(): Promise<SandboxRunner> {
    this.#runner ??= Promise.resolve().then(() =>
      createSandboxRunner(this.#options.sandbox, {
        extraReadOnlyPaths: this.#options.readOnlyPaths,
        cacheDirectory: this.#cacheDirectory(),
      }),
    );
    return this.#runner;
  }

  /** The host-only cache folder of the state folder (made after the state folders, which it must not pre-empt). */
  #cacheDirectory(): string | undefined {
    this.#directories ??= prepareStateDirectories(this.#options.stateRoot);
    this.#hostCache ??= { directory: hostCacheDirectory(this.#directories.root) };
    return this.#hostCache.directory;
  }

  /**
   * The upstream servers and the databases as tool sources, made once (importing the MCP client only when there are
   * servers, and the database tools only when there are databases).
   */
  sources(): Promise<ToolSource[]> {
    if (!this.#hasSources()) return Promise.resolve([]);
    const { mcpServers, databases } = this.#options;
    this.#sources ??= Promise.all([
      this.#serverNames.length === 0
        ? []
        : import('../mcp-client/upstream-tool-source.js').then((module) =>
            this.#serverNames.map((name) => module.createMcpToolSource(name, mcpServers[name] as McpServerConfig)),
          ),
      this.#databaseNames.length === 0
        ? []
        : import('../databases/database-tool-source.js').then((module) =>
            this.#databaseNames.map((name) => module.createDatabaseToolSource(databases[name] as ResolvedDatabase)),
          ),
    ]).then(([servers, databaseSources]) => [...servers, ...databaseSources, ...this.#extraSources]);
    return this.#sources;
  }

  #hasSources(): boolean {
    return this.#serverNames.length > 0 || this.#databaseNames.length > 0 || this.#extraSources.length > 0;
  }

  /** Closes the sandbox runner, when one was made (see `SandboxRunner.close`); never rejects. */
  async closeRunner(): Promise<void> {
    const runner = await this.#runner?.catch(() => undefined);
    await runner?.close?.();
  }

  /** Closes the upstream connections made so far. */
  async closeSources(): Promise<void> {
    const sources = this.#sources ? await this.#sources.catch(() => []) : [];
    await Promise.allSettled(sources.map((source) => source.close()));
  }

  /** Lists the tools and prepares what runs need; reuses the last preparation while the tool list is the same. */
  async prepare(): Promise<Prepared> {
    // Without tool sources the tool list never changes: every run after the first reuses the same preparation.
    if (!this.#hasSources() && this.#prepared !== undefined) return this.#prepared.value;
    this.#directories ??= prepareStateDirectories(this.#options.stateRoot);
    const runner = this.runner();
    const listings = await Promise.all(
      (await this.sources()).map(async (source) => {
        try {
          return { source, listing: await source.load() };
        } catch (error) {
          return { source, error: error instanceof Error ? error.message : String(error) };
        }
      }),
    );
    const modules: ToolModuleDescriptor[] = [];
    const dynamicTools: RegisteredTool[] = [];
    const failedSources: { name: string; error: string }[] = [];
    for (const entry of listings) {
      if ('error' in entry) {
        failedSources.push({ name: entry.source.name, error: entry.error ?? 'failed' });
        continue;
      }
      modules.push({
        name: entry.source.name,
        description: entry.listing.description,
        note: entry.listing.note,
        tools: entry.listing.tools.map((tool: RegisteredTool) => tool.descriptor),
      });
      dynamicTools.push(...entry.listing.tools);
    }
    const key = JSON.stringify([
      modules.map((module) => [module.name, module.note, module.tools.map((tool) => tool.name)]),
      failedSources,
    ]);
    if (this.#prepared?.key === key) return this.#prepared.value;
    const value = this.#build({
      runner,
      directories: this.#directories,
      modules,
      dynamicTools,
      failedSources,
    });
    this.#prepared = { key, value };
    value.catch(() => {
      if (this.#prepared?.value === value) this.#prepared = undefined;
    });
    return value;
  }

  /**
   * The generated module and its folder: as an earlier process placed them for exactly this input (tools, modules,
   * interpreter, folder, generator code), else generated (the static tools' module once per preparation), placed
   * (checked byte for byte when found, see `module-cache.ts`) and recorded for later processes.
   */
  async #moduleFor(
    modules: readonly ToolModuleDescriptor[],
    modulesRoot: string,
    python: string,
  ): Promise<{ readonly generated: GeneratedPythonModule; readonly folder: Promise<string> }> {
    const { moduleName } = this.#options;
    const tools = this.#staticTools.map((tool) => tool.descriptor);
    const cacheDirectory = this.#cacheDirectory();
    const record =
      cacheDirectory === undefined
        ? undefined
        : {
            directory: cacheDirectory,
            input: JSON.stringify({ code: generatorCode(), modulesRoot, python, moduleName, tools, modules }),
          };
    const placed = record === undefined ? undefined : findPlacedModule(record.directory, modulesRoot, record.input);
    if (placed !== undefined) return { generated: placed.generated, folder: Promise.resolve(placed.folder) };
    let generated: GeneratedPythonModule;
    if (modules.length > 0) generated = generatePythonModule({ moduleName, tools, modules: [...modules] });
    else {
      this.#staticModule ??= generatePythonModule({ moduleName, tools, modules: [] });
      generated = this.#staticModule;
    }
    const folder = materializeModule(modulesRoot, generated.files, python).then((placedFolder) => {
      if (record !== undefined) recordPlacedModule(record.directory, record.input, { folder: placedFolder, generated });
      return placedFolder;
    });
    return { generated, folder };
  }

  /**
   * The folder of the shipped runtime: as an earlier process placed it for these very files (by their signatures,
   * see `fileSignature`), the interpreter and the modules folder, else read, placed and recorded.
   */
  async #runtimeFolder(modulesRoot: string, python: string): Promise<string> {
    const cacheDirectory = this.#cacheDirectory();
    if (cacheDirectory === undefined) return await materializeModule(modulesRoot, readPythonFiles(RUNTIME_DIR), python);
    const input = JSON.stringify({ runtime: pythonFileSignatures(RUNTIME_DIR), modulesRoot, python });
    const placed = findPlacedFolder(cacheDirectory, modulesRoot, input);
    if (placed !== undefined) return placed;
    const folder = await materializeModule(modulesRoot, readPythonFiles(RUNTIME_DIR), python);
    recordPlacedFolder(cacheDirectory, input, folder);
    return folder;
  }

  async #build(listing: {
    readonly runner: Promise<SandboxRunner>;
    readonly directories: StateDirectories;
    readonly modules: readonly ToolModuleDescriptor[];
    readonly dynamicTools: readonly RegisteredTool[];
    readonly failedSources: readonly { name: string; error: string }[];
  }): Promise<Prepared> {
    const { moduleName, python, variables, network, redactSecrets, approveToolCall } = this.#options;
    const { directories, modules } = listing;
    const [interpreter, runner] = await Promise.all([
      resolvePythonInterpreter(python, { cacheDirectory: this.#cacheDirectory() }),
      listing.runner,
    ]);
    if (interpreter.stdlibModuleNames.includes(moduleName)) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `moduleName "${moduleName}" is a module of Python's standard library and would hide it; choose another name`,
        { moduleName },
      );
    }
    const { workspace, workspaceMount } = this.#options;
    runner.prepareAhead?.({
      interpreter,
      // The module, runtime and command folders are made below, all inside the modules folder.
      readOnlyPaths: [directories.modules],
      runsRoot: directories.runs,
      workspace:
        workspaceMount === 'read-only' || workspaceMount === 'read-write'
          ? { source: workspace, writable: workspaceMount === 'read-write' }
          : undefined,
    });
    const { generated, folder } = await this.#moduleFor(modules, directories.modules, interpreter.executable);
    const [moduleDir, runtimeDir, interpreterCommandsDir] = await Promise.all([
      folder,
      this.#runtimeFolder(directories.modules, interpreter.executable),
      materializeInterpreterCommands(directories.modules, interpreter.executable),
    ]);
    const rootFunctions = generated.functions.filter((fn) => fn.module === moduleName).map((fn) => fn.pythonName);
    return {
      generated,
      failedSources: listing.failedSources,
      toolModules: { tools: this.#staticTools.map((tool) => tool.descriptor), modules },
      hostCacheDirectory: this.#cacheDirectory(),
      environment: {
        interpreter,
        runner,
        tools: createToolRegistry([...this.#staticTools, ...listing.dynamicTools]),
        modulePaths: [moduleDir],
        runtimeDir,
        interpreterCommandsDir,
        workspace: { root: this.#options.workspace, mount: this.#options.workspaceMount },
        runsRoot: directories.runs,
        outputRoot: directories.outputs,
        environmentExtra: variables.extra,
        environmentPassthrough: variables.passthrough,
        network,
        redactSecrets,
        approveToolCall,
        hintContext: {
          moduleName,
          workspace: { root: this.#options.workspace, mount: this.#options.workspaceMount },
          importablePackages: importablePackagesOf(interpreter.siteModuleNames).notable,
          functionNames: rootFunctions,
          submoduleNames: [
            ...new Set(
              generated.functions
                .filter((fn) => fn.module !== moduleName)
                .map((fn) => fn.module.slice(moduleName.length + 1)),
            ),
          ],
        },
      },
    };
  }
}

/** Compiles tools' argument checks one per turn of the event loop (a call of a tool not reached yet compiles its own). */
async function compileOneByOne(tools: readonly RegisteredTool[]): Promise<void> {
  for (const tool of tools) {
    await nextTurn();
    await prepareArgumentValidator(tool.checkArguments);
  }
}
