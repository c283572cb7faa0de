import type { ExecuteResult } from '../../core/result.js';

/** Traceback characters shown to the model at most (its end, where the error is). */
export const MAX_TRACEBACK_CHARACTERS = 3_000;
/** stderr characters shown to the model when a failed run has no traceback. */
export const MAX_STDERR_CHARACTERS_FOR_MODEL = 2_000;
/** What the model is told when a session's interpreter was replaced. */
export const STATE_LOST_NOTICE =
  "[the session's interpreter was restarted: variables of earlier cells are gone; define them again]";

const STATUS_LABELS: Record<ExecuteResult['status'], string> = {
  success: 'success',
  error: 'error',
  timeout: 'timeout',
  aborted: 'aborted',
  limit: 'limit reached',
};

function tailOf(text: string, characters: number): string {
  return text.length <= characters ? text : `…${text.slice(text.length - characters)}`;
}

/**
 * Renders the compact text the model sees: the script's stdout, then — when the run did not succeed — its status,
 * error, traceback and hint.
 */
export function formatResultForModel(result: ExecuteResult): string {
  const parts: string[] = [];
  const stdout = result.stdout.replace(/\n+$/, '');
  if (stdout.length > 0) parts.push(stdout);
  if (result.status === 'success') {
    if (parts.length === 0) parts.push('(the script printed nothing; print the values you need)');
    if (result.stateLost) parts.push(STATE_LOST_NOTICE);
    return `${parts.join('\n')}\n`;
  }
  const lines: string[] = [];
  lines.push(`[status: ${STATUS_LABELS[result.status]}${result.reason ? ` (${result.reason})` : ''}]`);
  const error = result.error;
  if (error !== undefined) {
    const traceback = error.traceback?.trim();
    if (traceback) lines.push(tailOf(traceback, MAX_TRACEBACK_CHARACTERS));
    else lines.push(`${error.type}: ${error.message}`);
  } else if (result.stderr.trim().length > 0) {
    lines.push(tailOf(result.stderr.trim(), MAX_STDERR_CHARACTERS_FOR_MODEL));
  }
  if (result.hint) lines.push(`[hint] ${result.hint}`);
  if (result.stateLost) lines.push(STATE_LOST_NOTICE);
  if (parts.length > 0) parts.push('');
  parts.push(...lines);
  return `${parts.join('\n')}\n`;
}
