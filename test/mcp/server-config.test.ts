import { describe, expect, it } from 'vitest';
import { CodecallError } from '../../src/core/errors.js';
import { isHttpServerConfig, parseMcpServerConfig, parseMcpServers } from '../../src/mcp-client/server-config.js';

function configError(action: () => unknown): CodecallError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(CodecallError);
    expect((error as CodecallError).code).toBe('INVALID_CONFIG');
    return error as CodecallError;
  }
  throw new Error('expected an INVALID_CONFIG error');
}

describe('parseMcpServers', () => {
  it('accepts the stdio and HTTP entries MCP clients use, and leaves disabled ones out', () => {
    const servers = parseMcpServers(
      {
        memory: {
          command: 'npx',
          args: ['-y', '@modelcontextprotocol/server-memory'],
          env: { MEMORY_FILE_PATH: 'm.json' },
        },
        typed: { type: 'stdio', command: 'uvx', args: ['mcp-server-git'], cwd: 'repos' },
        remote: { url: 'https://example.com/mcp', headers: { Authorization: 'Bearer x' } },
        remoteTyped: { type: 'http', url: 'http://127.0.0.1:9000/mcp' },
        off: { command: 'nothing', disabled: true },
      },
      { baseDirectory: '/configs' },
    );
    expect(Object.keys(servers)).toEqual(['memory', 'typed', 'remote', 'remoteTyped']);
    expect(servers.memory).toEqual({
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-memory'],
      env: { MEMORY_FILE_PATH: 'm.json' },
    });
    expect(servers.typed).toMatchObject({ type: 'stdio', cwd: '/configs/repos' });
    expect(servers.remote && isHttpServerConfig(servers.remote)).toBe(true);
    expect(servers.memory && isHttpServerConfig(servers.memory)).toBe(false);
    expect(parseMcpServers(undefined)).toEqual({});
  });

  it('names the server and the key of every mistake', () => {
    const cases: [unknown, RegExp, string | undefined][] = [
      [{ command: '' }, /mcpServers\.s\.command must be a non-empty string/, 'command'],
      [{ command: 'x', args: 'a b' }, /mcpServers\.s\.args must be an array of strings, got string "a b"/, 'args'],
      [{ command: 'x', args: [1] }, /mcpServers\.s\.args must be an array of strings/, 'args'],
      [{ command: 'x', env: { A: 1 } }, /mcpServers\.s\.env\.A must be a string, got number 1/, 'env.A'],
      [{ command: 'x', cwd: 3 }, /mcpServers\.s\.cwd must be a non-empty string/, 'cwd'],
      [{ command: 'x', type: 'http' }, /mcpServers\.s\.type must be "stdio"/, 'type'],
      [{ command: 'x', disabled: 'yes' }, /mcpServers\.s\.disabled must be true or false/, 'disabled'],
      [{ url: 'ftp://example.com' }, /mcpServers\.s\.url must be an http:\/\/ or https:\/\/ URL/, 'url'],
      [
        { url: 'https://example.com', headers: ['a'] },
        /mcpServers\.s\.headers must be an object of strings/,
        'headers',
      ],
      [{ url: 'https://example.com', type: 'sse' }, /deprecated SSE transport/, 'type'],
      [{ command: 'x', url: 'https://example.com' }, /has both "command" \(stdio\) and "url"/, 'url'],
      [{}, /needs "command" \(a stdio server\) or "url"/, undefined],
      ['npx server', /mcpServers\.s must be an object/, undefined],
    ];
    for (const [entry, message, key] of cases) {
      const error = configError(() => parseMcpServerConfig('s', entry));
      expect(error.message).toMatch(/^MCP server "s": /);
      expect(error.message).toMatch(message);
      expect(error.details.server).toBe('s');
      expect(error.details.key).toBe(key);
    }
  });

  it('names an unknown key of a server entry in the wording of every unknown key', () => {
    const stdio = configError(() => parseMcpServerConfig('s', { command: 'x', argz: [] }));
    expect(stdio.message).toBe(
      'unknown key "argz" in mcpServers.s (a stdio server); known keys: type, command, args, env, cwd, disabled, ' +
        'allowedTools, disabledTools, readOnly',
    );
    expect(stdio.details).toMatchObject({ server: 's', key: 'argz' });
    const http = configError(() => parseMcpServerConfig('s', { url: 'https://example.com', env: {} }));
    expect(http.message).toBe(
      'unknown key "env" in mcpServers.s (an HTTP server); known keys: type, url, headers, disabled, allowedTools, ' +
        'disabledTools, readOnly',
    );
    expect(http.details).toMatchObject({ server: 's', key: 'env' });
  });

  it('reads the keys that narrow a server, and names a bad one', () => {
    expect(
      parseMcpServerConfig('s', {
        command: 'x',
        allowedTools: ['a', 'b', 'a'],
        disabledTools: ['b'],
        readOnly: true,
      }),
    ).toEqual({ command: 'x', allowedTools: ['a', 'b'], disabledTools: ['b'], readOnly: true });
    expect(parseMcpServerConfig('s', { url: 'https://example.com/mcp', readOnly: false })).toEqual({
      url: 'https://example.com/mcp',
      readOnly: false,
    });
    expect(configError(() => parseMcpServerConfig('s', { command: 'x', allowedTools: 'a' })).message).toBe(
      'MCP server "s": mcpServers.s.allowedTools must be a list of the server\'s tool names, got string "a"',
    );
    expect(configError(() => parseMcpServerConfig('s', { command: 'x', disabledTools: [''] })).message).toMatch(
      /mcpServers\.s\.disabledTools must be a list of the server's tool names/,
    );
    expect(configError(() => parseMcpServerConfig('s', { url: 'https://e.com', readOnly: 'yes' })).message).toBe(
      'MCP server "s": mcpServers.s.readOnly must be true or false, got string "yes"',
    );
  });

  it('refuses a map that is not an object and server names that cannot be module names', () => {
    expect(configError(() => parseMcpServers([])).message).toMatch(/mcpServers must be an object/);
    expect(configError(() => parseMcpServers({ '': { command: 'x' } })).message).toMatch(/must not be empty/);
    expect(configError(() => parseMcpServers({ 'a/b': { command: 'x' } })).message).toMatch(/must not contain "\/"/);
  });
});
