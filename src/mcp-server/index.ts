/**
 * `codecall/mcp`: MCP both ways. Upstream MCP servers become tool sources (`tools.<server>` in scripts), and
 * codecall serves `execute_code` to MCP clients over stdio or Streamable HTTP. Loaded only by those who use MCP, so
 * the root entry never pulls in the MCP SDK.
 */

export type { McpServerConfig } from '../mcp-client/server-config.js';
export { parseMcpServers } from '../mcp-client/server-config.js';
export { createMcpToolSource } from '../mcp-client/upstream-tool-source.js';
export type { ExecuteCodeServerOptions, ServeStdioOptions, StdioExecuteCodeServer } from './execute-code-server.js';
export { createExecuteCodeServer, serveStdio } from './execute-code-server.js';
export type { HttpExecuteCodeServer, HttpSessionLimits, ServeHttpOptions } from './streamable-http-server.js';
export { serveHttp } from './streamable-http-server.js';
