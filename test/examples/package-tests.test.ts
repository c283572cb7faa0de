import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_EXAMPLE, runCli, STATE_TMPDIR } from './example-runs.js';
import { REPORT } from './expected-output.js';

// The testing example end to end, as the README runs it: the script a model writes from SPEC.md imports the package
// from the workspace (a throwaway copy) and reports which features are broken. The expected text is what the model
// reads back; the README quotes it.
const scratch = mkdtempSync(join(tmpdir(), 'codecall-package-tests-'));
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  rmSync(STATE_TMPDIR, { recursive: true, force: true });
});

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
