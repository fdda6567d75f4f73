package dev.callwarden;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A tool approval strategy, in the shape of Spring AI's {@code ToolApprovalStrategy} proposal,
 * that asks the callwarden service about every call. It translates; the policy decides.
 *
 * <table>
 *   <caption>What each answer becomes</caption>
 *   <tr><th>the service</th><th>approved</th><th>reason</th></tr>
 *   <tr><td>allow</td><td>yes</td><td>null</td></tr>
 *   <tr><td>modify</td><td>yes</td><td>the decision's message; run the call with the
 *       metadata's {@code arguments}</td></tr>
 *   <tr><td>deny, halt</td><td>no</td><td>the decision's message</td></tr>
 *   <tr><td>ask</td><td>no</td><td>the message and the approval request's id; once a person
 *       approves it, the same call is approved once</td></tr>
 *   <tr><td>an error, or no answer</td><td>no</td><td>what went wrong: a call is never run
 *       because the service could not be asked</td></tr>
 * </table>
 *
 * <p>Metadata keys, when the service decided: {@code decision_id}, {@code effect},
 * {@code rule}, {@code decision} (the {@link Decision}, for
 * {@link CallwardenClient#outcome}); {@code arguments} for a modify (the arguments to run with,
 * as a JSON text like {@link ToolCall#arguments()}); {@code approval_request} for an ask;
 * {@code halt} ({@code true}) for a halt, when the agent's run must stop too. When it did not:
 * {@code error} (the {@link CallwardenException#code()}) and {@code status} (the HTTP status, 0
 * for no answer).
 */
public final class CallwardenToolApprovalStrategy {

    private final CallwardenClient client;
    private final Caller caller;

    /** A strategy deciding through {@code client}, for calls of no named agent or session. */
    public CallwardenToolApprovalStrategy(CallwardenClient client) {
        this(client, Caller.NONE);
    }

    /** A strategy deciding through {@code client}, for the calls of {@code caller}. */
    public CallwardenToolApprovalStrategy(CallwardenClient client, Caller caller) {
        this.client = Objects.requireNonNull(client, "client");
        this.caller = Objects.requireNonNull(caller, "caller");
    }

    /** Whether the tool call may run, by the policy's decision; never throws for the service. */
    public ToolApprovalDecision approve(ToolCall toolCall) {
        Decision decision;
        try {
            decision = client.decide(toolCall, caller);
        } catch (CallwardenException e) {
            return refusal(toolCall, e);
        }
        Map<String, Object> metadata = new LinkedHashMap<>();
        metadata.put("decision_id", decision.decisionId());
        metadata.put("effect", decision.effect().wire());
        metadata.put("rule", decision.rule());
        metadata.put("decision", decision);
        String message = decision.message();
        switch (decision.effect()) {
            case ALLOW:
                return ToolApprovalDecision.approve(null, metadata);
            case MODIFY:
                metadata.put("arguments", Json.write(decision.args()));
                return ToolApprovalDecision.approve(
                        message.isEmpty() ? "the arguments were rewritten by rule "
                                            + decision.rule() : message, metadata);
            case ASK:
                metadata.put("approval_request", decision.approvalRequest());
                return ToolApprovalDecision.reject(
                        orRule(message, decision) + " (approval request "
                        + decision.approvalRequest() + " waits for a person; once it is "
                        + "approved, the same call is allowed once)", metadata);
            case HALT:
                metadata.put("halt", true);
                return ToolApprovalDecision.reject(orRule(message, decision), metadata);
            case DENY:
            default: // every effect is named above; an unnamed one must not run the call
                return ToolApprovalDecision.reject(orRule(message, decision), metadata);
        }
    }

    private static ToolApprovalDecision refusal(ToolCall toolCall, CallwardenException e) {
        Map<String, Object> metadata = new LinkedHashMap<>();
        metadata.put("error", e.code());
        metadata.put("status", e.status());
        String reason = e.unanswered()
                ? "callwarden could not be reached (" + e.getMessage() + "), so '"
                  + toolCall.name() + "' is not run: no call runs without a decision"
                : "callwarden refused the request (" + e.status() + " " + e.code() + ": "
                  + e.getMessage() + "), so '" + toolCall.name() + "' is not run";
        return ToolApprovalDecision.reject(reason, metadata);
    }

    private static String orRule(String message, Decision decision) {
        return message.isEmpty() ? "refused by rule " + decision.rule() : message;
    }
}
