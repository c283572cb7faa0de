import { basename } from 'node:path';
import type { ExecuteResult } from '../../core/result.js';
import { boundScriptText, cleanErrorType, cleanScriptText } from '../../core/script-text.js';

/** Traceback bytes shown to the model at most (its head and its tail, where the error is). */
export const MAX_TRACEBACK_BYTES_FOR_MODEL = 3_000;
/** Bytes of an error message shown to the model when there is no traceback. */
export const MAX_ERROR_MESSAGE_BYTES_FOR_MODEL = 3_000;
/** stderr bytes shown to the model when a failed run has no error. */
export const MAX_STDERR_BYTES_FOR_MODEL = 2_000;
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

// The result is sanitised and bounded when it is built; the text is cleaned here again so that a result from
// elsewhere (deserialised, built by hand) cannot put escape sequences in it either, and the error parts are shown
// bounded. Cleaning clean text changes nothing. Secrets are not masked here: that is the result's option, applied
// when it was built.
function clean(text: string): string {
  return cleanScriptText(text, { redactSecrets: false });
}

function bounded(text: string, maxBytes: number): string {
  return boundScriptText(text, { maxBytes, redactSecrets: false });
}

/** One line per artifact (`[artifact] name (type, size)`) when `list`, then what was dropped, if anything. */
function artifactLines(result: ExecuteResult, list: boolean): string[] {
  const lines = (list ? (result.artifacts ?? []) : []).map(
    (artifact) =>
      `[artifact] ${clean(basename(artifact.path))} (${clean(artifact.mimeType)}, ${sizeText(artifact.bytes)})`,
  );
  if (result.artifactsNote !== undefined) lines.push(`[artifacts] ${clean(result.artifactsNote)}`);
  return lines;
}

function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Options of {@link formatResultForModel}. */
export interface FormatResultOptions {
  /** List the artifacts (name, type, size) and what was dropped of them; false when the caller lists them itself. */
  readonly listArtifacts?: boolean | undefined;
}

/**
 * Renders the compact text the model sees: the script's stdout, then — when the run did not succeed — its status,
 * error, traceback and hint; the artifacts it saved (name, type, size), unless the caller lists them.
 */
export function formatResultForModel(result: ExecuteResult, options: FormatResultOptions = {}): string {
  const parts: string[] = [];
  const stdout = clean(result.stdout).replace(/\n+$/, '');
  if (stdout.length > 0) parts.push(stdout);
  const artifacts = artifactLines(result, options.listArtifacts !== false);
  if (result.status === 'success') {
    if (parts.length === 0) {
      parts.push(
        (result.artifacts ?? []).length > 0
          ? '(the script printed nothing; it saved the files below)'
          : '(the script printed nothing; print the values you need)',
      );
    }
    parts.push(...artifacts);
    if (result.stateLost) parts.push(STATE_LOST_NOTICE);
    return `${parts.join('\n')}\n`;
  }
  const lines: string[] = [];
  lines.push(`[status: ${STATUS_LABELS[result.status]}${result.reason ? ` (${result.reason})` : ''}]`);
  const error = result.error;
  if (error !== undefined) {
    const traceback = error.traceback?.trim();
    if (traceback) lines.push(bounded(traceback, MAX_TRACEBACK_BYTES_FOR_MODEL));
    else {
      const type = cleanErrorType(error.type, { redactSecrets: false });
      lines.push(`${type}: ${bounded(error.message, MAX_ERROR_MESSAGE_BYTES_FOR_MODEL)}`);
    }
  } else if (result.stderr.trim().length > 0) {
    lines.push(bounded(result.stderr.trim(), MAX_STDERR_BYTES_FOR_MODEL));
  }
  lines.push(...artifacts);
  if (result.hint) lines.push(`[hint] ${clean(result.hint)}`);
  if (result.stateLost) lines.push(STATE_LOST_NOTICE);
  if (parts.length > 0) parts.push('');
  parts.push(...lines);
  return `${parts.join('\n')}\n`;
}
