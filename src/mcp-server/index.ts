/**
 * `codecall/mcp`: MCP both ways. Upstream MCP servers become tool sources (`tools.<server>` in scripts), and
 * codecall serves `execute_code` to MCP clients over stdio or Streamable HTTP. Loaded only by those who use MCP, so
 * the root entry never pulls in the MCP SDK.
 */

export type {
  McpHttpServerConfig,
  McpServerConfig,
  McpStdioServerConfig,
  ParseMcpServersOptions,
} from '../mcp-client/server-config.js';
export { isHttpServerConfig, parseMcpServerConfig, parseMcpServers } from '../mcp-client/server-config.js';
export type { SavedContentFile } from '../mcp-client/upstream-result.js';
export {
  createMcpToolSource,
  MCP_CALL_TIMEOUT_MS,
  MCP_CONNECT_TIMEOUT_MS,
  MCP_FAILED_START_RETRY_DELAY_MS,
  MCP_MAX_TOOL_LIST_PAGES,
  MCP_STDERR_TAIL_CHARACTERS,
} from '../mcp-client/upstream-tool-source.js';
export type { ExecuteCodeHost, ServeStdioOptions, StdioExecuteCodeServer } from './execute-code-server.js';
export {
  createExecuteCodeServer,
  MAX_IMAGE_CONTENT_BYTES,
  MAX_IMAGE_CONTENTS,
  serveStdio,
  toCallToolResult,
} from './execute-code-server.js';
export { checkHttpToken, generateHttpToken, MIN_HTTP_TOKEN_LENGTH } from './http-access.js';
export type { HttpExecuteCodeServer, HttpSessionLimits, ServeHttpOptions } from './streamable-http-server.js';
export {
  DEFAULT_HTTP_HOST,
  HTTP_SESSION_IDLE_TIMEOUT_MS,
  HTTP_UNUSED_SESSION_TIMEOUT_MS,
  MAX_HTTP_REQUEST_BYTES,
  MAX_HTTP_SESSIONS,
  MAX_HTTP_SESSIONS_PER_CLIENT,
  MCP_HTTP_PATH,
  serveHttp,
} from './streamable-http-server.js';
export { UNIX_SOCKET_MODE } from './unix-socket.js';
