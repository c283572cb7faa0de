import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { resolveCallLimits, resolveLimits } from '../../src/core/limits.js';
import { isInside } from '../../src/core/paths.js';
import { isProcessAlive, signalProcess } from '../../src/core/processes.js';
import { isRecord } from '../../src/core/values.js';
import { clipText, formatBytes, formatCount, formatSeconds, plural } from '../../src/core/wording.js';

describe('wording', () => {
  it('writes durations one way, in seconds', () => {
    expect(formatSeconds(300_000)).toBe('300 seconds');
    expect(formatSeconds(1_000)).toBe('1 second');
    expect(formatSeconds(1_500)).toBe('1.5 seconds');
    expect(formatSeconds(250)).toBe('0.25 seconds');
    expect(formatSeconds(3_600_000)).toBe('3,600 seconds');
  });

  it('writes counts, plurals and sizes independently of the locale', () => {
    expect(formatCount(1_234_567)).toBe('1,234,567');
    expect(plural(1, 'tool call')).toBe('1 tool call');
    expect(plural(1_000, 'function')).toBe('1,000 functions');
    expect(formatBytes(16 * 1024 * 1024)).toBe('16 MiB');
    expect(formatBytes(1_024 * 1024 * 1024)).toBe('1,024 MiB');
    expect(formatBytes(50_000)).toBe('50,000 bytes');
  });

  it('clips text with an ellipsis only when it is longer than allowed', () => {
    expect(clipText('abcdef', 6)).toBe('abcdef');
    expect(clipText('abcdefg', 6)).toBe('abcdef…');
  });
});

describe('isInside(path, root)', () => {
  it('takes the path first and the root second', () => {
    expect(isInside('/srv/data/file.txt', '/srv/data')).toBe(true);
    expect(isInside('/srv/data', '/srv/data/file.txt')).toBe(false);
  });

  it('counts the root itself and compares whole path segments after normalisation', () => {
    expect(isInside('/srv/data', '/srv/data')).toBe(true);
    expect(isInside('/srv/data/', '/srv/data')).toBe(true);
    expect(isInside('/srv/database', '/srv/data')).toBe(false);
    expect(isInside('/srv/data/../secrets', '/srv/data')).toBe(false);
    expect(isInside('/anything', '/')).toBe(true);
  });
});

describe('processes', () => {
  it('tells a live process from one that has exited, and signals a gone one without throwing', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    const exited = spawnSync(process.execPath, ['-e', '0']).pid;
    expect(isProcessAlive(exited)).toBe(false);
    expect(signalProcess(exited, 'SIGKILL')).toBe(false);
  });
});

describe('values and limits', () => {
  it('isRecord accepts objects with named entries only', () => {
    expect(isRecord({ a: 1 })).toBe(true);
    expect(isRecord(new Date())).toBe(true);
    expect(isRecord([])).toBe(false);
    expect(isRecord(null)).toBe(false);
    expect(isRecord('text')).toBe(false);
  });

  it('resolveCallLimits keeps the base when the call sets nothing and lays the call over it otherwise', () => {
    const base = resolveLimits({ maxToolCalls: 5 });
    expect(resolveCallLimits(base, {})).toBe(base);
    const call = resolveCallLimits(base, { timeoutMs: 2_000, limits: { maxStdoutBytes: 1_000 } });
    expect(call).toMatchObject({ maxToolCalls: 5, timeoutMs: 2_000, maxStdoutBytes: 1_000, cpuSeconds: 2 });
    expect(resolveCallLimits(base, { timeoutMs: 2_000, limits: { timeoutMs: 9_000 } }).timeoutMs).toBe(2_000);
  });
});
