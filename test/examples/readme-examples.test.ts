import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_EXAMPLE, REPOSITORY_ROOT, SALES_EXAMPLE } from './example-runs.js';
import { CHART_LINES, EXPLORE_OUTPUT, REPORT, SUMMARY } from './expected-output.js';

// The README shows the model's-eye view of the examples: the exact scripts and the exact texts the end-to-end tests
// assert. This keeps the two from drifting apart.
const readme = readFileSync(join(REPOSITORY_ROOT, 'README.md'), 'utf8');
const packageScripts = (
  JSON.parse(readFileSync(join(REPOSITORY_ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** The contents of the README's fenced blocks of `language` (empty: blocks without a language), fences paired. */
function fencedBlocks(language: string): string[] {
  const blocks: string[] = [];
  let open: { language: string; lines: string[] } | undefined;
  for (const line of readme.split('\n')) {
    const fence = /^```(\S*)$/.exec(line);
    if (open === undefined) {
      if (fence) open = { language: fence[1] ?? '', lines: [] };
    } else if (line === '```') {
      if (open.language === language) blocks.push(`${open.lines.join('\n')}\n`);
      open = undefined;
    } else {
      open.lines.push(line);
    }
  }
  return blocks;
}

describe('the README section of the worked examples', () => {
  it('quotes each example script as it is in examples/', () => {
    const python = fencedBlocks('python');
    for (const script of [
      join(SALES_EXAMPLE, 'explore.py'),
      join(SALES_EXAMPLE, 'analyse.py'),
      join(PACKAGE_EXAMPLE, 'check_spec.py'),
    ]) {
      expect(python, script).toContain(readFileSync(script, 'utf8'));
    }
    const json = fencedBlocks('json');
    for (const config of [join(SALES_EXAMPLE, 'codecall.json'), join(PACKAGE_EXAMPLE, 'codecall.json')]) {
      expect(json, config).toContain(readFileSync(config, 'utf8'));
    }
  });

  it('quotes the texts the tests assert', () => {
    const plain = fencedBlocks('');
    expect(plain).toContain(EXPLORE_OUTPUT);
    expect(plain).toContain(REPORT);
    const analysis = plain.find((block) => block.startsWith(SUMMARY));
    expect(analysis?.slice(SUMMARY.length)).toMatch(CHART_LINES);
  });

  it('names npm scripts that run the scripts it quotes', () => {
    expect(packageScripts['example:analysis']).toBe(
      'node dist/cli/main.js run examples/sales-analysis/analyse.py --config examples/sales-analysis/codecall.json',
    );
    expect(packageScripts['example:testing']).toBe(
      'node dist/cli/main.js run examples/package-tests/check_spec.py --config examples/package-tests/codecall.json',
    );
    expect(readme).toContain('npm run example:analysis');
    expect(readme).toContain('npm run example:testing');
  });
});
