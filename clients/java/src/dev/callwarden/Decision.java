package dev.callwarden;

import java.util.Map;
import java.util.Objects;

/**
 * The service's decision on one tool call ({@code POST /v1/decide}).
 *
 * @param effect what to do with the call; only {@link Effect#allowsTheCall()} lets it run
 * @param rule the rule that decided ({@code default} when none did), or null
 * @param message why, in words meant for the model; empty for a plain allow
 * @param args the arguments to run the call with: for {@link Effect#MODIFY} the rewritten
 *     ones, otherwise the ones asked (empty when the asked ones were not an object)
 * @param decisionId the decision's id, as the audit log records it
 * @param approvalRequest for {@link Effect#ASK}: the approval request a person resolves (after
 *     an approval the same call, decided again, is allowed once); null otherwise
 * @param raw the whole answer: {@link CallwardenClient#outcome} sends it back, and it has the
 *     fields not named here ({@code reasons}, {@code matched}, {@code call}, {@code policy}, ...)
 */
public record Decision(Effect effect, String rule, String message, Map<String, Object> args,
                       String decisionId, String approvalRequest, Map<String, Object> raw) {

    /** Checks that the fields a caller acts on are there. */
    public Decision {
        Objects.requireNonNull(effect, "effect");
        Objects.requireNonNull(decisionId, "decisionId");
        message = message == null ? "" : message;
        args = Fields.frozen(Objects.requireNonNull(args, "args"));
        raw = Fields.frozen(Objects.requireNonNull(raw, "raw"));
    }

    /**
     * The decision in the service's JSON answer.
     *
     * @throws IllegalArgumentException when the answer is not a decision: no decision id, an
     *     effect this client does not know, or a call it would run without object arguments
     */
    public static Decision from(Map<String, Object> answer) {
        Effect effect = Effect.fromWire(answer.get("effect"));
        Object args = answer.get("args");
        Map<String, Object> arguments;
        if (args instanceof Map<?, ?>) {
            arguments = Fields.object(args, "'args'");
        } else if (effect.allowsTheCall()) {
            throw new IllegalArgumentException("a decision to run the call has no object 'args'");
        } else {
            arguments = Map.of(); // a refused call's arguments matter to nobody
        }
        return new Decision(effect, Fields.textOrNull(answer, "rule"),
                            Fields.textOrNull(answer, "message"), arguments,
                            Fields.text(answer, "decision_id"),
                            Fields.textOrNull(answer, "approval_request"), answer);
    }
}
