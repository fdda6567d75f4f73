package dev.callwarden;

/**
 * The service could not give a decision (or a screened result, or an approval): it answered
 * with an error, it answered something that is not its JSON, or it did not answer at all.
 *
 * <p>{@link #status()} is the HTTP status, or 0 when no answer came; {@link #code()} is the
 * service's error code ({@code unauthorized}, {@code forbidden}, {@code bad_request},
 * {@code approval_not_found}, ... see its {@code /openapi.json}) or one of the client's own:
 * {@link #UNREACHABLE}, {@link #TIMEOUT}, {@link #INTERRUPTED} (status 0) and
 * {@link #BAD_RESPONSE}.
 *
 * <p>Unchecked because whatever the caller does not catch stops the tool call, which is the
 * direction to fail in: no path through this client runs a tool without a decision.
 */
public class CallwardenException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** No connection to the service (refused, reset, unknown host). */
    public static final String UNREACHABLE = "unreachable";
    /** No answer within the client's timeout. */
    public static final String TIMEOUT = "timeout";
    /** The calling thread was interrupted while it waited (its interrupt flag is set again). */
    public static final String INTERRUPTED = "interrupted";
    /** An answer that is not the service's JSON (a proxy's error page, a redirect, ...). */
    public static final String BAD_RESPONSE = "bad_response";

    private final int status;
    private final String code;

    /** An error of the given HTTP status (0: no answer), code and message. */
    public CallwardenException(int status, String code, String message) {
        this(status, code, message, null);
    }

    /** An error of the given HTTP status (0: no answer), code and message, and its cause. */
    public CallwardenException(int status, String code, String message, Throwable cause) {
        super(message, cause);
        this.status = status;
        this.code = code;
    }

    /** The HTTP status the service answered with; 0 when no answer came. */
    public int status() {
        return status;
    }

    /** The service's error code, or one of this class's constants. */
    public String code() {
        return code;
    }

    /** Whether the service gave no answer at all (unreachable, timed out, interrupted). */
    public boolean unanswered() {
        return status == 0;
    }

    @Override
    public String toString() {
        return "CallwardenException(" + status + " " + code + "): " + getMessage();
    }
}
