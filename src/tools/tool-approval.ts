import { describeThrownValue } from './tool-result.js';

/** What an approval hook sees of a tool call that needs approval. */
export interface ToolApprovalRequest {
  /** Wire name of the tool. */
  readonly tool: string;
  /** The call's arguments after validation (defaults applied): what the tool will receive if allowed. */
  readonly arguments: Readonly<Record<string, unknown>>;
  /** Id of the run (or session interpreter) that made the call. */
  readonly runId: string;
  /** Fires when the call can no longer be made: it timed out (the wait counts toward its timeout) or the run ended. */
  readonly signal: AbortSignal;
}

/** What an approval hook decides: allow (`true`), deny (`false`), or deny with a reason the script sees. */
export type ToolApprovalDecision =
  | boolean
  | { readonly allow: true }
  | { readonly allow: false; readonly reason?: string | undefined };

/**
 * The `approveToolCall` hook of `createCodecall`: called for every call of a tool that needs approval, before the
 * tool runs. A throw or a rejection denies the call.
 */
export type ApproveToolCall = (request: ToolApprovalRequest) => ToolApprovalDecision | Promise<ToolApprovalDecision>;

/** A tool's `needsApproval`: always, never, or decided from the call's (validated) arguments. */
export type NeedsApproval<Args> = boolean | ((args: Args) => boolean | Promise<boolean>);

/** Reason given when a call needs approval and the codecall has no hook to ask. */
export const NO_APPROVAL_HOOK_REASON =
  'this tool needs approval and no approveToolCall hook is configured, so the call was not made';

/**
 * Rejection of a tool whose call was denied elsewhere: a fleet worker's forwarded call that the agent's approval
 * denied. The engine counts it as a denied call (result `deniedToolCalls`, trace status `denied`), not a failed one.
 */
export class ToolCallDeniedError extends Error {
  override readonly name = 'ToolCallDeniedError';
}

/** Outcome of asking: allowed, or denied with the reason the script sees. */
export type ApprovalOutcome = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

const ALLOWED: ApprovalOutcome = { allowed: true };

/**
 * Asks the hook about one call and reads its answer; never throws. No hook, a throwing or rejecting hook, and an
 * answer that is none of the documented shapes all deny.
 */
export async function askApproval(
  hook: ApproveToolCall | undefined,
  request: ToolApprovalRequest,
): Promise<ApprovalOutcome> {
  if (hook === undefined) return { allowed: false, reason: NO_APPROVAL_HOOK_REASON };
  let decision: unknown;
  try {
    decision = await hook(request);
  } catch (error) {
    return { allowed: false, reason: `the approval hook failed: ${describeThrownValue(error)}` };
  }
  if (decision === true) return ALLOWED;
  if (decision === false) return { allowed: false, reason: 'the call was denied' };
  if (typeof decision === 'object' && decision !== null && 'allow' in decision) {
    const { allow, reason } = decision as { allow: unknown; reason?: unknown };
    if (allow === true) return ALLOWED;
    if (allow === false) {
      return {
        allowed: false,
        reason: typeof reason === 'string' && reason.length > 0 ? reason : 'the call was denied',
      };
    }
  }
  return {
    allowed: false,
    reason: 'the approval hook gave no valid answer (expected true, false or { allow, reason })',
  };
}
