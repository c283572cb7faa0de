import { createRequire } from 'node:module';

// package.json sits two levels above both src/mcp/ and dist/mcp/, so one relative path serves both.
const packageJson: unknown = createRequire(import.meta.url)('../../package.json');

/** codecall's version, reported as the MCP client and server version. */
export const CODECALL_VERSION: string =
  typeof packageJson === 'object' &&
  packageJson !== null &&
  'version' in packageJson &&
  typeof packageJson.version === 'string'
    ? packageJson.version
    : '0.0.0';
