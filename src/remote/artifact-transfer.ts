import { basename, dirname } from 'node:path';
import { errorMessage } from '../core/errors.js';
import { filePromises } from '../core/file-promises.js';
import type { ExecuteResult, StdoutTruncation } from '../core/result.js';
import { readRegularFile } from '../engine/result/artifact-files.js';
import { ArtifactSink } from '../engine/result/artifact-sink.js';
import type { OutputPaths } from '../engine/result/finish-result.js';
import { type FullOutputExtent, fullOutputClause } from '../engine/result/run-result.js';
import type { WorkerReply } from './fleet-protocol.js';

/**
 * Bytes of one run's (or cell's) files a worker sends home at most: its full stdout file first, then its artifacts.
 * They travel base64-encoded inside the result message, which must stay under the mailbox's message cap
 * (`MAX_MESSAGE_CHARACTERS`, 64 MiB) with room to spare.
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

/** The full stdout file of a truncated output as it travels from a worker to its agent. */
export interface SentFullOutput {
  /** Where the worker saved it: the agent finds this path in the stdout's omission notice and names its own copy. */
  readonly workerPath: string;
  /** The bytes, base64. */
  readonly data: string;
}

/** The files of a finished run read on the worker, and its result naming no worker path but in `fullOutput`. */
export interface PackedRunFiles {
  readonly result: ExecuteResult;
  readonly artifacts: readonly SentArtifact[];
  readonly fullOutput?: SentFullOutput | undefined;
}

const EXTENTS: readonly FullOutputExtent[] = ['complete', 'first part of the'];

/**
 * `stdout` with the omission notice's clause naming `workerPath` rewritten by `where` (given the file's extent).
 * The first match is taken: a script that prints a copy of the notice only changes its own output.
 */
function rewriteFullOutputClause(
  stdout: string,
  workerPath: string,
  where: (extent: FullOutputExtent) => string,
): string {
  for (const extent of EXTENTS) {
    const clause = `${fullOutputClause(extent, `is in ${workerPath}`)} …]`;
    const at = stdout.indexOf(clause);
    if (at >= 0)
      return `${stdout.slice(0, at)}${fullOutputClause(extent, where(extent))} …]${stdout.slice(at + clause.length)}`;
  }
  return stdout;
}

/**
 * The result whose full output is not at a path of this host: no `fullOutputPath`, and `where` it went (`was not
 * sent home...`) in the omission notice and in `fullOutputNote`.
 */
function withoutFullOutput(result: ExecuteResult, workerPath: string, where: string): ExecuteResult {
  const truncation = result.stdoutTruncated;
  if (truncation === undefined) return result;
  const { fullOutputPath: _path, fullOutputNote: _note, ...kept } = truncation;
  const stdoutTruncated: StdoutTruncation = { ...kept, fullOutputNote: `the full output ${where}` };
  return { ...result, stdout: rewriteFullOutputClause(result.stdout, workerPath, () => where), stdoutTruncated };
}

/**
 * Reads the files of a finished run on the worker for the result message to the agent, and removes the worker's
 * copies: the full stdout file of a truncated output first, then the artifacts, {@link MAX_SENT_ARTIFACT_BYTES} in
 * all. They are read with the checked reader (no link followed, no FIFO waited on, nothing past the cap): the script
 * could reach every file of the run's folder, so each is hostile. What is past the bound or unreadable is not sent:
 * the result's `artifactsNote`, or `stdoutTruncated.fullOutputNote` and the stdout's omission notice, say so. The
 * returned result names no worker path (but in `fullOutput`, for the agent to rewrite the notice).
 */
export async function packRunFiles(result: ExecuteResult, worker: string): Promise<PackedRunFiles> {
  let room = MAX_SENT_ARTIFACT_BYTES;
  let packed = result;
  let fullOutput: SentFullOutput | undefined;
  const truncation = result.stdoutTruncated;
  const workerPath = truncation?.fullOutputPath;
  if (truncation !== undefined && workerPath !== undefined) {
    const data = await readRegularFile(workerPath, room);
    // Unlinking removes a link the script put in its place, never what the link names.
    await filePromises()
      .unlink(workerPath)
      .catch(() => {});
    if (typeof data === 'string') {
      // The reader's refusal of a file over the cap: here the cap is the bound.
      const why = data.startsWith('larger than')
        ? `over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send`
        : data;
      packed = withoutFullOutput(result, workerPath, `was not sent home from worker ${worker} (${why})`);
    } else {
      room -= data.length;
      fullOutput = { workerPath, data: data.toString('base64') };
      const { fullOutputPath: _path, ...kept } = truncation;
      packed = { ...result, stdoutTruncated: kept };
    }
  }
  const { result: withArtifacts, artifacts } = await packArtifacts(packed, worker, room);
  return { result: withArtifacts, artifacts, ...(fullOutput !== undefined ? { fullOutput } : {}) };
}

