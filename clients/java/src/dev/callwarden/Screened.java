package dev.callwarden;

import java.util.Map;
import java.util.Objects;

/**
 * A tool's result after the policy's output rules ({@code POST /v1/outcome}).
 *
 * @param status what the output rules did
 * @param result what the model may see: the tool's result, redacted or replaced by the rules
 * @param halt whether the agent's run must stop here
 * @param rule the output rule that changed or blocked the result, or null
 * @param raw the whole answer
 */
public record Screened(Status status, Object result, boolean halt, String rule,
                       Map<String, Object> raw) {

    /** What the output rules did with a result. */
    public enum Status {
        /** Nothing: the result is the tool's own. */
        OK("ok"),
        /** The tool failed; the result is its error. */
        ERROR("error"),
        /** The result was withheld; {@code result} says so in its place. */
        OUTPUT_BLOCKED("output_blocked"),
        /** The result was changed (secrets redacted, for one). */
        OUTPUT_MODIFIED("output_modified");

        private final String wire;

        Status(String wire) {
            this.wire = wire;
        }

        /** The status's name in the service's JSON. */
        public String wire() {
            return wire;
        }

        static Status fromWire(Object name) {
            for (Status status : values()) {
                if (status.wire.equals(name)) {
                    return status;
                }
            }
            // An unknown status could be a block this client does not recognise: refuse it.
            throw new IllegalArgumentException("a result status this client does not know: "
                                               + name);
        }
    }

    /** Checks the fields a caller acts on. */
    public Screened {
        Objects.requireNonNull(status, "status");
        raw = Fields.frozen(Objects.requireNonNull(raw, "raw"));
    }

    /**
     * The screened result in the service's JSON answer.
     *
     * @throws IllegalArgumentException when the answer is not one
     */
    public static Screened from(Map<String, Object> answer) {
        if (!answer.containsKey("result") || !(answer.get("halt") instanceof Boolean halt)) {
            throw new IllegalArgumentException("a screened result needs 'result' and 'halt'");
        }
        return new Screened(Status.fromWire(answer.get("status")), answer.get("result"), halt,
                            Fields.textOrNull(answer, "rule"), answer);
    }
}
