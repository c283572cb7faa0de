import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/define-tool.js';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();

// Text whose characters take 1 to 4 bytes, so the ends of reads and of buffers fall inside characters.
const PATTERN = 'ab é 中 😀 \n';

/** `characters` characters of PATTERN repeated, starting at `shift`. */
function textOf(characters: number, shift: number): string {
  const units = [...PATTERN];
  let text = '';
  for (let index = 0; index < characters; index += 1) text += units[(index + shift) % units.length];
  return text;
}

// Sizes around the script's first receive buffer (64 KiB) and past the largest it keeps (2 MiB), then small again.
const SIZES = [0, 1, 4_095, 4_096, 4_097, 21_000, 21_845, 30_000, 70_000, 200_000, 900_000, 10, 50_000, 5_000];

describe("the script's channel reads replies of every size into the buffer it keeps", () => {
  const codecall = codecallWith({
    tools: [
      defineTool({
        name: 'text',
        description: 'Returns `characters` characters of a fixed pattern, starting at `shift`.',
        inputSchema: {
          type: 'object',
          properties: { characters: { type: 'integer' }, shift: { type: 'integer' } },
          required: ['characters', 'shift'],
        },
        execute: async ({ characters, shift }: { characters: number; shift: number }) => ({
          shift,
          text: textOf(characters, shift),
          tail: textOf(characters, shift + 1),
        }),
      }),
    ],
    limits: { maxToolCalls: 1_000 },
  });

  const script = (threads: number) => `
from concurrent.futures import ThreadPoolExecutor
from tools import text
pattern = list(${JSON.stringify(PATTERN)})
def expected(characters, shift):
    return "".join(pattern[(index + shift) % len(pattern)] for index in range(characters))
def check(job):
    index, characters = job
    reply = text(characters=characters, shift=index)
    assert reply["shift"] == index, reply["shift"]
    assert reply["text"] == expected(characters, index), (characters, index)
    assert reply["tail"] == expected(characters, index + 1), (characters, index)
    return len(reply["text"].encode())
jobs = list(enumerate(${JSON.stringify([...SIZES, 3_000_000, ...SIZES])}))
with ThreadPoolExecutor(${threads}) as pool:
    print(sum(pool.map(check, jobs)))
`;

  const total = [...SIZES, 3_000_000, ...SIZES].reduce(
    (sum, characters, index) => sum + Buffer.byteLength(textOf(characters, index)),
    0,
  );

  it('one call at a time', async () => {
    const result = await codecall.execute(script(1));
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(`${total}\n`);
  });

  it('from eight threads at once', async () => {
    const result = await codecall.execute(script(8));
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe(`${total}\n`);
  });
});
