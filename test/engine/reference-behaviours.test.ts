import { describe, expect, it } from 'vitest';
import { useCodecalls } from '../support/codecall-fixture.js';
import { add } from '../support/sample-tools.js';

const codecallWith = useCodecalls();

describe('empty code', () => {
  const codecall = codecallWith({ tools: [add] });

  it.each(['', '   ', '\n\t\n'])('answers %j with an error that says the code is empty, not success', async (code) => {
    const result = await codecall.execute(code);
    expect(result).toMatchObject({ status: 'error', toolCalls: 0, stdout: '', isolation: 'none' });
    expect(result.error).toEqual({ type: 'EmptyCode', message: 'The code is empty: nothing ran.' });
    expect(result.hint).toContain('complete Python script');
  });

  it('answers an empty cell of a session the same way, and the session goes on', async () => {
    const session = codecall.session();
    try {
      expect((await session.execute('x = 41')).status).toBe('success');
      expect(await session.execute(' \n')).toMatchObject({ status: 'error', error: { type: 'EmptyCode' } });
      expect((await session.execute('print(x + 1)')).stdout).toBe('42\n');
    } finally {
      await session.close();
    }
  });
});

describe('helpers', () => {
  const codecall = codecallWith({ tools: [add] });

  it('json_parse accepts control characters inside strings and a leading byte-order mark', async () => {
    const result = await codecall.execute(
      [
        'from tools import json_parse',
        'print(json_parse(\'{"a": "line\\nbreak\\ttab"}\') == {"a": "line\\nbreak\\ttab"})',
        'print(json_parse("\\ufeff[1, 2]"), json_parse(b"\\xef\\xbb\\xbf{\\"b\\": 1}"))',
        'print(json_parse("not json", default="fallback"), json_parse({"already": 1}))',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe("True\n[1, 2] {'b': 1}\nfallback {'already': 1}\n");
  });

  it('retry takes max_attempts and delay, and retries any exception by default', async () => {
    const result = await codecall.execute(
      [
        'from tools import retry',
        'calls = []',
        'def flaky(value):',
        '    calls.append(value)',
        '    if len(calls) < 3:',
        '        raise KeyError("not yet")',
        '    return value * 2',
        'print(retry(flaky, 21, max_attempts=3, delay=0), len(calls))',
        'def always():',
        '    calls.append(0)',
        '    raise ValueError("still broken")',
        'calls.clear()',
        'try:',
        '    retry(always, max_attempts=2, delay=0)',
        'except ValueError as error:',
        '    print("gave up:", error, len(calls))',
        'calls.clear()',
        'try:',
        '    retry(always, max_attempts=5, delay=0, exceptions=(KeyError,))',
        'except ValueError:',
        '    print("not retried:", len(calls))',
      ].join('\n'),
    );
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('42 3\ngave up: still broken 2\nnot retried: 1\n');
  });
});
