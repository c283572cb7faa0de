import { readdirSync, readlinkSync } from 'node:fs';
import type { Codecall, CodecallOptions } from '../../../src/engine/codecall.js';
import { probeSandbox } from '../../../src/sandbox/bubblewrap-probe.js';
import { configuredRunUidRange } from '../../../src/sandbox/run-uids.js';
import { useCodecalls } from '../../support/codecall-fixture.js';

/** What this machine offers, probed once per test file. */
export const sandboxProbe = await probeSandbox();
/** Whether bubblewrap can run here (CI installs it; user namespaces must be allowed). */
export const bubblewrapUsable = sandboxProbe.bubblewrap.available;
/** Whether runs get per-run cgroups here (needs a writable /sys/fs/cgroup). */
export const cgroupsActive = bubblewrapUsable && sandboxProbe.cgroups.writable;

if (!bubblewrapUsable) {
  console.warn(`[sandbox tests] bubblewrap tests skipped: ${sandboxProbe.bubblewrap.reason}`);
} else if (!cgroupsActive) {
  console.warn(`[sandbox tests] cgroup tests skipped: ${sandboxProbe.cgroups.reason ?? 'cgroups not writable'}`);
}

/**
 * Whether `uid` is one scripts may run as here: a uid of the run range when the host is root (every run has its own),
 * else the host's own.
 */
export function isRunUid(uid: number): boolean {
  if (process.getuid?.() !== 0) return uid === process.getuid?.();
  const range = configuredRunUidRange();
  return uid >= range.first && uid < range.first + range.count;
}

/** Codecalls with `sandbox: "bubblewrap"` and a private state folder, closed after the file's tests. */
export function useSandboxedCodecalls(): (options?: CodecallOptions) => Codecall {
  const codecallWith = useCodecalls();
  return (options = {}) => codecallWith({ sandbox: 'bubblewrap', ...options });
}

/** Python lines that print the script's pid namespace (`pidns pid:[4026532...]`) first thing. */
export const PRINT_PID_NAMESPACE = 'import os\nprint("pidns", os.readlink("/proc/self/ns/pid"), flush=True)\n';

/** The pid namespace a script printed with {@link PRINT_PID_NAMESPACE}. */
export function printedPidNamespace(stdout: string): string {
  const match = /pidns (pid:\[\d+\])/.exec(stdout);
  if (!match?.[1]) throw new Error(`no pid namespace in output: ${stdout}`);
  return match[1];
}

/** Host pids of the processes in a pid namespace, zombies included (empty once the sandbox is gone). */
export function processesInPidNamespace(namespace: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === namespace) found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** Waits until `condition` holds, polling; resolves false after `timeoutMs`. */
export async function eventually(condition: () => boolean, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return condition();
}

/** Parses the last line of a script's stdout as JSON (scripts print their findings with `json.dumps`). */
export function lastJson<T = Record<string, unknown>>(stdout: string): T {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1] ?? 'null') as T;
}
