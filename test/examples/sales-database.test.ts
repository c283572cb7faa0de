import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolvePythonInterpreter } from '../../src/sandbox/interpreter.js';
import { readSalesTruth, SALES_EXAMPLE } from './example-runs.js';

// The analysis example's database: shipped as a file, and reproducible from its seeded generator.
const shippedDatabase = join(SALES_EXAMPLE, 'sales.db');
const generator = join(SALES_EXAMPLE, 'generate_sales_db.py');
const scratch = mkdtempSync(join(tmpdir(), 'codecall-sales-db-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const python = (await resolvePythonInterpreter('python3')).executable;

// The schema and every row with its SQLite type (a text "34.50" is not the real 34.5), read with Python's sqlite3:
// a comparison of contents, not of bytes, which differ between SQLite versions (the header records the version).
const DUMP_SCRIPT = `
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
schema = [row[0] for row in db.execute("SELECT sql FROM sqlite_master ORDER BY name")]
rows = db.execute("SELECT *, typeof(amount) FROM orders ORDER BY id").fetchall()
print(json.dumps({"schema": schema, "rows": rows}))
`;

function dump(path: string): { schema: string[]; rows: unknown[][] } {
  return JSON.parse(execFileSync(python, ['-c', DUMP_SCRIPT, path], { encoding: 'utf8', maxBuffer: 64 << 20 }));
}

/** One value per row of the shipped database, for a query returning one column. */
function column(sql: string): unknown[] {
  const script =
    'import json, sqlite3, sys\nprint(json.dumps([r[0] for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]))';
  return JSON.parse(execFileSync(python, ['-c', script, shippedDatabase, sql], { encoding: 'utf8' }));
}

const truth = readSalesTruth(python);

describe('the analysis example database', () => {
  it('is what its seeded generator makes, row for row and type for type, and small', () => {
    const regenerated = join(scratch, 'sales.db');
    execFileSync(python, [generator, regenerated]);
    const shipped = dump(shippedDatabase);
    expect(shipped.rows).toHaveLength(3150);
    expect(dump(regenerated)).toEqual(shipped);
    expect(statSync(shippedDatabase).size).toBeLessThan(300 * 1024);
  });

  it('is messy the way the example says: case and spacing, three date formats, numbers as text, duplicates', () => {
    const regions = column('SELECT DISTINCT region FROM orders') as string[];
    expect(regions).toHaveLength(48);
    expect(new Set(regions.map((region) => region.trim().toLowerCase()))).toEqual(
      new Set(['north', 'south', 'east', 'west']),
    );
    const products = column('SELECT DISTINCT product FROM orders') as string[];
    expect(new Set(products.map((product) => product.split(/\s+/).filter(Boolean).join(' ').toLowerCase()))).toEqual(
      new Set(['widget', 'gadget', 'gizmo', 'sprocket', 'flux capacitor']),
    );

    const dates = column('SELECT order_date FROM orders') as string[];
    const formats = [/^\d{4}-\d{2}-\d{2}$/, /^\d{2}\/\d{2}\/\d{4}$/, /^\d{2} [A-Z][a-z]{2} \d{4}$/];
    const perFormat = formats.map((format) => dates.filter((date) => format.test(date)).length);
    expect(perFormat.every((count) => count > 300)).toBe(true);
    expect(perFormat.reduce((sum, count) => sum + count, 0)).toBe(dates.length);

    const textAmounts = column("SELECT amount FROM orders WHERE typeof(amount) = 'text'") as string[];
    expect(textAmounts).toHaveLength(622);
    expect(textAmounts.some((amount) => amount.startsWith('$'))).toBe(true);
    expect(textAmounts.some((amount) => amount.includes(','))).toBe(true);
    expect(textAmounts.some((amount) => amount !== amount.trim())).toBe(true);

    // 150 orders exported twice, most copies formatted differently: DISTINCT over the columns does not remove them.
    expect(column('SELECT count(*) - count(DISTINCT order_number) FROM orders')).toEqual([150]);
    expect(
      column(
        'SELECT count(*) FROM (SELECT DISTINCT order_number, order_date, channel, region, product, quantity, amount FROM orders)',
      ),
    ).not.toEqual([3000]);
  });

  it('gives a wrong answer to naive aggregation: duplicates counted, text amounts lost, regions split', () => {
    expect(truth).toMatchObject({ orders: 3000, revenue_cents: 27_411_467 });
    const [naiveCount] = column('SELECT count(*) FROM orders') as number[];
    const [naiveRevenue] = column('SELECT round(sum(amount), 2) FROM orders') as number[];
    expect(naiveCount).toBe(3150);
    expect(naiveCount).not.toBe(truth.orders);
    expect(naiveRevenue).toBe(262_711.35);
    expect(Math.round((naiveRevenue ?? 0) * 100)).not.toBe(truth.revenue_cents);
    // Even after normalising the region in SQL, the duplicates inflate every region's count.
    const northCount = column("SELECT count(*) FROM orders WHERE lower(trim(region)) = 'north'") as number[];
    expect(northCount[0]).toBeGreaterThan(truth.by_region.North?.orders ?? 0);
  });
});
