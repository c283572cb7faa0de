/**
 * Third-party packages worth naming to the model when installed (data, charts, documents, the web, testing), in the
 * order they are named.
 */
export const NOTABLE_PACKAGES: readonly string[] = Object.freeze([
  'numpy',
  'pandas',
  'polars',
  'scipy',
  'matplotlib',
  'seaborn',
  'plotly',
  'sklearn',
  'statsmodels',
  'sympy',
  'networkx',
  'PIL',
  'requests',
  'httpx',
  'bs4',
  'lxml',
  'yaml',
  'openpyxl',
  'docx',
  'pypdf',
  'sqlalchemy',
  'duckdb',
  'pyarrow',
  'jinja2',
  'pytest',
  'hypothesis',
  'torch',
]);

/** Most notable packages named; the rest are counted. */
export const MAX_NAMED_PACKAGES = 15;

/** What the script can import besides the standard library: notable packages by name, the others counted. */
export interface ImportablePackages {
  readonly notable: readonly string[];
  readonly others: number;
}

/** Sorts the interpreter's site modules into notable ones (at most {@link MAX_NAMED_PACKAGES}) and a count of the rest. */
export function importablePackagesOf(siteModuleNames: readonly string[]): ImportablePackages {
  const present = new Set(siteModuleNames);
  const notable = NOTABLE_PACKAGES.filter((name) => present.has(name)).slice(0, MAX_NAMED_PACKAGES);
  return { notable, others: siteModuleNames.length - notable.length };
}
