import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { type Codecall, type CodecallOptions, createCodecall } from '../../src/engine/codecall.js';

/**
 * Creates codecalls for a test file with a private state folder, and closes them all after the file's tests.
 * Isolation defaults to `none` and the workspace is not mounted; tests ask for bubblewrap or a mount explicitly.
 */
export function useCodecalls(): (options?: CodecallOptions) => Codecall {
  const created: Codecall[] = [];
  const stateDir = mkdtempSync(join(tmpdir(), 'codecall-test-'));
  afterAll(async () => {
    await Promise.all(created.map((codecall) => codecall.close()));
    rmSync(stateDir, { recursive: true, force: true });
  });
  return (options = {}) => {
    // The private run directory as the working directory unless a test mounts the workspace.
    const codecall = createCodecall({ sandbox: 'none', workspaceMount: 'none', stateDir, ...options });
    created.push(codecall);
    return codecall;
  };
}

/** True when a process with this pid exists (and is not a zombie). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return !/^State:\s+Z/m.test(status);
  } catch {
    return false;
  }
}
