package dev.callwarden;

import java.util.Map;
import java.util.Objects;

/**
 * A standing grant: an approval remembered so that the calls it covers are not asked again
 * ({@code /v1/grants}), until it expires or is revoked.
 *
 * @param id the grant's id (what {@link CallwardenClient#revokeGrant} takes)
 * @param scope {@code session} (the call's session), {@code agent} (its agent, in any session)
 *     or {@code tool} (anyone)
 * @param tool the tool name or glob it covers
 * @param by who granted it
 * @param status {@code active}, {@code revoked} or {@code expired}
 * @param exact whether it covers one exact call only (the tool with {@code args})
 * @param args that call's arguments with secrets redacted, or null
 * @param revokedBy who revoked it, or null
 * @param raw the whole answer (session, agent, times, the request it came from, ...)
 */
public record Grant(String id, String scope, String tool, String by, String status,
                    boolean exact, Map<String, Object> args, String revokedBy,
                    Map<String, Object> raw) {

    /** Checks the fields a caller acts on. */
    public Grant {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(status, "status");
        raw = Fields.frozen(Objects.requireNonNull(raw, "raw"));
    }

    /**
     * The grant in the service's JSON answer.
     *
     * @throws IllegalArgumentException when the answer is not one
     */
    public static Grant from(Map<String, Object> answer) {
        if (!(answer.get("exact") instanceof Boolean exact)) {
            throw new IllegalArgumentException("'exact' is not true or false");
        }
        return new Grant(Fields.text(answer, "id"), Fields.text(answer, "scope"),
                         Fields.text(answer, "tool"), Fields.text(answer, "by"),
                         Fields.text(answer, "status"), exact,
                         Fields.objectOrNull(answer, "args"),
                         Fields.textOrNull(answer, "revoked_by"), answer);
    }
}
