import { readImageFile } from '../engine/result/artifact-files.js';

/** Images embedded in the page at most, and the largest one embedded. */
export const MAX_EMBEDDED_IMAGES = 20;
export const MAX_EMBEDDED_IMAGE_BYTES = 5 * 1024 * 1024;
/** Pixels of one lane of the timeline, and the width the whole run takes. */
const LANE_HEIGHT = 14;
const TIMELINE_WIDTH = 1000;

/** A call as the viewer reads it from a result file (checked field by field: the file may be anything). */
interface ViewedCall {
  readonly id: number;
  readonly tool: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly status: string;
  readonly bytes: number;
  readonly error: string | undefined;
}

/** A call placed on the timeline. */
interface PlacedCall extends ViewedCall {
  readonly lane: number;
}

const STATUS_COLOURS: Readonly<Record<string, string>> = {
  ok: '#3a9d5d',
  error: '#d64545',
  denied: '#e08a1e',
  timeout: '#8e44ad',
  cut_off: '#888888',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function finiteNumber(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function callsOf(result: Record<string, unknown>): ViewedCall[] {
  const calls = record(result.trace).calls;
  if (!Array.isArray(calls)) return [];
  return calls.map((entry) => {
    const call = record(entry);
    const startMs = Math.max(0, finiteNumber(call.startMs));
    return {
      id: finiteNumber(call.id),
      tool: text(call.tool),
      startMs,
      endMs: Math.max(startMs, finiteNumber(call.endMs)),
      status: text(call.status),
      bytes: finiteNumber(call.bytes),
      error: typeof call.error === 'string' ? call.error : undefined,
    };
  });
}

/** Gives each call the lowest lane free when it starts: calls in flight at once get lanes of their own. */
export function placeCalls(calls: readonly ViewedCall[]): PlacedCall[] {
  const laneEnds: number[] = [];
  return [...calls]
    .sort((first, second) => first.startMs - second.startMs || first.id - second.id)
    .map((call) => {
      let lane = laneEnds.findIndex((end) => end <= call.startMs);
      if (lane < 0) lane = laneEnds.length;
      laneEnds[lane] = call.endMs;
      return { ...call, lane };
    });
}

// The result file may name any path: only a regular file, reached without a link, within the cap, whose bytes are an
// image, is read into the page (a FIFO there must not hang the command, a link must not lead elsewhere).
async function embeddedImage(path: string): Promise<string | undefined> {
  const image = await readImageFile(path, MAX_EMBEDDED_IMAGE_BYTES);
  return typeof image === 'string' ? undefined : `data:${image.mediaType};base64,${image.data.toString('base64')}`;
}

function timeline(calls: readonly PlacedCall[], durationMs: number): string {
  const lanes = calls.reduce((most, call) => Math.max(most, call.lane + 1), 0);
  const span = Math.max(durationMs, ...calls.map((call) => call.endMs), 1);
  const scale = TIMELINE_WIDTH / span;
  const rectangles = calls.map((call) => {
    const x = (call.startMs * scale).toFixed(2);
    // At least 2 px, so the shortest call still covers a whole pixel.
    const width = Math.max(2, (call.endMs - call.startMs) * scale).toFixed(2);
    const y = call.lane * LANE_HEIGHT;
    const colour = STATUS_COLOURS[call.status] ?? '#555555';
    const label = `#${call.id} ${call.tool}: ${call.status}, ${(call.endMs - call.startMs).toFixed(2)} ms (from ${call.startMs} ms), ${call.bytes} bytes${call.error === undefined ? '' : `: ${call.error}`}`;
    return `<rect class="call status-${escapeHtml(call.status)}" data-lane="${call.lane}" x="${x}" y="${y}" width="${width}" height="${LANE_HEIGHT - 2}" fill="${colour}"><title>${escapeHtml(label)}</title></rect>`;
  });
  return `<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="${TIMELINE_WIDTH}" height="${Math.max(lanes, 1) * LANE_HEIGHT}" data-lanes="${lanes}">${rectangles.join('')}</svg>`;
}

/**
 * Renders a result (as `codecall run --json` or `execute` gave it) as one self-contained HTML page: the status and
 * the limit that stopped the run highlighted, a timeline of the tool calls with a lane per call in flight at once
 * (failed, denied, timed-out and cut-off calls coloured), the failed calls listed, stdout, stderr, the error, and
 * the artifacts (images embedded when their bytes are PNG, JPEG, GIF or WebP). No script, no network: a strict
 * Content-Security-Policy allows only inline styles and embedded images.
 */
export async function renderTraceHtml(resultValue: unknown): Promise<string> {
  const result = record(resultValue);
  const status = text(result.status) || 'unknown';
  const reason = text(result.reason);
  const durationMs = finiteNumber(result.durationMs);
  const calls = placeCalls(callsOf(result));
  const failed = calls.filter((call) => call.status !== 'ok');
  const error = record(result.error);
  const artifacts = Array.isArray(result.artifacts) ? result.artifacts.map(record) : [];
  const artifactItems: string[] = [];
  let embedded = 0;
  for (const artifact of artifacts) {
    const path = text(artifact.path);
    const image = embedded < MAX_EMBEDDED_IMAGES && path !== '' ? await embeddedImage(path) : undefined;
    if (image !== undefined) embedded += 1;
    artifactItems.push(
      `<li><code>${escapeHtml(path)}</code> ${escapeHtml(text(artifact.mimeType))}, ${finiteNumber(artifact.bytes)} bytes${image === undefined ? '' : `<br><img alt="${escapeHtml(path)}" src="${image}">`}</li>`,
    );
  }
  const dropped = finiteNumber(record(result.trace).droppedCalls);
  const section = (title: string, body: string) => `<section><h2>${title}</h2>${body}</section>`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>codecall run: ${escapeHtml(status)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
.status{display:inline-block;padding:.2em .6em;border-radius:4px;color:#fff;background:${status === 'success' ? '#3a9d5d' : '#d64545'}}
.limit{background:#fde2e2;border-left:4px solid #d64545;padding:.4em .8em}
pre{background:#f5f5f5;padding:.8em;overflow:auto;max-height:40em;white-space:pre-wrap}
.timeline{border:1px solid #ddd;background:#fafafa}
.legend span{display:inline-block;margin-right:1em}
img{max-width:100%;border:1px solid #ddd;margin-top:.3em}
</style></head><body>
<h1>codecall run <span class="status">${escapeHtml(status)}</span></h1>
<p>${durationMs.toFixed(1)} ms, ${finiteNumber(result.toolCalls)} tool calls${result.deniedToolCalls === undefined ? '' : `, ${finiteNumber(result.deniedToolCalls)} denied`}, isolation ${escapeHtml(text(result.isolation))}</p>
${reason === '' ? '' : `<p class="limit">Stopped by: <strong>${escapeHtml(reason)}</strong></p>`}
${section(
  `Tool calls (${calls.length} traced${dropped > 0 ? `, ${dropped} more not traced` : ''})`,
  `<p class="legend">${Object.entries(STATUS_COLOURS)
    .map(
      ([name, colour]) =>
        `<span><svg width="10" height="10"><rect width="10" height="10" fill="${colour}"/></svg> ${name}</span>`,
    )
    .join('')}</p>${timeline(calls, durationMs)}${
    failed.length === 0
      ? ''
      : `<ul class="failed">${failed
          .map(
            (call) =>
              `<li class="status-${escapeHtml(call.status)}">#${call.id} <code>${escapeHtml(call.tool)}</code> ${escapeHtml(call.status)} at ${call.startMs} ms${call.error === undefined ? '' : `: ${escapeHtml(call.error)}`}</li>`,
          )
          .join('')}</ul>`
  }`,
)}
${section('stdout', `<pre class="stdout">${escapeHtml(text(result.stdout))}</pre>`)}
${text(result.stderr) === '' ? '' : section('stderr', `<pre class="stderr">${escapeHtml(text(result.stderr))}</pre>`)}
${Object.keys(error).length === 0 ? '' : section('Error', `<pre class="error">${escapeHtml(`${text(error.type)}: ${text(error.message)}\n\n${text(error.traceback)}`)}</pre>`)}
${artifactItems.length === 0 ? '' : section('Artifacts', `<ul class="artifacts">${artifactItems.join('')}</ul>`)}
</body></html>
`;
}
