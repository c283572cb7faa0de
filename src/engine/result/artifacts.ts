/** Artifacts kept from one run or cell at most. */
export const MAX_ARTIFACTS = 100;
/** Bytes kept from one run's artifacts at most. */
export const MAX_ARTIFACT_BYTES = 100 * 1024 * 1024;
