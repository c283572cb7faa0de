import { describe, expect, it } from 'vitest';
import {
  assignPythonIdentifiers,
  isPythonIdentifier,
  RESERVED_MODULE_NAMES,
  toPythonIdentifier,
} from '../../src/codegen/python-identifiers.js';

describe('toPythonIdentifier', () => {
  it('keeps valid names as they are', () => {
    expect(toPythonIdentifier('read_file', 'function')).toBe('read_file');
    expect(toPythonIdentifier('self', 'parameter')).toBe('self');
    expect(toPythonIdentifier('match', 'parameter')).toBe('match');
    expect(toPythonIdentifier('type', 'parameter')).toBe('type');
  });

  it('appends _ to keywords, including None/True/False/async/await', () => {
    expect(toPythonIdentifier('class', 'function')).toBe('class_');
    expect(toPythonIdentifier('from', 'parameter')).toBe('from_');
    expect(toPythonIdentifier('None', 'parameter')).toBe('None_');
    expect(toPythonIdentifier('True', 'parameter')).toBe('True_');
    expect(toPythonIdentifier('False', 'parameter')).toBe('False_');
    expect(toPythonIdentifier('async', 'function')).toBe('async_');
    expect(toPythonIdentifier('await', 'parameter')).toBe('await_');
    expect(toPythonIdentifier('__debug__', 'parameter')).toBe('__debug___');
    expect(toPythonIdentifier('__peg_parser__', 'parameter')).toBe('__peg_parser___');
  });

  it('turns each run of other characters into one _', () => {
    expect(toPythonIdentifier('max-results', 'parameter')).toBe('max_results');
    expect(toPythonIdentifier('fs.read file', 'function')).toBe('fs_read_file');
    expect(toPythonIdentifier('github/create_issue', 'function')).toBe('github_create_issue');
    expect(toPythonIdentifier('a -- b', 'parameter')).toBe('a_b');
    expect(toPythonIdentifier('read!', 'function')).toBe('read_');
  });

  it('replaces non-ASCII letters', () => {
    expect(toPythonIdentifier('café', 'parameter')).toBe('caf_');
    expect(toPythonIdentifier('naïve_mode', 'parameter')).toBe('na_ve_mode');
    expect(toPythonIdentifier('日本語', 'parameter')).toBe('_');
    expect(toPythonIdentifier('日本語', 'function')).toBe('tool');
  });

  it('prefixes a leading digit with the fallback word', () => {
    expect(toPythonIdentifier('2fa', 'function')).toBe('tool_2fa');
    expect(toPythonIdentifier('2fa', 'parameter')).toBe('arg_2fa');
    expect(toPythonIdentifier('3d', 'module')).toBe('module_3d');
    expect(toPythonIdentifier('-1', 'parameter')).toBe('_1');
    expect(toPythonIdentifier('-1', 'function')).toBe('tool_1');
  });

  it('uses the fallback word for empty names', () => {
    expect(toPythonIdentifier('', 'function')).toBe('tool');
    expect(toPythonIdentifier('', 'parameter')).toBe('arg');
    expect(toPythonIdentifier('', 'module')).toBe('module');
    expect(toPythonIdentifier('---', 'function')).toBe('tool');
  });

  it('removes leading underscores from functions and modules only', () => {
    expect(toPythonIdentifier('_private', 'function')).toBe('private');
    expect(toPythonIdentifier('__init__', 'function')).toBe('init__');
    expect(toPythonIdentifier('_internal', 'module')).toBe('internal');
    expect(toPythonIdentifier('_id', 'parameter')).toBe('_id');
  });

  it('always yields an identifier Python accepts', () => {
    const names = ['', ' ', '0', 'class', '__debug__', 'a b', 'é', '_', '__', '9lives', 'None', 'x'.repeat(200)];
    for (const kind of ['function', 'module', 'parameter'] as const) {
      for (const name of names) expect(isPythonIdentifier(toPythonIdentifier(name, kind))).toBe(true);
    }
  });
});

describe('assignPythonIdentifiers', () => {
  it('suffixes collisions with _2, _3 in input order', () => {
    expect(assignPythonIdentifiers(['a-b', 'a.b', 'a b'], { kind: 'function' })).toEqual(['a_b', 'a_b_2', 'a_b_3']);
  });

  it('lets names that are already valid keep their spelling', () => {
    expect(assignPythonIdentifiers(['max-results', 'max_results'], { kind: 'parameter' })).toEqual([
      'max_results_2',
      'max_results',
    ]);
  });

  it('treats reserved names as taken', () => {
    expect(
      assignPythonIdentifiers(['search_tools', 'ToolError', 'aio', 'retry', 'json_parse', 'shell_quote'], {
        kind: 'function',
        reserved: RESERVED_MODULE_NAMES,
      }),
    ).toEqual(['search_tools_2', 'ToolError_2', 'aio_2', 'retry_2', 'json_parse_2', 'shell_quote_2']);
  });

  it('skips suffixed names that are taken too', () => {
    expect(assignPythonIdentifiers(['a-b', 'a_b', 'a_b_2'], { kind: 'function' })).toEqual(['a_b_3', 'a_b', 'a_b_2']);
  });

  it('compares module names case-insensitively (they are directories)', () => {
    expect(assignPythonIdentifiers(['GitHub', 'github', 'AIO'], { kind: 'module', reserved: ['aio'] })).toEqual([
      'GitHub',
      'github_2',
      'AIO_2',
    ]);
  });

  it('is deterministic', () => {
    const names = ['x', 'x-', 'x_', '1x', 'class', 'class_'];
    expect(assignPythonIdentifiers(names, { kind: 'parameter' })).toEqual(
      assignPythonIdentifiers(names, { kind: 'parameter' }),
    );
    expect(assignPythonIdentifiers(names, { kind: 'parameter' })).toEqual([
      'x',
      'x__2',
      'x_',
      'arg_1x',
      'class__2',
      'class_',
    ]);
  });
});
