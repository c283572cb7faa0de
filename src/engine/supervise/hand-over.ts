import { CELL_NOTIFICATION, encodeNotification, RUN_NOTIFICATION } from '../../rpc/protocol.js';

/** The code as the file a cold run would have written: lone surrogates become U+FFFD, as Node encodes them. */
export function wellFormed(code: string): string {
  return /[\uD800-\uDFFF]/.test(code) ? Buffer.from(code, 'utf8').toString('utf8') : code;
}

/** The `$run` frame that hands a warm-pool interpreter its script. */
export function runFrame(code: string): string {
  return encodeNotification(RUN_NOTIFICATION, { code: wellFormed(code) });
}

/** What a session interpreter needs to run one cell. */
export interface CellHandOver {
  readonly id: number;
  readonly code: string;
  /** Nonce of the end marker the boot writes on stdout and stderr after the cell. */
  readonly nonce: string;
  /** CPU seconds the cell may use on top of what the interpreter used before it. */
  readonly cpuSeconds: number;
}

/** The `$cell` frame that hands a session interpreter its next cell. */
export function cellFrame(cell: CellHandOver): string {
  return encodeNotification(CELL_NOTIFICATION, {
    id: cell.id,
    code: wellFormed(cell.code),
    nonce: cell.nonce,
    cpuSeconds: cell.cpuSeconds,
  });
}
