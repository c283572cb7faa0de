/**
 * How the host hands an interpreter its tool channel and its settings: the child's file descriptor layout and the
 * environment variables the Python boot reads. `python/codecall_boot.py` mirrors `BootVariable`; the protocol parity
 * test compares the two. Here, at the bottom, because both the sandbox (which builds the environment and places
 * descriptors) and the engine (which spawns) need it.
 */

/** File descriptor of the tool channel in the child: stdio slot 3, after stdin, stdout and stderr. */
export const CHANNEL_FILE_DESCRIPTOR = 3;

/** Where a launch plan's `inheritedFileDescriptors` start in the child: right after the channel (4, 5, ...). */
export const FIRST_INHERITED_FILE_DESCRIPTOR = CHANNEL_FILE_DESCRIPTOR + 1;

/** Environment variables through which the host tells the boot and the runtime their settings. */
export const BootVariable = {
  /** The tool channel's descriptor number ({@link CHANNEL_FILE_DESCRIPTOR}). */
  channelFileDescriptor: 'CODECALL_CHANNEL_FD',
  /** Largest frame on the channel, in bytes. */
  maxFrameBytes: 'CODECALL_MAX_FRAME_BYTES',
  /** Nonce of the end marker of a cold or pooled run's output; the boot removes it before the script runs. */
  outputNonce: 'CODECALL_OUTPUT_NONCE',
  /** The run's rlimits: `as=N,nproc=N,fsize=N,nofile=N,cpu=N,core=0`. */
  resourceLimits: 'CODECALL_RLIMITS',
  /**
   * Isolation `none` on a host that is not root: the pid that must be the boot's parent. It sets `PR_SET_PDEATHSIG`
   * (SIGKILL) and exits at once when its parent is another one already (the host died before the boot ran).
   */
  parentPid: 'CODECALL_PARENT_PID',
  /** The directory the boot changes to first (a run entering a mount namespace starts at its root). */
  workDirectory: 'CODECALL_WORK_DIR',
  /** The folder whose files the runtime sends as artifacts when the script (or a cell) ends (the script's own). */
  artifactsDirectory: 'CODECALL_ARTIFACTS_DIR',
  /** Where the script starts: the workspace as it sees it, when mounted (also documented to scripts). */
  workspace: 'CODECALL_WORKSPACE',
} as const;
