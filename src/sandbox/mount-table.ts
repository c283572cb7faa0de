import { writeFileSync } from 'node:fs';

/** One line of a mount table (fstab(5)): what to mount where, with which type and options. */
export interface MountTableEntry {
  readonly source: string;
  readonly target: string;
  /** `none` for a bind or a remount. */
  readonly type: string;
  /** Comma-separated mount options, e.g. `bind,ro,nosuid,nodev`. */
  readonly options: string;
}

/** Bytes written as they are in a field; every other byte becomes an octal escape, which libmount reads back. */
const PLAIN_FIELD_BYTE = /^[A-Za-z0-9._/+=:@,-]$/;

/**
 * A path or word as one fstab field: fields are split at white space, so every byte outside a small safe set
 * (spaces, tabs, newlines, `\`, `#`, anything not ASCII) is written as `\ooo`, which libmount decodes.
 */
export function mountTableField(text: string): string {
  let field = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const character = String.fromCharCode(byte);
    field += PLAIN_FIELD_BYTE.test(character) ? character : `\\${byte.toString(8).padStart(3, '0')}`;
  }
  return field;
}

/** The text of a mount table holding `entries` in order. */
export function mountTableText(entries: readonly MountTableEntry[]): string {
  return entries
    .map(
      (entry) =>
        `${mountTableField(entry.source)} ${mountTableField(entry.target)} ${mountTableField(entry.type)} ` +
        `${mountTableField(entry.options)} 0 0\n`,
    )
    .join('');
}

/**
 * Writes a mount table for `mount -a -T <path>` (util-linux), which makes every mount of it in order in one process
 * (a bind with flags is bound and remounted, `X-mount.mkdir` makes a missing mount point): one process where a shell
 * would start one mount(8) per line. Written only by and for root (mode 0600); the path must be a new one in a folder
 * of root's own.
 */
export function writeMountTable(path: string, entries: readonly MountTableEntry[]): void {
  writeFileSync(path, mountTableText(entries), { mode: 0o600, flag: 'wx' });
}
