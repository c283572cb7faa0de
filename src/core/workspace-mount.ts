/**
 * How the script sees the workspace: `none` (only through the file tools), `read-only` (mounted read-only, the
 * default), `copy` (a throwaway writable copy; changes are discarded with the run) or `read-write` (the real files).
 */
export type WorkspaceMount = 'none' | 'read-only' | 'copy' | 'read-write';

/** The modes of {@link WorkspaceMount}, in order of what the script may do. */
export const WORKSPACE_MOUNTS: readonly WorkspaceMount[] = Object.freeze(['none', 'read-only', 'copy', 'read-write']);

/** The mode when none is configured. */
export const DEFAULT_WORKSPACE_MOUNT: WorkspaceMount = 'read-only';

/** Whether `value` names a {@link WorkspaceMount}. */
export function isWorkspaceMount(value: unknown): value is WorkspaceMount {
  return typeof value === 'string' && (WORKSPACE_MOUNTS as readonly string[]).includes(value);
}
