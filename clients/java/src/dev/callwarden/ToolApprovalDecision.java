package dev.callwarden;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The answer of a tool approval strategy, in the shape of Spring AI's {@code ToolApprovalStrategy}
 * proposal: whether the call may run, why (when it may not), and what else the caller needs.
 *
 * @param approved whether the tool may run
 * @param reason why not (for the model and the log), or a note on an approved call; may be null
 * @param metadata further facts: see {@link CallwardenToolApprovalStrategy} for the keys
 */
public record ToolApprovalDecision(boolean approved, String reason, Map<String, Object> metadata) {

    /** Makes the metadata an unmodifiable copy (null: none). */
    public ToolApprovalDecision {
        metadata = metadata == null ? Map.of()
                : Collections.unmodifiableMap(new LinkedHashMap<>(metadata));
    }

    /** The tool may run. */
    public static ToolApprovalDecision approve(String reason, Map<String, Object> metadata) {
        return new ToolApprovalDecision(true, reason, metadata);
    }

    /** The tool may not run, for the reason given. */
    public static ToolApprovalDecision reject(String reason, Map<String, Object> metadata) {
        return new ToolApprovalDecision(false, reason, metadata);
    }
}
