package dev.callwarden;

/**
 * A model's tool call, in the shape Spring AI hands it over ({@code AssistantMessage.ToolCall}
 * without its {@code type}, which is always {@code "function"}).
 *
 * @param id the call's id from the model; sent as the call id, so the audit log and a repeated
 *     ask of the same call can be tied to it (may be null)
 * @param name the tool's name
 * @param arguments the arguments as the model wrote them: a JSON text, as Spring AI passes them
 *     (null or blank: no arguments)
 */
public record ToolCall(String id, String name, String arguments) {

    /** Checks that the call names a tool. */
    public ToolCall {
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a tool call needs the tool's name");
        }
    }
}
