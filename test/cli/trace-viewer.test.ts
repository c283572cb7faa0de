import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT_BAD_CONFIGURATION, EXIT_SUCCESS, main } from '../../src/cli/command-line.js';
import { placeCalls } from '../../src/cli/trace-viewer.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { TINY_PNG_BASE64 } from '../mcp/mcp-test-servers.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { createBarrierTool } from '../support/sample-tools.js';

const folder = mkdtempSync(join(tmpdir(), 'codecall-trace-viewer-'));
const codecallWith = useCodecalls();

const fifo = join(folder, 'chart.png');

afterAll(() => {
  // A reader still blocked opening the FIFO (the code before the fix) gets its end of file and lets the process exit.
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // No reader waits.
  }
  rmSync(folder, { recursive: true, force: true });
});

const broken = defineTool({
  name: 'broken',
  description: 'Fails.',
  inputSchema: { type: 'object', properties: {} },
  execute: () => {
    throw new Error('<img src=x onerror=alert(1)>');
  },
});

async function trace(args: readonly string[]) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const chunks: Buffer[] = [];
  const errors: Buffer[] = [];
  stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  stderr.on('data', (chunk: Buffer) => errors.push(chunk));
  const status = await main(['trace', ...args], { stdin: Readable.from([]), stdout, stderr });
  return { status, stdout: Buffer.concat(chunks).toString(), stderr: Buffer.concat(errors).toString() };
}

describe('codecall trace', () => {
  it('writes one self-contained page: a lane per concurrent call, failures marked, output escaped, images inline', async () => {
    const barrier = createBarrierTool(100);
    const codecall = codecallWith({ tools: [barrier.tool, broken], limits: { maxConcurrentToolCalls: 100 } });
    const result = await codecall.execute(
      [
        'import asyncio, base64, os',
        'from tools import aio, broken, ToolError',
        'async def main():',
        '    await asyncio.gather(*(aio.meet() for _ in range(100)))',
        'asyncio.run(main())',
        'try:',
        '    broken()',
        'except ToolError:',
        '    pass',
        'print("<b>bold?</b>")',
        `open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "dot.png"), "wb").write(base64.b64decode(${JSON.stringify(TINY_PNG_BASE64)}))`,
      ].join('\n'),
    );
    expect(result.status).toBe('success');
    const resultFile = join(folder, 'result.json');
    const page = join(folder, 'run.html');
    writeFileSync(resultFile, JSON.stringify(result));
    const run = await trace([resultFile, '-o', page]);
    expect(run).toMatchObject({ status: EXIT_SUCCESS, stderr: '' });
    const html = readFileSync(page, 'utf8');
    const rectangles = html.match(/<rect class="call [^"]*" data-lane="\d+"/g) ?? [];
    expect(rectangles).toHaveLength(101);
    // The 100 barrier calls were all in flight at once: 100 lanes; the failing call comes after them.
    expect(html).toContain('data-lanes="100"');
    expect(html.match(/class="call status-error"/g)).toHaveLength(1);
    expect(html).toContain('&#60;b&#62;bold?&#60;/b&#62;');
    expect(html).not.toContain('<b>bold');
    expect(html).not.toContain('<img src=x');
    expect(html).toContain(`src="data:image/png;base64,${TINY_PNG_BASE64}"`);
    // Nothing is fetched and nothing runs: no script, no external address.
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/(src|href)="https?:/i);
    expect(html).toContain("default-src 'none'");
  });

  it('highlights the limit that stopped a run', async () => {
    const codecall = codecallWith();
    const result = await codecall.execute('import time\ntime.sleep(5)', { timeoutMs: 300 });
    const resultFile = join(folder, 'timeout.json');
    writeFileSync(resultFile, JSON.stringify(result));
    const run = await trace([resultFile]);
    expect(run.status).toBe(EXIT_SUCCESS);
    expect(run.stdout).toContain('<p class="limit">Stopped by: <strong>timeout</strong></p>');
  });

  it('never reads a file a result names into the page unless it is an image', async () => {
    const secret = join(folder, 'secret.txt');
    writeFileSync(secret, 'top secret');
    const run = await trace(['-']);
    expect(run.status).toBe(EXIT_BAD_CONFIGURATION);
    const resultFile = join(folder, 'crafted.json');
    writeFileSync(
      resultFile,
      JSON.stringify({ status: 'success', artifacts: [{ path: secret, mimeType: 'image/png', bytes: 10 }] }),
    );
    const crafted = await trace([resultFile]);
    expect(crafted.stdout).not.toContain(Buffer.from('top secret').toString('base64'));
    expect(crafted.stdout).not.toContain('top secret');
  });

  it('embeds only regular image files: a FIFO, a device and a link named as PNG artifacts are listed, never read', async () => {
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const image = join(folder, 'real.png');
    writeFileSync(image, Buffer.from(TINY_PNG_BASE64, 'base64'));
    const link = join(folder, 'link.png');
    symlinkSync(image, link);
    const artifact = (path: string) => ({ path, mimeType: 'image/png', bytes: 68 });
    const resultFile = join(folder, 'special-files.json');
    writeFileSync(
      resultFile,
      JSON.stringify({
        status: 'success',
        artifacts: [artifact(fifo), artifact('/dev/zero'), artifact(link), artifact(image)],
      }),
    );
    const page = join(folder, 'special-files.html');
    const run = await trace([resultFile, '-o', page]);
    expect(run).toMatchObject({ status: EXIT_SUCCESS, stderr: '' });
    const html = readFileSync(page, 'utf8');
    // Every artifact is listed; only the regular file is embedded, once.
    for (const path of [fifo, '/dev/zero', link, image]) expect(html).toContain(`<code>${path}</code>`);
    expect(html.split(`src="data:image/png;base64,${TINY_PNG_BASE64}"`)).toHaveLength(2);
    expect(html).toContain(`<img alt="${image}"`);
  }, 10_000);

  it('places calls in the lowest free lane', () => {
    const call = (id: number, startMs: number, endMs: number) => ({
      id,
      tool: 't',
      startMs,
      endMs,
      status: 'ok',
      bytes: 0,
      error: undefined,
    });
    const placed = placeCalls([call(1, 0, 10), call(2, 5, 8), call(3, 9, 12), call(4, 11, 20)]);
    expect(placed.map((entry) => [entry.id, entry.lane])).toEqual([
      [1, 0],
      [2, 1],
      [3, 1],
      [4, 0],
    ]);
  });
});
