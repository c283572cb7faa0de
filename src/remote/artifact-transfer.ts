import { unlink } from 'node:fs/promises';
import { basename } from 'node:path';
import type { ExecuteResult } from '../core/result.js';
import { readRegularFile } from '../engine/result/artifact-files.js';
import { ArtifactSink } from '../engine/result/artifact-sink.js';
import type { RunEvent } from '../engine/supervise/run-events.js';

/**
 * Bytes of one run's (or cell's) artifacts a worker sends home at most. They travel base64-encoded inside the result
 * message, which must stay under the mailbox's message cap (`MAX_MESSAGE_CHARACTERS`, 64 MiB) with room to spare.
 */
export const MAX_SENT_ARTIFACT_BYTES = 32 * 1024 * 1024;

/** One artifact as it travels from a worker to its agent. */
export interface SentArtifact {
  /** The file name the worker saved it under (checked again by the agent). */
  readonly name: string;
  readonly mimeType: string;
  /** The bytes, base64. */
  readonly data: string;
}

/**
 * Reads the artifacts of a finished run on the worker, for the result message to the agent, and removes the worker's
 * copies. The files are read with the checked reader (no link followed, no FIFO waited on, nothing past the cap):
 * what the script left in the run's folder is hostile. Artifacts past {@link MAX_SENT_ARTIFACT_BYTES} in all, or
 * unreadable, are not sent, and the result's `artifactsNote` says so. The returned result names no worker path.
 */
export async function packArtifacts(
  result: ExecuteResult,
  worker: string,
): Promise<{ readonly result: ExecuteResult; readonly artifacts: readonly SentArtifact[] }> {
  const listed = result.artifacts ?? [];
  if (listed.length === 0) return { result, artifacts: [] };
  const sent: SentArtifact[] = [];
  let room = MAX_SENT_ARTIFACT_BYTES;
  let overBound = 0;
  const unreadable: string[] = [];
  for (const artifact of listed) {
    const data = await readRegularFile(artifact.path, room);
    if (typeof data === 'string') {
      // The reader's refusal of a file over the cap: here the cap is what is left of the bound.
      if (data.startsWith('larger than')) overBound += 1;
      else unreadable.push(`${basename(artifact.path)} (${data})`);
    } else {
      room -= data.length;
      sent.push({ name: basename(artifact.path), mimeType: artifact.mimeType, data: data.toString('base64') });
    }
    // Unlinking removes a link the script put in its place, never what the link names.
    await unlink(artifact.path).catch(() => {});
  }
  const notes = result.artifactsNote === undefined ? [] : [result.artifactsNote];
  if (overBound > 0) {
    notes.push(
      `${overBound} artifact(s) not sent home from worker ${worker}: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run's artifacts may total`,
    );
  }
  if (unreadable.length > 0) notes.push(`artifacts not sent home from worker ${worker}: ${unreadable.join(', ')}`);
  const { artifacts: _workerPaths, artifactsNote: _note, ...rest } = result;
  return { result: { ...rest, ...(notes.length > 0 ? { artifactsNote: notes.join('; ') } : {}) }, artifacts: sent };
}

/**
 * Writes the artifacts a worker sent into the agent's own folder for the run (the folder its tool calls saved files
 * in, whose files count too, as in a local run) and returns the result with them: paths on this host, media types and
 * sizes, as a local run's. The worker's message is checked as the script's frames are: names, count and size.
 */
export async function unpackArtifacts(result: ExecuteResult, sent: unknown, folder: string): Promise<ExecuteResult> {
  const sink = new ArtifactSink({ folder });
  for (const artifact of Array.isArray(sent) ? sent : []) {
    if (typeof artifact !== 'object' || artifact === null) continue;
    const { name, mimeType, data } = artifact as Record<string, unknown>;
    sink.receive({ name, offset: 0, data, final: true, mimeType });
  }
  const received = await sink.finish();
  const notes = [result.artifactsNote, received.note].filter((note) => note !== undefined);
  const { artifacts: _worker, artifactsNote: _note, ...rest } = result;
  return {
    ...rest,
    ...(received.artifacts.length > 0 ? { artifacts: received.artifacts } : {}),
    ...(notes.length > 0 ? { artifactsNote: notes.join('; ') } : {}),
  };
}

/** The `artifact` events of a result, sent before its `run-end` as a local run sends them. */
export function artifactEvents(result: ExecuteResult): RunEvent[] {
  return (result.artifacts ?? []).map((artifact) => ({ type: 'artifact', artifact }));
}
