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
const EFFECTS = new Set(["allow", "modify", "deny", "ask", "halt"]);
/** Anything this client throws. */
export class CallwardenError extends Error {
    /** The HTTP status of the service's error answer; 0 when there was none (no answer, or a
     * refusal of guard()). */
    status;
    /** The service's error code (`unauthorized`, `forbidden`, ...) or the client's own. */
    code;
    constructor(message, status, code, options) {
        super(message, options);
        this.name = new.target.name;
        this.status = status;
        this.code = code;
    }
}
/** The service gave no answer: the connection failed or the request timed out. */
export class ServiceUnavailable extends CallwardenError {
}
/** {@link CallwardenClient.guard} did not run the tool; `decision` says which rule and why. */
export class ToolDenied extends CallwardenError {
    decision;
    constructor(decision, message = describeRefusal(decision), code = "denied") {
        super(message, 0, code);
        this.decision = decision;
    }
}
/** The call needs a person's approval; approve `approvalRequest`, then make the same call. */
export class ApprovalRequired extends ToolDenied {
    approvalRequest;
    constructor(decision) {
        super(decision, describePending(decision), "approval_required");
        this.approvalRequest = decision.approval_request;
    }
}
/** A rule halted: the agent run must stop, not merely skip this tool. */
export class RunHalted extends ToolDenied {
    /** Set when an output rule halted after the tool ran. */
    screened;
    constructor(decision, screened = null) {
        super(decision, `callwarden halted the run: ${describeRefusal(decision)} No further tool ` +
            "calls will run.", "halted");
        this.screened = screened;
    }
}
/** The text an agent receives for a call that did not run (never empty). */
export function describeRefusal(decision) {
    if (decision.message)
        return decision.message;
    const why = decision.reasons[0]?.message ?? "blocked by policy";
    return `The call to '${decision.call.tool}' was not run (${decision.effect}): ${why}.`;
}
/** The text an agent receives for a call that waits for a person's approval. */
export function describePending(decision) {
    const why = decision.message ? ` ${decision.message}` : "";
    return `The call to '${decision.call.tool}' needs a person's approval and was not run:${why} ` +
        `Approval request ${decision.approval_request} is pending; once approved, the same call ` +
        "with the same arguments runs once.";
}
/** The error {@link CallwardenClient.guard} throws for a decision that does not allow the call. */
export function refusalOf(decision) {
    if (decision.effect === "ask")
        return new ApprovalRequired(decision);
    if (decision.effect === "halt")
        return new RunHalted(decision);
    return new ToolDenied(decision);
}
/** Whether the decision lets the tool run (`allow` or `modify`). */
export function allows(decision) {
    return decision.effect === "allow" || decision.effect === "modify";
}
/** A client of one `callwarden serve`. */
export class CallwardenClient {
    baseUrl;
    timeoutMs;
    #token;
    constructor({ baseUrl, token, timeoutMs = 10_000 }) {
        const url = new URL(baseUrl); // throws a TypeError for what is not a URL
        if (url.protocol !== "http:" && url.protocol !== "https:") {
            throw new TypeError(`baseUrl must be an http(s) URL, not ${baseUrl}`);
        }
        if (!token)
            throw new TypeError("token must be a token of the service's token file");
        if (!(timeoutMs > 0 && Number.isFinite(timeoutMs))) {
            throw new TypeError(`timeoutMs must be a positive number of milliseconds, not ${timeoutMs}`);
        }
        this.baseUrl = baseUrl.replace(/\/+$/, "");
        this.#token = token;
        this.timeoutMs = timeoutMs;
    }
    /** Decides one tool call; the decision's `effect` says whether it may run. */
    async decide(call) {
        const decision = await this.#request("POST", "/v1/decide", call);
        if (!isDecision(decision)) {
            throw new CallwardenError("the service's answer to /v1/decide is not a decision", 200, "bad_response");
        }
        return decision;
    }
    /** Screens a tool's result with the output rules and records the outcome. */
    async outcome(decision, result, { failed = false, durationMs } = {}) {
        const screened = await this.#request("POST", "/v1/outcome", {
            decision, result, failed, ...(durationMs === undefined ? {} : { duration_ms: durationMs }),
        });
        if (!isObject(screened) || typeof screened["halt"] !== "boolean" || !("result" in screened)) {
            throw new CallwardenError("the service's answer to /v1/outcome is not a screened result", 200, "bad_response");
        }
        return screened;
    }
    /** Lists approval requests (an approver or admin token). */
    async approvals(filter = {}) {
        const query = new URLSearchParams();
        for (const [name, value] of Object.entries(filter)) {
            if (value !== undefined)
                query.set(name, value);
        }
        const text = query.toString();
        const body = await this.#request("GET", `/v1/approvals${text ? `?${text}` : ""}`);
        if (!isObject(body) || !Array.isArray(body["approvals"])) {
            throw new CallwardenError("the service's answer to /v1/approvals is not a list", 200, "bad_response");
        }
        return body["approvals"];
    }
    /** One approval request. */
    async approval(id) {
        return await this.#request("GET", `/v1/approvals/${encodeURIComponent(id)}`);
    }
    /**
     * Approves a request; `args` approves these arguments instead (edit-and-approve); `remember`
     * also makes a standing grant, answered as `grant` (a request a quorum must approve gets
     * none: the service refuses it with 400, approving nothing).
     */
    async approve(id, { comment, args, remember } = {}) {
        return await this.#request("POST", `/v1/approvals/${encodeURIComponent(id)}/approve`, { comment, args, remember });
    }
    /** Lists standing grants (an approver or admin token). */
    async grants(filter = {}) {
        const query = new URLSearchParams();
        for (const [name, value] of Object.entries(filter)) {
            if (value !== undefined)
                query.set(name, value);
        }
        const text = query.toString();
        const body = await this.#request("GET", `/v1/grants${text ? `?${text}` : ""}`);
        if (!isObject(body) || !Array.isArray(body["grants"])) {
            throw new CallwardenError("the service's answer to /v1/grants is not a list", 200, "bad_response");
        }
        return body["grants"];
    }
    /** Revokes an active grant, as the token's holder (409 when revoked already or expired). */
    async revokeGrant(id) {
        return await this.#request("POST", `/v1/grants/${encodeURIComponent(id)}/revoke`);
    }
    /** Denies a request; the agent reads `reason` when it makes the call again. */
    async deny(id, { reason } = {}) {
        return await this.#request("POST", `/v1/approvals/${encodeURIComponent(id)}/deny`, { reason });
    }
    /**
     * Runs `fn` only if the policy allows the call, with the arguments it decided (rewritten
     * for `modify`), and returns the result after the output rules: what the model may see.
     *
     * @throws ToolDenied (or ApprovalRequired, RunHalted) when the decision is deny, ask or
     *   halt; CallwardenError when the service cannot decide. Either way `fn` does not run.
     * @throws whatever `fn` throws (recorded as a failed outcome).
     */
    async guard(toolName, args, fn, fields = {}) {
        const decision = await this.decide({ ...fields, tool: toolName, args });
        if (!allows(decision))
            throw refusalOf(decision);
        const started = performance.now();
        let result;
        try {
            result = await fn(decision.args);
        }
        catch (error) {
            try {
                await this.outcome(decision, String(error), {
                    failed: true, durationMs: performance.now() - started
                });
            }
            catch {
                // The tool's own error is the one to see; the outcome is recorded only if it can be.
            }
            throw error;
        }
        // No screened result, no result: an unscreened one may hold what an output rule removes.
        const screened = await this.outcome(decision, result, { durationMs: performance.now() - started });
        if (screened.halt)
            throw new RunHalted(decision, screened);
        return screened.result;
    }
    async #request(method, path, body) {
        let response;
        let text;
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
        }
        catch (error) {
            const timedOut = error instanceof Error && error.name === "TimeoutError";
            const why = timedOut ? `no answer within ${this.timeoutMs} ms` : describeCause(error);
            throw new ServiceUnavailable(`callwarden service at ${this.baseUrl} could not be reached: ${why}`, 0, timedOut ? "timeout" : "unreachable", { cause: error });
        }
        let parsed;
        try {
            parsed = JSON.parse(text);
        }
        catch (error) {
            throw new CallwardenError(`the service answered ${method} ${path} with HTTP ${response.status} and no JSON`, response.status, "bad_response", { cause: error });
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
function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}
function isDecision(value) {
    return isObject(value) && typeof value["effect"] === "string" && EFFECTS.has(value["effect"])
        && typeof value["decision_id"] === "string" && isObject(value["call"]);
}
function describeCause(error) {
    // Node's fetch says "fetch failed"; the reason (ECONNREFUSED, ...) is its cause.
    const cause = error instanceof Error ? error.cause : undefined;
    const text = (e) => e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    return cause === undefined ? text(error) : `${text(error)} (${text(cause)})`;
}
