import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { inflateSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { renderTraceHtml } from '../../src/cli/trace-viewer.js';
import { useCodecalls } from '../support/codecall-fixture.js';
import { createBarrierTool } from '../support/sample-tools.js';

const CHROMIUM = '/usr/bin/chromium';
const run = promisify(execFile);
const folder = mkdtempSync(join(tmpdir(), 'codecall-trace-chromium-'));
const codecallWith = useCodecalls();

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

/** The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's screenshots are). */
function decodePng(png: Buffer): { width: number; height: number; pixel: (x: number, y: number) => number[] } {
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 4;
  const data: Buffer[] = [];
  while (offset < png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString('latin1', offset + 4, offset + 8);
    const body = png.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      channels = body[9] === 2 ? 3 : 4;
    } else if (type === 'IDAT') {
      data.push(body);
    }
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const pixels = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y += 1) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x += 1) {
      const value = raw[y * (stride + 1) + 1 + x] ?? 0;
      const left = x >= channels ? (pixels[y * stride + x - channels] ?? 0) : 0;
      const up = y > 0 ? (pixels[(y - 1) * stride + x] ?? 0) : 0;
      const upLeft = y > 0 && x >= channels ? (pixels[(y - 1) * stride + x - channels] ?? 0) : 0;
      let predicted = 0;
      if (filter === 1) predicted = left;
      else if (filter === 2) predicted = up;
      else if (filter === 3) predicted = Math.floor((left + up) / 2);
      else if (filter === 4) {
        const estimate = left + up - upLeft;
        const [toLeft, toUp, toUpLeft] = [
          Math.abs(estimate - left),
          Math.abs(estimate - up),
          Math.abs(estimate - upLeft),
        ];
        predicted = toLeft <= toUp && toLeft <= toUpLeft ? left : toUp <= toUpLeft ? up : upLeft;
      }
      pixels[y * stride + x] = (value + predicted) & 0xff;
    }
  }
  return {
    width,
    height,
    pixel: (x, y) => [...pixels.subarray(y * stride + x * channels, y * stride + x * channels + 3)],
  };
}

describe.skipIf(!existsSync(CHROMIUM))('the trace page in headless Chromium', () => {
  it('renders without console messages, and its screenshot shows a lane per call for 100 parallel calls', {
    timeout: 120_000,
  }, async () => {
    const barrier = createBarrierTool(100);
    const codecall = codecallWith({ tools: [barrier.tool], limits: { maxConcurrentToolCalls: 100 } });
    const result = await codecall.execute(
      'import asyncio\nfrom tools import aio\nasync def main():\n    await asyncio.gather(*(aio.meet() for _ in range(100)))\nasyncio.run(main())',
    );
    expect(result.trace?.calls).toHaveLength(100);
    const page = join(folder, 'run.html');
    const screenshot = join(folder, 'run.png');
    writeFileSync(page, await renderTraceHtml(result));
    const browser = await run(
      CHROMIUM,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--enable-logging=stderr',
        '--v=0',
        '--force-device-scale-factor=1',
        '--window-size=1200,2200',
        `--screenshot=${screenshot}`,
        `file://${page}`,
      ],
      { timeout: 90_000 },
    );
    // The page logs nothing: no script error, no blocked load, no policy violation.
    expect(browser.stderr).not.toContain('CONSOLE');
    const image = decodePng(readFileSync(screenshot));
    // Rows holding the green of successful calls, grouped into bands: one band per lane, plus the status badge
    // (green for success) and the legend's swatch.
    const isGreen = ([red = 0, green = 0, blue = 0]: number[]) => green > red + 60 && green > blue + 40;
    let bands = 0;
    let inBand = false;
    for (let y = 0; y < image.height; y += 1) {
      let green = false;
      for (let x = 0; x < image.width && !green; x += 1) green = isGreen(image.pixel(x, y));
      if (green && !inBand) bands += 1;
      inBand = green;
    }
    expect(bands).toBe(100 + 2);
  });
});
