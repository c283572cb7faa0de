import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_LISTED_FUNCTIONS,
  describeExecuteCodeTool,
  EXECUTE_CODE_TOOL_NAME,
  executeCodeInputSchema,
  UNSANDBOXED_NOTE,
} from '../../src/codegen/execute-code-description.js';
import { generatePythonModule } from '../../src/codegen/python-module.js';
import { resolveLimits } from '../../src/core/limits.js';

const OVERVIEW =
  'Runs a Python 3 script and returns what it prints. Import the tools as functions from `tools` ' +
  '(`from tools import read_file`); each call runs the tool and returns its result as a parsed value ' +
  '(dict, list, str, ...). Only printed output comes back to you, so do the work in the script (loops, filtering, ' +
  'combining results) and print just what you need. A failing tool raises `tools.ToolError`. For parallel calls, ' +
  '`await asyncio.gather(...)` over the same functions in `tools.aio`. Helpers in `tools`: ' +
  '`json_parse(text, default=None)` (lenient JSON), `shell_quote(value)`, `retry(fn, *args, max_attempts=3, ' +
  'delay=1.0)` (retries on any exception) and `search_tools(query)`. To return a file or a chart, call ' +
  '`tools.save_artifact(name, data)` (bytes or str); matplotlib figures left open and images saved in the working ' +
  'directory come back as files too. Only the Python standard library is available.';

const generated = generatePythonModule({
  moduleName: 'tools',
  tools: [
    {
      name: 'read_file',
      description: 'Read a text file. Returns its content.',
      inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      outputSchema: { type: 'object', properties: { content: { type: 'string' } } },
    },
    { name: 'ping', description: '', inputSchema: { type: 'object' } },
  ],
  modules: [
    {
      name: 'github',
      tools: [
        {
          name: 'github/create_issue',
          description: 'Create an issue.',
          inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
        },
      ],
    },
  ],
});

