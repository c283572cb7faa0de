import { describe, expect, it } from 'vitest';
import { useCodecalls } from '../support/codecall-fixture.js';

const codecallWith = useCodecalls();

/** Reads of the file the script makes, and its size: large enough that a default malloc maps each block apart. */
const READS = 50;
const FILE_BYTES = 200 * 1024;

describe('the script process', () => {
  // glibc's malloc by default maps blocks over 128 KiB apart and hands a free heap top over 128 KiB back to the
  // kernel: each read of a large file took fresh pages, a page fault each (tens of µs on a VM). The boot raises both
  // thresholds before the script runs, not only once the script calls a tool.
  it('reads a large file again and again without fresh pages each time, with no tool call', async () => {
    const codecall = codecallWith({});
    const result = await codecall.execute(`
import resource
with open("data.txt", "w") as handle:
    handle.write("x" * ${FILE_BYTES - 1} + "\\n")
def read_text():
    with open("data.txt", encoding="utf-8") as handle:
        return handle.read()
read_text()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
total = sum(len(read_text().encode()) for _ in range(${READS}))
print(total, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
`);
    expect(result.error).toBeUndefined();
    const [total, faults] = result.stdout.trim().split(' ').map(Number);
    expect(total).toBe(READS * FILE_BYTES);
    // One 200 KB block alone is 50 pages: taking fresh ones on every read would be thousands.
    expect(faults).toBeLessThan(READS * 5);
  });
});
