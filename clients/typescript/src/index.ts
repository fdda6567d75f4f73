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
export type ApprovalStatus =
  "pending" | "approved" | "denied" | "expired" | "cancelled" | "consumed";

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

const EFFECTS: ReadonlySet<string> = new Set(["allow", "modify", "deny", "ask", "halt"]);

/** Anything this client throws. */
export class CallwardenError extends Error {
  /** The HTTP status of the service's error answer; 0 when there was none (no answer, or a
   * refusal of guard()). */
  readonly status: number;
  /** The service's error code (`unauthorized`, `forbidden`, ...) or the client's own. */
  readonly code: string;

  constructor(message: string, status: number, code: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
  }
}

/** The service gave no answer: the connection failed or the request timed out. */
export class ServiceUnavailable extends CallwardenError {}

/** {@link CallwardenClient.guard} did not run the tool; `decision` says which rule and why. */
export class ToolDenied extends CallwardenError {
  readonly decision: Decision;

  constructor(decision: Decision, message = describeRefusal(decision), code = "denied") {
    super(message, 0, code);
    this.decision = decision;
  }
}

/** The call needs a person's approval; approve `approvalRequest`, then make the same call. */
export class ApprovalRequired extends ToolDenied {
  readonly approvalRequest: string | null;

  constructor(decision: Decision) {
    super(decision, describePending(decision), "approval_required");
    this.approvalRequest = decision.approval_request;
  }
}

/** A rule halted: the agent run must stop, not merely skip this tool. */
export class RunHalted extends ToolDenied {
  /** Set when an output rule halted after the tool ran. */
  readonly screened: Screened | null;

  constructor(decision: Decision, screened: Screened | null = null) {
    super(decision, `callwarden halted the run: ${describeRefusal(decision)} No further tool ` +
      "calls will run.", "halted");
    this.screened = screened;
  }
}

/** The text an agent receives for a call that did not run (never empty). */
export function describeRefusal(decision: Decision): string {
  if (decision.message) return decision.message;
  const why = decision.reasons[0]?.message ?? "blocked by policy";
  return `The call to '${decision.call.tool}' was not run (${decision.effect}): ${why}.`;
}

/** The text an agent receives for a call that waits for a person's approval. */
export function describePending(decision: Decision): string {
  const why = decision.message ? ` ${decision.message}` : "";
  return `The call to '${decision.call.tool}' needs a person's approval and was not run:${why} ` +
    `Approval request ${decision.approval_request} is pending; once approved, the same call ` +
    "with the same arguments runs once.";
}

/** The error {@link CallwardenClient.guard} throws for a decision that does not allow the call. */
export function refusalOf(decision: Decision): ToolDenied {
  if (decision.effect === "ask") return new ApprovalRequired(decision);
  if (decision.effect === "halt") return new RunHalted(decision);
  return new ToolDenied(decision);
}

/** Whether the decision lets the tool run (`allow` or `modify`). */
export function allows(decision: Decision): boolean {
  return decision.effect === "allow" || decision.effect === "modify";
}