describe('describeExecuteCodeTool', () => {
  it('lists a few functions by module, with the default limits and the sandbox', () => {
    expect(
      describeExecuteCodeTool({
        moduleName: 'tools',
        functions: generated.functions,
        limits: resolveLimits(undefined),
        isolation: 'bubblewrap',
        network: false,
      }),
    ).toBe(`${OVERVIEW}

Functions in \`tools\` (\`from tools import ...\`):
- read_file(path: str) -> dict — Read a text file.
- ping() -> Any

Functions in \`tools.github\` (\`from tools.github import ...\`):
- create_issue(title: str) -> Any — Create an issue.

Limits: the script is stopped after 300 seconds and may make at most 1,000 tool calls; one tool call may take up to 60 seconds. You see at most 50,000 bytes of output (the beginning and the end of longer output), so print summaries, not raw data. Error messages and tracebacks are cut to 10,000 bytes. Files the script writes (working directory, TMPDIR and /tmp together) may take 512 MiB; past that, writes fail with OSError "No space left on device".

The script runs in a sandbox with a private working directory; reach files and services outside it through the tools. It has no network access.`);
  });

  it('lists modules with counts and points to search_tools when there are many functions', () => {
    expect(
      describeExecuteCodeTool({
        moduleName: 'tools',
        functions: generated.functions,
        limits: resolveLimits({
          timeoutMs: 1_500,
          maxToolCalls: 1,
          toolCallTimeoutMs: 1_000,
          maxStdoutBytes: 1_234_567,
        }),
        maxListedFunctions: 2,
      }),
    ).toBe(`${OVERVIEW}

There are 3 functions, too many to list here:
- \`tools\`: 2 functions
- \`tools.github\`: 1 function
Find the ones you need with \`print(tools.search_tools("what you want to do"))\` (name, signature and description of the best matches) and read one's arguments with \`help(tools.<function>)\`.

Limits: the script is stopped after 1.5 seconds and may make at most 1 tool call; one tool call may take up to 1 second. You see at most 1,234,567 bytes of output (the beginning and the end of longer output), so print summaries, not raw data. Error messages and tracebacks are cut to 10,000 bytes.`);
  });

  it('states the disk limit where it holds (bubblewrap) and only there', () => {
    const limits = resolveLimits({ maxDiskBytes: 64 * 1024 * 1024 });
    const described = (isolation: 'bubblewrap' | 'none' | 'auto') =>
      describeExecuteCodeTool({ moduleName: 'tools', functions: generated.functions, limits, isolation });
    expect(described('bubblewrap')).toContain(
      'Files the script writes (working directory, TMPDIR and /tmp together) may take 64 MiB; past that, writes fail',
    );
    expect(described('none')).not.toContain('Files the script writes');
    expect(described('auto')).not.toContain('Files the script writes');
  });

  it('switches to the module list above 40 functions by default', () => {
    const many = generatePythonModule({
      moduleName: 'hermes_tools',
      tools: Array.from({ length: DEFAULT_MAX_LISTED_FUNCTIONS + 1 }, (_, index) => ({
        name: `tool_${index}`,
        description: `Tool ${index}.`,
        inputSchema: { type: 'object' },
      })),
    });
    const limits = resolveLimits(undefined);
    const text = describeExecuteCodeTool({ moduleName: 'hermes_tools', functions: many.functions, limits });
    expect(text).toContain('There are 41 functions, too many to list here:\n- `hermes_tools`: 41 functions\n');
    expect(text).toContain('`print(hermes_tools.search_tools("what you want to do"))`');
    const few = describeExecuteCodeTool({
      moduleName: 'hermes_tools',
      functions: many.functions.slice(0, DEFAULT_MAX_LISTED_FUNCTIONS),
      limits,
    });
    expect(few).toContain('- tool_39() -> Any — Tool 39.');
  });

  it('names the tool sources that failed to load, with their error on one line', () => {
    const text = describeExecuteCodeTool({
      moduleName: 'tools',
      functions: [],
      limits: resolveLimits(undefined),
      isolation: 'auto',
      failedSources: [
        { name: 'slack', error: 'spawn npx ENOENT\n    at ChildProcess' },
        { name: 'jira', error: '' },
      ],
    });
    expect(text.split('\n\n').slice(1)).toEqual([
      '`tools` has no functions at the moment.',
      'Limits: the script is stopped after 300 seconds and may make at most 1,000 tool calls; one tool call may ' +
        'take up to 60 seconds. You see at most 50,000 bytes of output (the beginning and the end of longer ' +
        'output), so print summaries, not raw data. Error messages and tracebacks are cut to 10,000 bytes.',
      'The script may run in a sandbox; reach files and services outside it through the tools.',
      'These tool sources failed to load, so their functions are missing:\n' +
        '- slack: spawn npx ENOENT at ChildProcess\n' +
        '- jira: unknown error',
    ]);
    expect(text).toContain('(`from tools import <function>`)');
  });

  it('says nothing about isolation when none is given or it is none', () => {
    const limits = resolveLimits(undefined);
    const plain = describeExecuteCodeTool({ moduleName: 'tools', functions: [], limits });
    expect(describeExecuteCodeTool({ moduleName: 'tools', functions: [], limits, isolation: 'none' })).toBe(plain);
    expect(plain).not.toContain('sandbox');
  });

  it('warns the model when the runs have no sandbox although one was asked for', () => {
    const limits = resolveLimits(undefined);
    const plain = describeExecuteCodeTool({ moduleName: 'tools', functions: [], limits, isolation: 'none' });
    const warned = describeExecuteCodeTool({
      moduleName: 'tools',
      functions: [],
      limits,
      isolation: 'none',
      isolationWarning: 'NO SANDBOX: bubblewrap is not usable here (bwrap is not installed)',
    });
    expect(warned.startsWith(plain)).toBe(true);
    expect(warned.split('\n\n').at(-1)).toBe(UNSANDBOXED_NOTE);
    expect(UNSANDBOXED_NOTE).toContain('no sandbox');
  });
});

describe('what the script can import', () => {
  const describeWith = (importable: { notable: string[]; others: number } | undefined) =>
    describeExecuteCodeTool({ moduleName: 'tools', functions: [], limits: resolveLimits(undefined), importable });

  it('names the notable packages and counts the others instead of "standard library only"', () => {
    const text = describeWith({ notable: ['numpy', 'matplotlib'], others: 12 });
    expect(text).toContain('Installed besides the Python standard library: numpy, matplotlib and 12 other modules.');
    expect(text).not.toContain('Only the Python standard library');
    expect(describeWith({ notable: [], others: 1 })).toContain(
      'Installed besides the Python standard library: 1 other module.',
    );
  });

  it('says standard library only when nothing else is installed or nothing was probed', () => {
    expect(describeWith({ notable: [], others: 0 })).toContain('Only the Python standard library is available.');
    expect(describeWith(undefined)).toContain('Only the Python standard library is available.');
  });
});

describe('the execute_code tool definition', () => {
  it('is named execute_code and takes one required string, code', () => {
    expect(EXECUTE_CODE_TOOL_NAME).toBe('execute_code');
    expect(executeCodeInputSchema).toEqual({
      type: 'object',
      properties: {
        code: {
          type: 'string',
          description:
            'A complete Python 3 script. Import the tools as functions from the generated module and print only ' +
            'the results you need: what the script prints is all that comes back.',
        },
      },
      required: ['code'],
      additionalProperties: false,
    });
    expect(Object.isFrozen(executeCodeInputSchema.properties.code)).toBe(true);
  });
});
