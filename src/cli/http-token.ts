import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { resolve } from 'node:path';
import { CodecallError } from '../core/errors.js';
import { filePromises } from '../core/file-promises.js';
import { checkHttpToken } from '../mcp-server/http-access.js';

/** Environment variable holding the bearer token of `codecall serve --http`. */
export const HTTP_TOKEN_ENVIRONMENT_VARIABLE = 'CODECALL_HTTP_TOKEN';

/** Largest token file read (a token is a line of a few dozen characters). */
const MAX_TOKEN_FILE_BYTES = 4096;

/** Where the bearer token of `serve --http` comes from. */
export interface HttpTokenSetting {
  /** The configured token; undefined when a random one is generated at each start. */
  readonly token: string | undefined;
  /** For people: `CODECALL_HTTP_TOKEN`, `file /path`, or `generated`. */
  readonly source: string;
}

/** Options of {@link readHttpToken}. */
export interface ReadHttpTokenOptions {
  /** `--token-file`: a file holding the token (its first line), private to this user. */
  readonly tokenFile?: string | undefined;
  /** The environment to read {@link HTTP_TOKEN_ENVIRONMENT_VARIABLE} from. */
  readonly environment: Readonly<Record<string, string | undefined>>;
}

/**
 * Finds the bearer token of `serve --http`: from `--token-file`, or from `CODECALL_HTTP_TOKEN`, or none (a random
 * one is generated at start). Never from a command-line value, which other users can read in the process list.
 * @throws CodecallError `INVALID_CONFIG` when both are given, when the file is not a regular file of this user that
 * only this user can read and write, or when the token is too short or has characters a bearer token cannot have.
 */
export async function readHttpToken(options: ReadHttpTokenOptions): Promise<HttpTokenSetting> {
  const fromEnvironment = options.environment[HTTP_TOKEN_ENVIRONMENT_VARIABLE];
  if (options.tokenFile !== undefined) {
    if (fromEnvironment !== undefined) {
      throw new CodecallError(
        'INVALID_CONFIG',
        `both --token-file and ${HTTP_TOKEN_ENVIRONMENT_VARIABLE} are set; give the token one way`,
        { key: 'token-file' },
      );
    }
    const path = resolve(options.tokenFile);
    const token = checkHttpToken(await readTokenFile(path), `the token in ${path}`);
    return { token, source: `file ${path}` };
  }
  if (fromEnvironment !== undefined) {
    return {
      token: checkHttpToken(fromEnvironment, HTTP_TOKEN_ENVIRONMENT_VARIABLE),
      source: HTTP_TOKEN_ENVIRONMENT_VARIABLE,
    };
  }
  return { token: undefined, source: 'generated' };
}

async function readTokenFile(path: string): Promise<string> {
  const fail = (reason: string) =>
    new CodecallError('INVALID_CONFIG', `--token-file ${path}: ${reason}`, { key: 'token-file', value: path });
  let file: FileHandle;
  try {
    file = await filePromises().open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw fail(code === 'ELOOP' ? 'it is a symbolic link; give the file itself' : `cannot be opened (${code})`);
  }
  try {
    // Checked on the open descriptor, so the file read is the file checked.
    const stats = await file.stat();
    if (!stats.isFile()) throw fail('it is not a regular file');
    if (stats.uid !== process.getuid?.()) throw fail(`it belongs to another user (uid ${stats.uid})`);
    if ((stats.mode & 0o077) !== 0) {
      throw fail(`other users can read or write it (mode ${(stats.mode & 0o777).toString(8)}); chmod 600 it`);
    }
    if (stats.size > MAX_TOKEN_FILE_BYTES) throw fail(`it has ${stats.size} bytes; a token file holds one line`);
    const text = await file.readFile('utf8');
    return text.split('\n', 1)[0]?.trim() ?? '';
  } finally {
    await file.close();
  }
}
