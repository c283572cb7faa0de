import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
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
import { CHART_LINES, EXPLORE_OUTPUT, NO_CHART_LINE, SUMMARY } from './expected-output.js';

// The analysis example end to end, as the README runs it: the real command line from dist/, the shipped database,
// Debian's python3 with matplotlib. The expected texts are what the model reads back; the README quotes them.
const config = join(SALES_EXAMPLE, 'codecall.json');
afterAll(() => rmSync(STATE_TMPDIR, { recursive: true, force: true }));
const missingReason = systemPythonMissing();
const hasMatplotlib = missingReason === undefined && systemPythonHasMatplotlib();
if (missingReason !== undefined) console.warn(`[examples] analysis example skipped: ${missingReason}`);
else if (!hasMatplotlib) console.warn(`[examples] ${SYSTEM_PYTHON} has no matplotlib: checking the chartless output`);

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
    const months = Object.entries(truth.by_month_cents).sort(([, low], [, high]) => high - low);
    const money = (monthCents: number) => (monthCents / 100).toLocaleString('en-US', { minimumFractionDigits: 2 });
    const [best, bestCents] = months[0] ?? ['', 0];
    const [weakest, weakestCents] = months.at(-1) ?? ['', 0];
    expect(SUMMARY).toContain(`best month ${best}: ${money(bestCents)}; weakest ${weakest}: ${money(weakestCents)}`);
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
