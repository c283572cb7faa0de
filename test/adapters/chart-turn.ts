import { crc32, inflateSync } from 'node:zlib';
import { expect } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { add } from '../support/sample-tools.js';

/** Sales per month that the `monthly_sales` tool returns and the chart shows. */
export const MONTHLY_SALES = [3, 5, 2, 4] as const;

/** `monthly_sales()` → the figures of {@link MONTHLY_SALES}. */
export const monthlySales = defineTool({
  name: 'monthly_sales',
  description: 'Units sold per month, oldest first.',
  inputSchema: { type: 'object', properties: {} },
  execute: async () => [...MONTHLY_SALES],
});

/** The tools of a chart turn: `add` and `monthly_sales`. */
export const chartTools = [add, monthlySales];

/** Width of a bar and height of one unit in the chart, in pixels. */
const BAR_PIXELS = 10;
const UNIT_PIXELS = 10;
const BAR_COLOUR = [31, 119, 180] as const;
const BACKGROUND = [255, 255, 255] as const;

/**
 * The script the model sends: it calls `monthly_sales` and `add`, prints the total, and draws a bar chart of the
 * sales as a PNG (standard library only) into the run's artifacts folder.
 */
export const CHART_SCRIPT = `import os, struct, zlib
from tools import add, monthly_sales

sales = monthly_sales()
total = 0
for value in sales:
    total = add(a=total, b=value)
print(f"total sales: {total}")

width, height = ${BAR_PIXELS} * len(sales), ${UNIT_PIXELS} * max(sales)
rows = []
for y in range(height):
    row = bytearray([0])
    for x in range(width):
        filled = height - y <= ${UNIT_PIXELS} * sales[x // ${BAR_PIXELS}]
        row += bytes((${BAR_COLOUR.join(', ')})) if filled else bytes((${BACKGROUND.join(', ')}))
    rows.append(bytes(row))

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
with open(os.path.join(os.environ["CODECALL_ARTIFACTS_DIR"], "chart.png"), "wb") as file:
    file.write(png)
print("chart saved as chart.png")
`;

/** The text the model must get back for {@link CHART_SCRIPT}, given the size of the PNG it wrote. */
export function expectedChartText(pngBytes: number): string {
  return (
    'total sales: 14\n' +
    'chart saved as chart.png\n' +
    '[files saved by the script]\n' +
    `- chart.png (image/png, ${pngBytes.toLocaleString('en-US')} bytes): image attached\n`
  );
}

/** A decoded 8-bit RGB PNG without interlacing (what {@link CHART_SCRIPT} writes). */
interface DecodedPng {
  readonly width: number;
  readonly height: number;
  pixel(x: number, y: number): [number, number, number];
}

/** Decodes a PNG, checking its signature and every chunk's CRC. */
export function decodePng(data: Buffer): DecodedPng {
  expect([...data.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let offset = 8;
  let width = 0;
  let height = 0;
  const compressed: Buffer[] = [];
  while (offset < data.length) {
    const length = data.readUInt32BE(offset);
    const kind = data.subarray(offset + 4, offset + 8);
    const body = data.subarray(offset + 8, offset + 8 + length);
    expect(data.readUInt32BE(offset + 8 + length)).toBe(crc32(Buffer.concat([kind, body])));
    const name = kind.toString('latin1');
    if (name === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      expect([...body.subarray(8)]).toEqual([8, 2, 0, 0, 0]);
    } else if (name === 'IDAT') {
      compressed.push(body);
    }
    offset += 12 + length;
  }
  const pixels = inflateSync(Buffer.concat(compressed));
  const stride = 1 + width * 3;
  expect(pixels.length).toBe(stride * height);
  return {
    width,
    height,
    pixel(x, y) {
      const start = y * stride + 1 + x * 3;
      return [pixels[start] ?? -1, pixels[start + 1] ?? -1, pixels[start + 2] ?? -1];
    },
  };
}

/**
 * Checks that base64 `data` is the chart of {@link MONTHLY_SALES}: one bar per month, each exactly as tall as its
 * figure, and returns the PNG's size in bytes.
 */
export function expectSalesChart(base64: string): number {
  const png = decodePng(Buffer.from(base64, 'base64'));
  const tallest = Math.max(...MONTHLY_SALES);
  expect(png.width).toBe(BAR_PIXELS * MONTHLY_SALES.length);
  expect(png.height).toBe(UNIT_PIXELS * tallest);
  MONTHLY_SALES.forEach((value, month) => {
    const x = month * BAR_PIXELS + BAR_PIXELS / 2;
    const top = png.height - value * UNIT_PIXELS;
    expect(png.pixel(x, png.height - 1)).toEqual([...BAR_COLOUR]);
    expect(png.pixel(x, top)).toEqual([...BAR_COLOUR]);
    if (top > 0) expect(png.pixel(x, top - 1)).toEqual([...BACKGROUND]);
  });
  return Buffer.from(base64, 'base64').length;
}