/** A client of one `callwarden serve`. */
export class CallwardenClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly #token: string;

  constructor({ baseUrl, token, timeoutMs = 10_000 }: ClientOptions) {
    const url = new URL(baseUrl);  // throws a TypeError for what is not a URL
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`baseUrl must be an http(s) URL, not ${baseUrl}`);
    }
    if (!token) throw new TypeError("token must be a token of the service's token file");
    if (!(timeoutMs > 0 && Number.isFinite(timeoutMs))) {
      throw new TypeError(`timeoutMs must be a positive number of milliseconds, not ${timeoutMs}`);
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#token = token;
    this.timeoutMs = timeoutMs;
  }

  /** Decides one tool call; the decision's `effect` says whether it may run. */
  async decide(call: ToolCall): Promise<Decision> {
    const decision = await this.#request("POST", "/v1/decide", call);
    if (!isDecision(decision)) {
      throw new CallwardenError("the service's answer to /v1/decide is not a decision", 200,
        "bad_response");
    }
    return decision;
  }

  /** Screens a tool's result with the output rules and records the outcome. */
  async outcome(decision: Decision, result: unknown,
    { failed = false, durationMs }: { failed?: boolean; durationMs?: number } = {}
  ): Promise<Screened> {
    const screened = await this.#request("POST", "/v1/outcome", {
      decision, result, failed, ...(durationMs === undefined ? {} : { duration_ms: durationMs }),
    });
    if (!isObject(screened) || typeof screened["halt"] !== "boolean" || !("result" in screened)) {
      throw new CallwardenError("the service's answer to /v1/outcome is not a screened result",
        200, "bad_response");
    }
    return screened as unknown as Screened;
  }

  /** Lists approval requests (an approver or admin token). */
  async approvals(filter: ApprovalFilter = {}): Promise<Approval[]> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(filter)) {
      if (value !== undefined) query.set(name, value);
    }
    const text = query.toString();
    const body = await this.#request("GET", `/v1/approvals${text ? `?${text}` : ""}`);
    if (!isObject(body) || !Array.isArray(body["approvals"])) {
      throw new CallwardenError("the service's answer to /v1/approvals is not a list", 200,
        "bad_response");
    }
    return body["approvals"] as Approval[];
  }

  /** One approval request. */
  async approval(id: string): Promise<Approval> {
    return await this.#request("GET", `/v1/approvals/${encodeURIComponent(id)}`) as Approval;
  }

  /**
   * Approves a request; `args` approves these arguments instead (edit-and-approve); `remember`
   * also makes a standing grant, answered as `grant` (a request a quorum must approve gets
   * none: the service refuses it with 400, approving nothing).
   */
  async approve(id: string, { comment, args, remember }: { comment?: string;
    args?: Record<string, unknown>; remember?: Remember } = {}
  ): Promise<Approval & { grant?: Grant | null }> {
    return await this.#request("POST", `/v1/approvals/${encodeURIComponent(id)}/approve`,
      { comment, args, remember }) as Approval & { grant?: Grant | null };
  }

  /** Lists standing grants (an approver or admin token). */
  async grants(filter: GrantFilter = {}): Promise<Grant[]> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(filter)) {
      if (value !== undefined) query.set(name, value);
    }
    const text = query.toString();
    const body = await this.#request("GET", `/v1/grants${text ? `?${text}` : ""}`);
    if (!isObject(body) || !Array.isArray(body["grants"])) {
      throw new CallwardenError("the service's answer to /v1/grants is not a list", 200,
        "bad_response");
    }
    return body["grants"] as Grant[];
  }

  /** Revokes an active grant, as the token's holder (409 when revoked already or expired). */
  async revokeGrant(id: string): Promise<Grant> {
    return await this.#request("POST", `/v1/grants/${encodeURIComponent(id)}/revoke`) as Grant;
  }

  /** Denies a request; the agent reads `reason` when it makes the call again. */
  async deny(id: string, { reason }: { reason?: string } = {}): Promise<Approval> {
    return await this.#request("POST", `/v1/approvals/${encodeURIComponent(id)}/deny`,
      { reason }) as Approval;
  }

  /**
   * Runs `fn` only if the policy allows the call, with the arguments it decided (rewritten
   * for `modify`), and returns the result after the output rules: what the model may see.
   *
   * @throws ToolDenied (or ApprovalRequired, RunHalted) when the decision is deny, ask or
   *   halt; CallwardenError when the service cannot decide. Either way `fn` does not run.
   * @throws whatever `fn` throws (recorded as a failed outcome).
   */
  async guard<A = unknown>(toolName: string, args: unknown, fn: (args: A) => unknown,
    fields: CallFields = {}): Promise<unknown> {
    const decision = await this.decide({ ...fields, tool: toolName, args });
    if (!allows(decision)) throw refusalOf(decision);
    const started = performance.now();
    let result: unknown;
    try {
      result = await fn(decision.args as A);
    } catch (error) {
      try {
        await this.outcome(decision, String(error), {
          failed: true, durationMs: performance.now() - started });
      } catch {
        // The tool's own error is the one to see; the outcome is recorded only if it can be.
      }
      throw error;
    }
    // No screened result, no result: an unscreened one may hold what an output rule removes.
    const screened = await this.outcome(decision, result,
      { durationMs: performance.now() - started });
    if (screened.halt) throw new RunHalted(decision, screened);
    return screened.result;
  }

  async #request(method: string, path: string, body?: unknown): Promise<unknown> {
    let response: Response;
    let text: string;
    try {
      response = await fetch(this.baseUrl + path, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: "error",
      });
      text = await response.text();
    } catch (error) {
      const timedOut = error instanceof Error && error.name === "TimeoutError";
      const why = timedOut ? `no answer within ${this.timeoutMs} ms` : describeCause(error);
      throw new ServiceUnavailable(`callwarden service at ${this.baseUrl} could not be reached: ${
        why}`, 0, timedOut ? "timeout" : "unreachable", { cause: error });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new CallwardenError(`the service answered ${method} ${path} with HTTP ${
        response.status} and no JSON`, response.status, "bad_response", { cause: error });
    }
    if (!response.ok) {
      const problem = isObject(parsed) && isObject(parsed["error"]) ? parsed["error"] : {};
      const code = typeof problem["code"] === "string" ? problem["code"] : "http_error";
      const message = typeof problem["message"] === "string" ? problem["message"]
        : `HTTP ${response.status}`;
      throw new CallwardenError(message, response.status, code);
    }
    return parsed;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isDecision(value: unknown): value is Decision {
  return isObject(value) && typeof value["effect"] === "string" && EFFECTS.has(value["effect"])
    && typeof value["decision_id"] === "string" && isObject(value["call"]);
}

function describeCause(error: unknown): string {
  // Node's fetch says "fetch failed"; the reason (ECONNREFUSED, ...) is its cause.
  const cause = error instanceof Error ? error.cause : undefined;
  const text = (e: unknown) => e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return cause === undefined ? text(error) : `${text(error)} (${text(cause)})`;
}
