import { describe, expect, it } from 'vitest';
import { checkKnownKeys, knownKeys } from '../../src/core/option-checks.js';
import { CODECALL_OPTION_NAMES, type CodecallOptions } from '../../src/engine/codecall.js';
import { captureError } from '../support/capture-error.js';

interface SampleOptions {
  readonly size?: number;
  readonly name?: string;
}

describe('checkKnownKeys', () => {
  const known = knownKeys<keyof SampleOptions>({ size: true, name: true });

  it('accepts an object of known keys only', () => {
    expect(() => checkKnownKeys({ size: 1 }, 'sample', known)).not.toThrow();
    expect(() => checkKnownKeys({}, 'sample', known)).not.toThrow();
  });

  it('names the unknown key, where it is and the known keys, in one wording', () => {
    const error = captureError(() => checkKnownKeys({ size: 1, colour: 'blue' }, 'sample', known, { file: 'x' }));
    expect(error.code).toBe('INVALID_CONFIG');
    expect(error.message).toBe('unknown key "colour" in sample; known keys: size, name');
    expect(error.details).toEqual({ file: 'x', key: 'colour', where: 'sample', knownKeys: ['size', 'name'] });
  });

  it('takes only own keys as known, not inherited ones', () => {
    const error = captureError(() => checkKnownKeys(JSON.parse('{"constructor": 1}'), 'sample', known));
    expect(error.details.key).toBe('constructor');
  });
});

describe('knownKeys', () => {
  it('keeps the order the keys are written in', () => {
    expect([...knownKeys<'b' | 'a'>({ b: true, a: true })]).toEqual(['b', 'a']);
  });

  it('is checked against the options type by the compiler, both ways', () => {
    // @ts-expect-error a key of the type is missing from the list
    knownKeys<keyof SampleOptions>({ size: true });
    // @ts-expect-error the list names a key the type does not have
    knownKeys<keyof SampleOptions>({ size: true, name: true, colour: true });
    const names: ReadonlySet<keyof CodecallOptions> = CODECALL_OPTION_NAMES;
    expect(names.has('env')).toBe(true);
  });
});
