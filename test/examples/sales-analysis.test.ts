import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import {
  CLI_PATH,
  readSalesTruth,
  runCli,
  SALES_EXAMPLE,
  STATE_TMPDIR,
  SYSTEM_PYTHON,
  systemPythonHasMatplotlib,
  systemPythonMissing,
} from './example-runs.js';

// The analysis example end to end, as the README runs it: the real command line from dist/, the shipped database,
// Debian's python3 with matplotlib. The expected texts are what the model reads back; the README quotes them.
const config = join(SALES_EXAMPLE, 'codecall.json');
const missingReason = systemPythonMissing();
const hasMatplotlib = missingReason === undefined && systemPythonHasMatplotlib();
if (missingReason !== undefined) console.warn(`[examples] analysis example skipped: ${missingReason}`);
else if (!hasMatplotlib) console.warn(`[examples] ${SYSTEM_PYTHON} has no matplotlib: checking the chartless output`);

const EXPLORE_OUTPUT = `{'id': 'INTEGER', 'order_number': 'TEXT', 'order_date': 'TEXT', 'channel': 'TEXT', 'region': 'TEXT', 'product': 'TEXT', 'quantity': 'INTEGER', 'amount': ''}
[{'rows': 3150, 'orders': 3000, 'revenue': 262711.35}]
{'id': 1, 'order_number': 'SO-10001', 'order_date': '2024-01-01', 'channel': 'web', 'region': 'east', 'product': 'Sprocket', 'quantity': 1, 'amount': 7.8}
{'id': 2, 'order_number': 'SO-10002', 'order_date': '01/01/2024', 'channel': 'store', 'region': 'North', 'product': 'Widget', 'quantity': 2, 'amount': 39.98}
{'id': 3, 'order_number': 'SO-10003', 'order_date': '01/01/2024', 'channel': 'store', 'region': 'North', 'product': 'GADGET', 'quantity': 1, 'amount': '34.50'}
{'id': 4, 'order_number': 'SO-10004', 'order_date': '01 Jan 2024', 'channel': 'phone', 'region': ' South', 'product': 'Flux Capacitor', 'quantity': 5, 'amount': 645}
[{'type': 'real', 'rows': 2528}, {'type': 'text', 'rows': 622}]
48 spellings of region, e.g. ['  EAST  ', '  East  ', '  NORTH  ', '  North  ', '  SOUTH  ', '  South  ', '  WEST  ', '  West  ']
`;

const SUMMARY = `3,150 rows, 150 duplicates dropped: 3,000 orders
cleaned: 48 spellings of 4 regions, 3 date formats, 622 amounts stored as text

region    orders       revenue   share
North        983     86,896.98     32%
East         774     70,892.24     26%
South        679     60,462.96     22%
West         564     55,862.49     20%
total      3,000    274,114.67

best month 2024-12: 39,007.96; weakest 2024-02: 12,371.45
second half vs first half: +28%
`;
/** The chart's line: its size depends on matplotlib's version, so the size is a pattern. */
const CHART_LINES = /^chart: revenue-by-month\.png\n\[artifact\] revenue-by-month\.png \(image\/png, \d+\.\d KiB\)\n$/;
const NO_CHART_LINE = 'no chart: matplotlib is not installed for this interpreter\n';

describe.skipIf(missingReason !== undefined)('the analysis example (npm run example:analysis)', () => {
  it('shows the model the mess on a first look', async () => {
    const result = await runCli(['run', join(SALES_EXAMPLE, 'explore.py'), '--config', config]);
    expect(result.stdout).toBe(EXPLORE_OUTPUT);
    expect(result.status).toBe(0);
  }, 120_000);

  it('cleans, summarises and charts: the summary the model gets back', async () => {
    const result = await runCli(['run', join(SALES_EXAMPLE, 'analyse.py'), '--config', config]);
    expect(result.stdout.startsWith(SUMMARY), result.stdout + result.stderr).toBe(true);
    const rest = result.stdout.slice(SUMMARY.length);
    if (hasMatplotlib) expect(rest).toMatch(CHART_LINES);
    else expect(rest).toBe(NO_CHART_LINE);
    expect(result.status).toBe(0);
  }, 120_000);

  it('finds exactly the figures the generator made before it spoiled the export', async () => {
    // SUMMARY is what the test above saw the script print.
    const truth = readSalesTruth(SYSTEM_PYTHON);
    const cents = (text: string) => Number(text.replaceAll(',', '').replace('.', ''));
    const table = SUMMARY.split('\n').filter((line) => /^(North|South|East|West) /.test(line));
    const printed = Object.fromEntries(
      table.map((line) => {
        const [region = '', orders = '', revenue = ''] = line.split(/\s+/);
        return [region, { orders: Number(orders), revenue_cents: cents(revenue) }];
      }),
    );
    expect(printed).toEqual(truth.by_region);
    expect(SUMMARY).toContain(`total      3,000    ${(truth.revenue_cents / 100).toLocaleString('en-US')}`);
  });

  it.skipIf(!hasMatplotlib)(
    'returns the chart as image content to an MCP client of codecall serve',
    async () => {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [CLI_PATH, 'serve', '--config', config, '--allow-unsandboxed'],
        env: { ...getDefaultEnvironment(), TMPDIR: STATE_TMPDIR },
        stderr: 'pipe',
      });
      let stderr = '';
      transport.stderr?.on('data', (chunk: Buffer) => {
        stderr += String(chunk);
      });
      const client = new Client({ name: 'codecall-example-test', version: '1.0.0' });
      await client.connect(transport);
      try {
        const { tools } = await client.listTools();
        expect(tools[0]?.description).toContain('tools.sales');
        const code = readFileSync(join(SALES_EXAMPLE, 'analyse.py'), 'utf8');
        const result = (await client.callTool({ name: 'execute_code', arguments: { code } })) as CallToolResult;
        expect(result.isError, stderr).toBe(false);
        const [text, image, ...others] = result.content;
        expect(others).toEqual([]);
        expect(text?.type).toBe('text');
        const modelText = (text as { text: string }).text;
        expect(modelText.startsWith(SUMMARY)).toBe(true);
        expect(modelText.slice(SUMMARY.length)).toMatch(CHART_LINES);
        expect(image).toMatchObject({ type: 'image', mimeType: 'image/png' });
        const png = Buffer.from((image as { data: string }).data, 'base64');
        expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
        // 800 x 450 pixels: the figure the script drew (8 x 4.5 inches at 100 dpi).
        expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([800, 450]);
      } finally {
        await client.close();
      }
    },
    120_000,
  );
});
