import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Completed, runToCompletion } from '../support/completed-process.js';

/** Root of the repository: the examples are run from it, as the README's npm scripts do. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The built command line (`npm test` builds first). */
export const CLI_PATH = join(REPOSITORY_ROOT, 'dist', 'cli', 'main.js');
/** The analysis example's folder. */
export const SALES_EXAMPLE = join(REPOSITORY_ROOT, 'examples', 'sales-analysis');
/** The testing example's folder. */
export const PACKAGE_EXAMPLE = join(REPOSITORY_ROOT, 'examples', 'package-tests');
/** The interpreter the analysis example's codecall.json names (Debian's, which has python3-matplotlib). */
export const SYSTEM_PYTHON = '/usr/bin/python3';

/** Why the analysis example cannot run here at all, or undefined when its interpreter exists. */
export function systemPythonMissing(): string | undefined {
  return existsSync(SYSTEM_PYTHON) ? undefined : `${SYSTEM_PYTHON} (named in its codecall.json) does not exist`;
}

/** Whether the analysis example's interpreter imports matplotlib (without it, the example says it drew no chart). */
export function systemPythonHasMatplotlib(): boolean {
  return spawnSync(SYSTEM_PYTHON, ['-c', 'import matplotlib'], { stdio: 'ignore' }).status === 0;
}

/** A state folder of the test file's own (removed after it), so runs leave nothing in the machine's default one. */
export const STATE_TMPDIR = mkdtempSync(join(tmpdir(), 'codecall-examples-'));

/** Runs `node dist/cli/main.js ...args` from the repository root, as `npm run example:*` does. */
export function runCli(args: readonly string[]): Promise<Completed> {
  return runToCompletion(process.execPath, [CLI_PATH, ...args], {
    cwd: REPOSITORY_ROOT,
    env: { ...process.env, TMPDIR: STATE_TMPDIR },
  });
}

/** The figures the analysis example's generator made before it spoiled the export (its `--truth`). */
export interface SalesTruth {
  readonly orders: number;
  readonly revenue_cents: number;
  readonly by_region: Record<string, { readonly orders: number; readonly revenue_cents: number }>;
  readonly by_month_cents: Record<string, number>;
}

/** Runs the generator with `--truth` under `python`. */
export function readSalesTruth(python: string): SalesTruth {
  const generator = join(SALES_EXAMPLE, 'generate_sales_db.py');
  return JSON.parse(execFileSync(python, [generator, '--truth'], { encoding: 'utf8' })) as SalesTruth;
}
