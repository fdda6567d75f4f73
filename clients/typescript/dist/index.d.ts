/**
 * Client for callwarden's decision service (`callwarden serve`): decide an AI agent's tool
 * call, run it only when the policy allows it, and screen its result.
 *
 * It fails closed: when the service cannot be reached, answers late, or answers something
 * that is not a decision, {@link CallwardenClient.guard} throws and the tool does not run.
 *
 * Every error is one tree under {@link CallwardenError}:
 *
 * ```text
 * CallwardenError           the service answered an error (status, code), or nothing usable
 * ├── ServiceUnavailable    no answer at all: the connection failed or timed out (status 0)
 * └── ToolDenied            guard() did not run the tool (carries the decision)
 *     ├── ApprovalRequired  the decision was `ask`: approvalRequest names the request
 *     └── RunHalted         the decision (or an output rule) was `halt`: stop the whole run
 * ```
 *
 * @module
 */
/** What a policy decided for a call. */
export type Effect = "allow" | "modify" | "deny" | "ask" | "halt";
/** A tool call's fields besides its tool and arguments. */
export interface CallFields {
    agent?: string;
    session?: string;
    principal?: string;
    framework?: string;
    call_id?: string;
    context?: Record<string, unknown>;
    /** Resume with this approved request: the exact approved call runs once. */
    approval_id?: string;
}
/** A tool call to decide (the body of `POST /v1/decide`). */
export interface ToolCall extends CallFields {
    tool: string;
    /** An object; anything else is denied with the reason. */
    args?: unknown;
}
/** The call as the service recorded it. */
export interface Call {
    tool: string;
    args: unknown;
    call_id: string;
    agent?: string | null;
    session?: string | null;
    principal?: string | null;
    framework?: string | null;
    timestamp?: number;
    context?: Record<string, unknown>;
}
/** One reason a decision gives. */
export interface Reason {
    code: string;
    message: string;
    rule?: string | null;
}
/** The service's answer to `POST /v1/decide`. */
export interface Decision {
    decision_id: string;
    effect: Effect;
    /** In observe mode: what the policy would have decided. */
    would_effect?: Effect | null;
    mode: "enforce" | "observe";
    rule: string | null;
    source?: string | null;
    message: string;
    reasons: Reason[];
    matched: Record<string, unknown>[];
    call: Call;
    /** The arguments the tool runs with (rewritten for `modify`). */
    args: unknown;
    elapsed_us?: number;
    policy?: string | null;
    /** For `ask`: the approval request; once approved, the same call is allowed once. */
    approval_request: string | null;
}
/** A tool's result after the policy's output rules (`POST /v1/outcome`). */
export interface Screened {
    status: "ok" | "error" | "output_blocked" | "output_modified";
    /** What the model may see. */
    result: unknown;
    halt: boolean;
    rule: string | null;
    source: string | null;
}
/** The states of an approval request. */
export type ApprovalStatus = "pending" | "approved" | "denied" | "expired" | "cancelled" | "consumed";
/** An approval request. */
export interface Approval {
    id: string;
    tool: string;
    args: Record<string, unknown>;
    status: ApprovalStatus;
    agent?: string | null;
    principal?: string | null;
    session?: string | null;
    rule?: string | null;
    message?: string | null;
    resolved_by?: string | null;
    edited_args?: Record<string, unknown> | null;
    [field: string]: unknown;
}
/** Which approval requests {@link CallwardenClient.approvals} lists. */
export interface ApprovalFilter {
    status?: ApprovalStatus;
    session?: string;
    agent?: string;
    tool?: string;
}
/** Whom a standing grant covers: the call's session, its agent, or anyone. */
export type GrantScope = "session" | "agent" | "tool";
/** Whether a standing grant still applies. */
export type GrantStatus = "active" | "revoked" | "expired";
/** A standing grant: an approval remembered so that the calls it covers are not asked again. */
export interface Grant {
    id: string;
    scope: GrantScope;
    /** The tool name or glob it covers. */
    tool: string;
    session?: string | null;
    agent?: string | null;
    /** Who granted it. */
    by: string;
    created: number;
    expires: number;
    status: GrantStatus;
    /** Whether it covers one exact call only (`args`, with secrets redacted). */
    exact: boolean;
    args?: Record<string, unknown> | null;
    request_id?: string | null;
    revoked_at?: number | null;
    revoked_by?: string | null;
    [field: string]: unknown;
}
/** Approve, and don't ask again: the grant {@link CallwardenClient.approve} remembers. */
export interface Remember {
    scope: GrantScope;
    /** Seconds it lasts, at most a year (default: the approvals' ttl). */
    ttl?: number;
    /** Only this exact call (default: every call of the tool in the scope). */
    exact?: boolean;
}
/** Which grants {@link CallwardenClient.grants} lists (active ones unless `status` says). */
export interface GrantFilter {
    status?: GrantStatus | "any";
    session?: string;
    agent?: string;
    /** The grants that cover this tool. */
    tool?: string;
}
/** How to reach the service. */
export interface ClientOptions {
    /** The URL `callwarden serve` prints, e.g. `http://127.0.0.1:8787`. */
    baseUrl: string;
    /** A token of the service's token file (agent role to decide, approver to approve). */
    token: string;
    /** How long one request may take before it counts as no answer; 10 seconds by default. */
    timeoutMs?: number;
}
/** Anything this client throws. */
export declare class CallwardenError extends Error {
    /** The HTTP status of the service's error answer; 0 when there was none (no answer, or a
     * refusal of guard()). */
    readonly status: number;
    /** The service's error code (`unauthorized`, `forbidden`, ...) or the client's own. */
    readonly code: string;
    constructor(message: string, status: number, code: string, options?: ErrorOptions);
}
/** The service gave no answer: the connection failed or the request timed out. */
export declare class ServiceUnavailable extends CallwardenError {
}
/** {@link CallwardenClient.guard} did not run the tool; `decision` says which rule and why. */
export declare class ToolDenied extends CallwardenError {
    readonly decision: Decision;
    constructor(decision: Decision, message?: string, code?: string);
}
/** The call needs a person's approval; approve `approvalRequest`, then make the same call. */
export declare class ApprovalRequired extends ToolDenied {
    readonly approvalRequest: string | null;
    constructor(decision: Decision);
}
/** A rule halted: the agent run must stop, not merely skip this tool. */
export declare class RunHalted extends ToolDenied {
    /** Set when an output rule halted after the tool ran. */
    readonly screened: Screened | null;
    constructor(decision: Decision, screened?: Screened | null);
}
/** The text an agent receives for a call that did not run (never empty). */
export declare function describeRefusal(decision: Decision): string;
/** The text an agent receives for a call that waits for a person's approval. */
export declare function describePending(decision: Decision): string;
/** The error {@link CallwardenClient.guard} throws for a decision that does not allow the call. */
export declare function refusalOf(decision: Decision): ToolDenied;
/** Whether the decision lets the tool run (`allow` or `modify`). */
export declare function allows(decision: Decision): boolean;
/** A client of one `callwarden serve`. */
export declare class CallwardenClient {
    #private;
    readonly baseUrl: string;
    readonly timeoutMs: number;
    constructor({ baseUrl, token, timeoutMs }: ClientOptions);
    /** Decides one tool call; the decision's `effect` says whether it may run. */
    decide(call: ToolCall): Promise<Decision>;
    /** Screens a tool's result with the output rules and records the outcome. */
    outcome(decision: Decision, result: unknown, { failed, durationMs }?: {
        failed?: boolean;
        durationMs?: number;
    }): Promise<Screened>;
    /** Lists approval requests (an approver or admin token). */
    approvals(filter?: ApprovalFilter): Promise<Approval[]>;
    /** One approval request. */
    approval(id: string): Promise<Approval>;
    /**
     * Approves a request; `args` approves these arguments instead (edit-and-approve); `remember`
     * also makes a standing grant, answered as `grant` (a request a quorum must approve gets
     * none: the service refuses it with 400, approving nothing).
     */
    approve(id: string, { comment, args, remember }?: {
        comment?: string;
        args?: Record<string, unknown>;
        remember?: Remember;
    }): Promise<Approval & {
        grant?: Grant | null;
    }>;
    /** Lists standing grants (an approver or admin token). */
    grants(filter?: GrantFilter): Promise<Grant[]>;
    /** Revokes an active grant, as the token's holder (409 when revoked already or expired). */
    revokeGrant(id: string): Promise<Grant>;
    /** Denies a request; the agent reads `reason` when it makes the call again. */
    deny(id: string, { reason }?: {
        reason?: string;
    }): Promise<Approval>;
    /**
     * Runs `fn` only if the policy allows the call, with the arguments it decided (rewritten
     * for `modify`), and returns the result after the output rules: what the model may see.
     *
     * @throws ToolDenied (or ApprovalRequired, RunHalted) when the decision is deny, ask or
     *   halt; CallwardenError when the service cannot decide. Either way `fn` does not run.
     * @throws whatever `fn` throws (recorded as a failed outcome).
     */
    guard<A = unknown>(toolName: string, args: unknown, fn: (args: A) => unknown, fields?: CallFields): Promise<unknown>;
}
