import { describe, expect, it } from 'vitest';
import { MAX_SUMMARY_LENGTH, shortenText, summarizeDescription } from '../../src/codegen/description-summary.js';

describe('summarizeDescription', () => {
  it('takes the first sentence', () => {
    expect(summarizeDescription('Read a file. Returns its content.')).toBe('Read a file.');
    expect(summarizeDescription('Is it there? Checks a path.')).toBe('Is it there?');
  });

  it('does not end a sentence at abbreviations followed by lowercase words', () => {
    expect(summarizeDescription('Search things, e.g. issues or pulls. More here.')).toBe(
      'Search things, e.g. issues or pulls.',
    );
  });

  it('stays inside the first paragraph and collapses whitespace', () => {
    expect(summarizeDescription('  List open\n  issues\n\nArgs:\n  repo: the repository')).toBe('List open issues');
  });

  it('cuts long sentences at a word boundary', () => {
    const long = `${'word '.repeat(40)}end.`;
    const summary = summarizeDescription(long);
    expect(summary.length).toBeLessThanOrEqual(MAX_SUMMARY_LENGTH);
    expect(summary).toBe(`${'word '.repeat(22)}word...`);
  });

  it('is empty for an empty description', () => {
    expect(summarizeDescription('')).toBe('');
    expect(summarizeDescription('   \n ')).toBe('');
  });
});

describe('shortenText', () => {
  it('cuts a word without spaces hard', () => {
    expect(shortenText('x'.repeat(20), 10)).toBe('xxxxxxx...');
  });

  it('never ends on half a surrogate pair', () => {
    expect(shortenText(`${'x'.repeat(6)}😀😀😀`, 10)).toBe('xxxxxx...');
  });
});
