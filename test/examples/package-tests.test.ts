import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_EXAMPLE, runCli } from './example-runs.js';

// The testing example end to end, as the README runs it: the script a model writes from SPEC.md imports the package
// from the workspace (a throwaway copy) and reports which features are broken. The expected text is what the model
// reads back; the README quotes it.
const scratch = mkdtempSync(join(tmpdir(), 'codecall-package-tests-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const REPORT = `ok    1. parsing amounts: 4 checks
ok    2. line totals: 3 checks
FAIL  3. discounts: 1 of 4 checks failed
      apply_discount(Decimal('0.25'), 50) returned Decimal('0.12'), expected Decimal('0.13')
ok    4. tax: 2 checks
FAIL  5. splitting: 2 of 3 checks failed
      split_evenly(Decimal('10.00'), 3) returned [Decimal('3.33'), Decimal('3.33'), Decimal('3.33')], expected [Decimal('3.34'), Decimal('3.33'), Decimal('3.33')]
      split_evenly(Decimal('0.05'), 2) returned [Decimal('0.02'), Decimal('0.02')], expected [Decimal('0.03'), Decimal('0.02')]
ok    6. formatting: 2 checks

2 of 6 features broken: 3. discounts, 5. splitting
`;

// The two functions as SPEC.md asks: with them the same script must find nothing broken, so its checks are right.
const FIXED_FUNCTIONS = `

def apply_discount(amount, percent):
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be between 0 and 100, got {percent}")
    return to_cents(amount * (100 - Decimal(percent)) / 100)


def split_evenly(amount, parts):
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    cents = int(to_cents(amount) / CENT)
    share, extra = divmod(cents, parts)
    return [(share + (1 if index < extra else 0)) * CENT for index in range(parts)]
`;

describe('the testing example (npm run example:testing)', () => {
  it('reports the two broken features, with the calls that show it', async () => {
    const result = await runCli([
      'run',
      join(PACKAGE_EXAMPLE, 'check_spec.py'),
      '--config',
      join(PACKAGE_EXAMPLE, 'codecall.json'),
    ]);
    expect(result.stdout).toBe(REPORT);
    expect(result.status).toBe(0);
  }, 120_000);

  it('finds nothing broken once the two functions follow the spec', async () => {
    const copy = join(scratch, 'package-tests');
    cpSync(PACKAGE_EXAMPLE, copy, { recursive: true });
    const pricing = join(copy, 'invoices', 'pricing.py');
    writeFileSync(pricing, readFileSync(pricing, 'utf8') + FIXED_FUNCTIONS);
    const result = await runCli(['run', join(copy, 'check_spec.py'), '--config', join(copy, 'codecall.json')]);
    expect(result.stdout).toBe(
      [
        'ok    1. parsing amounts: 4 checks',
        'ok    2. line totals: 3 checks',
        'ok    3. discounts: 4 checks',
        'ok    4. tax: 2 checks',
        'ok    5. splitting: 3 checks',
        'ok    6. formatting: 2 checks',
        '',
        '0 of 6 features broken: none',
        '',
      ].join('\n'),
    );
  }, 120_000);
});
