import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const hook = new URL('../fixtures/hide-fleet-packages.mjs', import.meta.url).href;
const entry = new URL('../../dist/index.js', import.meta.url).href;

describe('without bullmq and ioredis installed', () => {
  it('local runs work (the root entry never loads them) and a remote run names the package to install', async () => {
    const script = `
      import { register } from 'node:module';
      register(${JSON.stringify(hook)});
      const { createCodecall } = await import(${JSON.stringify(entry)});
      const local = createCodecall({ sandbox: 'none' });
      console.log((await local.execute('print(6 * 7)')).stdout.trim());
      await local.close();
      const remote = createCodecall({ sandbox: 'none', remote: { redis: 'redis://127.0.0.1:1' } });
      const error = await remote.execute('print(1)').catch((caught) => caught);
      console.log(error.code, error.message);
      await remote.close();
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
    const [localLine, remoteLine] = stdout.trim().split('\n');
    expect(localLine).toBe('42');
    expect(remoteLine).toMatch(
      /^INVALID_CONFIG remote runs need the package bullmq, which is not installed; .*npm install bullmq ioredis/,
    );
  }, 60_000);
});