/** The artifacts part of {@link packRunFiles}, within `room` bytes. */
async function packArtifacts(
  result: ExecuteResult,
  worker: string,
  room: number,
): Promise<{ readonly result: ExecuteResult; readonly artifacts: readonly SentArtifact[] }> {
  const listed = result.artifacts ?? [];
  if (listed.length === 0) return { result, artifacts: [] };
  const sent: SentArtifact[] = [];
  let left = room;
  let overBound = 0;
  const unreadable: string[] = [];
  for (const artifact of listed) {
    const data = await readRegularFile(artifact.path, left);
    if (typeof data === 'string') {
      // The reader's refusal of a file over the cap: here the cap is what is left of the bound.
      if (data.startsWith('larger than')) overBound += 1;
      else unreadable.push(`${basename(artifact.path)} (${data})`);
    } else {
      left -= data.length;
      sent.push({ name: basename(artifact.path), mimeType: artifact.mimeType, data: data.toString('base64') });
    }
    // Unlinking removes a link the script put in its place, never what the link names.
    await filePromises()
      .unlink(artifact.path)
      .catch(() => {});
  }
  const notes = result.artifactsNote === undefined ? [] : [result.artifactsNote];
  if (overBound > 0) {
    notes.push(
      `${overBound} artifact(s) not sent home from worker ${worker}: over the ${MAX_SENT_ARTIFACT_BYTES} bytes a remote run may send`,
    );
  }
  if (unreadable.length > 0) notes.push(`artifacts not sent home from worker ${worker}: ${unreadable.join(', ')}`);
  const { artifacts: _workerPaths, artifactsNote: _note, ...rest } = result;
  return { result: { ...rest, ...(notes.length > 0 ? { artifactsNote: notes.join('; ') } : {}) }, artifacts: sent };
}

/**
 * The reply as the queue keeps it (for an agent whose result message was lost): without the bytes of the artifacts
 * and of the full output, which would stay in Redis for as long as finished jobs do.
 */
export function withoutFileData(reply: WorkerReply): WorkerReply {
  if (reply.result === undefined || (reply.artifacts === undefined && reply.fullOutput === undefined)) return reply;
  const { artifacts, fullOutput, ...rest } = reply;
  const lost = "only with the worker's result message, which did not arrive";
  let result = reply.result;
  if (fullOutput !== undefined) result = withoutFullOutput(result, fullOutput.workerPath, `was sent ${lost}`);
  if (artifacts !== undefined) {
    const note = `${artifacts.length} artifact(s) were sent ${lost}`;
    result = {
      ...result,
      artifactsNote: result.artifactsNote === undefined ? note : `${result.artifactsNote}; ${note}`,
    };
  }
  return { ...rest, result };
}

/** What a worker's result message carries besides the result: unchecked, as it came from Redis. */
export interface ReceivedRunFiles {
  readonly artifacts?: unknown;
  readonly fullOutput?: unknown;
}

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Writes the files a worker sent into the agent's own places for the run and returns the result naming them, as a
 * local run's: the full stdout file at `paths.stdout` (created exclusively, never through a link; the omission notice
 * and `fullOutputPath` name it), the artifacts into `paths.artifacts` (the folder its tool calls saved files in, whose
 * files count too). The worker's message is checked as the script's frames are: names, count, size, encoding.
 */
export async function unpackRunFiles(
  result: ExecuteResult,
  sent: ReceivedRunFiles,
  paths: OutputPaths,
): Promise<ExecuteResult> {
  const withOutput = await unpackFullOutput(result, sent.fullOutput, paths.stdout);
  return unpackArtifacts(withOutput, sent.artifacts, paths.artifacts);
}

async function unpackFullOutput(result: ExecuteResult, sent: unknown, path: string): Promise<ExecuteResult> {
  if (result.stdoutTruncated === undefined || typeof sent !== 'object' || sent === null) return result;
  const { workerPath, data } = sent as Record<string, unknown>;
  if (typeof workerPath !== 'string') return result;
  if (
    typeof data !== 'string' ||
    data.length > Math.ceil(MAX_SENT_ARTIFACT_BYTES / 3) * 4 ||
    !BASE64_PATTERN.test(data)
  ) {
    return withoutFullOutput(result, workerPath, 'was not kept: the worker sent it malformed');
  }
  try {
    await filePromises().mkdir(dirname(path), { recursive: true, mode: 0o700 });
    // `wx`: a file or link already at the path is never written through.
    await filePromises().writeFile(path, Buffer.from(data, 'base64'), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    return withoutFullOutput(
      result,
      workerPath,
      `was not kept: it could not be written on this host (${errorMessage(error)})`,
    );
  }
  return {
    ...result,
    stdout: rewriteFullOutputClause(result.stdout, workerPath, () => `is in ${path}`),
    stdoutTruncated: { ...result.stdoutTruncated, fullOutputPath: path },
  };
}

/** The artifacts part of {@link unpackRunFiles}. */
async function unpackArtifacts(result: ExecuteResult, sent: unknown, folder: string): Promise<ExecuteResult> {
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
