package dev.callwarden;

/** What the policy decided for a tool call. */
public enum Effect {
    /** Run the call as it was asked. */
    ALLOW("allow"),
    /** Run the call with the decision's arguments instead of the ones asked. */
    MODIFY("modify"),
    /** Do not run the call; the decision's message says why (it is meant for the model). */
    DENY("deny"),
    /** Do not run the call until a person approves its approval request. */
    ASK("ask"),
    /** Do not run the call, and stop the agent's run. */
    HALT("halt");

    private final String wire;

    Effect(String wire) {
        this.wire = wire;
    }

    /** The effect's name in the service's JSON. */
    public String wire() {
        return wire;
    }

    /** Whether the call may run (allow, or modify with the decision's arguments). */
    public boolean allowsTheCall() {
        return this == ALLOW || this == MODIFY;
    }

    /**
     * The effect named in the service's JSON.
     *
     * @throws IllegalArgumentException for a name this client does not know: an effect it cannot
     *     act on must not be mistaken for one that lets the call run
     */
    public static Effect fromWire(Object name) {
        for (Effect effect : values()) {
            if (effect.wire.equals(name)) {
                return effect;
            }
        }
        throw new IllegalArgumentException("an effect this client does not know: " + name);
    }
}
