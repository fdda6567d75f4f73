package dev.callwarden;

/**
 * Who makes a tool call, for the policy's per-agent, per-session and per-principal rules (limits,
 * approvals) and for the audit log. Every field may be null.
 *
 * @param agent the agent's name; null lets the service use the name of the agent token
 * @param session the conversation or run the call belongs to
 * @param principal the person (or account) the agent acts for
 */
public record Caller(String agent, String session, String principal) {

    /** No agent, session or principal named. */
    public static final Caller NONE = new Caller(null, null, null);

    /** A caller named only by its session. */
    public static Caller session(String session) {
        return new Caller(null, session, null);
    }
}
