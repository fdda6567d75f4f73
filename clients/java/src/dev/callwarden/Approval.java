package dev.callwarden;

import java.util.Map;
import java.util.Objects;

/**
 * An approval request: a call the policy asked a person about ({@code /v1/approvals}).
 *
 * @param id the request's id (the {@link Decision#approvalRequest()} of the ask)
 * @param tool the tool the call is for
 * @param args the call's arguments, as asked
 * @param status {@code pending}, {@code approved}, {@code denied}, {@code expired},
 *     {@code cancelled} or {@code consumed} (approved, and the call has run)
 * @param rule the rule that asked, or null
 * @param message the rule's message, or null
 * @param resolvedBy the name of the token holder who approved or denied it, or null
 * @param editedArgs the arguments the person approved instead of the asked ones, or null
 * @param raw the whole answer (agent, principal, session, times, comments, ...)
 */
public record Approval(String id, String tool, Map<String, Object> args, String status,
                       String rule, String message, String resolvedBy,
                       Map<String, Object> editedArgs, Map<String, Object> raw) {

    /** Checks the fields a caller acts on. */
    public Approval {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(status, "status");
        args = Fields.frozen(Objects.requireNonNull(args, "args"));
        raw = Fields.frozen(Objects.requireNonNull(raw, "raw"));
    }

    /**
     * The approval request in the service's JSON answer.
     *
     * @throws IllegalArgumentException when the answer is not one
     */
    public static Approval from(Map<String, Object> answer) {
        return new Approval(Fields.text(answer, "id"), Fields.text(answer, "tool"),
                            Fields.object(answer.get("args"), "'args'"),
                            Fields.text(answer, "status"), Fields.textOrNull(answer, "rule"),
                            Fields.textOrNull(answer, "message"),
                            Fields.textOrNull(answer, "resolved_by"),
                            Fields.objectOrNull(answer, "edited_args"), answer);
    }
}
