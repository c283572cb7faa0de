import { readFileSync } from 'node:fs';

// package.json sits two levels above both src/core/ and dist/core/ (and dist/cli/, where the command's bundle stands),
// so one relative path serves all.
const PACKAGE_JSON = new URL('../../package.json', import.meta.url);

let version: string | undefined;

/**
 * codecall's version, reported as the MCP client and server version and as the tracer's; read on first use, not when
 * the module loads (a `codecall run` without tracing never reads package.json).
 */
export function codecallVersion(): string {
  if (version !== undefined) return version;
  let packageJson: unknown;
  try {
    packageJson = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8'));
  } catch {
    packageJson = undefined;
  }
  version =
    typeof packageJson === 'object' &&
    packageJson !== null &&
    'version' in packageJson &&
    typeof packageJson.version === 'string'
      ? packageJson.version
      : '0.0.0';
  return version;
}
