/**
 * How the `codecall` command's bundle imports a package or a module file. The command runs as a plain script (see
 * src/cli/main.ts), where `import()` would go through vm's main-context loader, which Node 20 calls experimental and
 * warns about on stderr; the command hands the bundle an importer of its own instead. Undefined everywhere else.
 */
declare const __codecallImport: ((specifier: string) => Promise<unknown>) | undefined;

/** Imports a package (resolved from this package's node_modules) or a module by file URL, on demand. */
export function importModule<Module>(specifier: string): Promise<Module> {
  return (typeof __codecallImport === 'function' ? __codecallImport(specifier) : import(specifier)) as Promise<Module>;
}
