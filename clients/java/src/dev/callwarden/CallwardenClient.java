package dev.callwarden;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * A client of the callwarden decision service ({@code callwarden serve}), on the JDK's
 * {@link HttpClient} alone.
 *
 * <p><b>It fails closed.</b> Every method either returns what the service answered or throws a
 * {@link CallwardenException}: when the service answers an error, answers something that is not
 * its JSON, or cannot be reached within the timeout. {@link #decide} never makes up a decision,
 * so a tool whose {@code decide} threw has no decision to run on. (The
 * {@link CallwardenToolApprovalStrategy} turns that exception into a refusal.)
 *
 * <p>Its calls are audited as made by the framework {@value #FRAMEWORK}: the calls it takes are
 * Spring AI's ({@link ToolCall}). An instance is immutable and safe to share between threads.
 *
 * <pre>{@code
 * var client = new CallwardenClient("http://127.0.0.1:8080", System.getenv("CALLWARDEN_TOKEN"));
 * Decision decision = client.decide(new ToolCall("call-1", "read_file", "{\"path\": \"a\"}"));
 * if (decision.effect().allowsTheCall()) {
 *     Object result = readFile(decision.args());          // the decision's args, maybe rewritten
 *     Screened shown = client.outcome(decision, result, false);
 *     // hand shown.result() to the model, never the unscreened result
 * }
 * }</pre>
 */
public final class CallwardenClient {

    /** How long a request may take, connecting included, unless the constructor says. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);
    /** The framework the service's audit log records for these calls. */
    public static final String FRAMEWORK = "spring-ai";

    private final String baseUrl;
    private final String token;
    private final Duration timeout;
    private final HttpClient http;

    /** A client of the service at {@code baseUrl}, with the {@link #DEFAULT_TIMEOUT}. */
    public CallwardenClient(String baseUrl, String token) {
        this(baseUrl, token, DEFAULT_TIMEOUT);
    }

    /**
     * A client of the service at {@code baseUrl} ({@code http://host:port}, or a path prefix
     * under which the service is served).
     *
     * @param token a token of the service's token file: an agent token to decide, an approver
     *     token for the approvals
     * @param timeout how long one request may take, connecting included
     * @throws IllegalArgumentException for a URL that is not http(s), a token that cannot go in
     *     a header, or a timeout that is not positive
     */
    public CallwardenClient(String baseUrl, String token, Duration timeout) {
        Objects.requireNonNull(baseUrl, "baseUrl");
        Objects.requireNonNull(token, "token");
        Objects.requireNonNull(timeout, "timeout");
        URI uri = URI.create(baseUrl);
        if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme()))
                || uri.getHost() == null) {
            throw new IllegalArgumentException("the service's URL is http(s)://host:port, not "
                                               + baseUrl);
        }
        if (token.isEmpty() || !token.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
            throw new IllegalArgumentException("a token is printable ASCII without spaces");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the timeout must be positive");
        }
        this.baseUrl = baseUrl.replaceAll("/+$", "");
        this.token = token;
        this.timeout = timeout;
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1) // the service speaks HTTP/1.1; no h2c upgrade
                .connectTimeout(timeout)
                // A redirect is not the service's answer, and following it would carry the
                // token elsewhere: it is a BAD_RESPONSE instead.
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
    }

    // -- deciding -----------------------------------------------------------------------------

    /** The decision on a call made by no named agent, session or principal. */
    public Decision decide(ToolCall call) {
        return decide(call, Caller.NONE);
    }

    /**
     * The policy's decision on a tool call. Run the tool only when
     * {@code decision.effect().allowsTheCall()}, and with {@code decision.args()}.
     *
     * <p>The call's arguments are sent parsed when they are a JSON text; when they are not,
     * they are sent as the text, and the service denies the call with the reason (and audits
     * it) rather than this client guessing.
     *
     * @throws CallwardenException when no decision came: the service answered an error (401 for
     *     a token it does not know, for one) or could not be reached; the call must not run
     */
    public Decision decide(ToolCall call, Caller caller) {
        Objects.requireNonNull(call, "call");
        Objects.requireNonNull(caller, "caller");
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("tool", call.name());
        body.put("args", arguments(call.arguments()));
        body.put("framework", FRAMEWORK);
        putIfNotNull(body, "call_id", call.id());
        putIfNotNull(body, "agent", caller.agent());
        putIfNotNull(body, "session", caller.session());
        putIfNotNull(body, "principal", caller.principal());
        Answer answer = send("POST", "/v1/decide", body);
        return answer.read(Decision::from);
    }

    /**
     * The tool's result after the policy's output rules, with the outcome recorded in the audit
     * log. Hand the model {@code screened.result()}, never the tool's own result.
     *
     * @param decision the decision the call ran on (an allow or a modify)
     * @param result what the tool returned: a value {@link Json#write} takes
     * @param failed whether the tool failed ({@code result} is then its error)
     * @throws CallwardenException when the result could not be screened (409 for a decision that
     *     did not allow the call): the model must not see the unscreened result
     * @throws IllegalArgumentException for a result JSON has no form for
     */
    public Screened outcome(Decision decision, Object result, boolean failed) {
        Objects.requireNonNull(decision, "decision");
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("decision", decision.raw());
        body.put("result", result);
        body.put("failed", failed);
        return send("POST", "/v1/outcome", body).read(Screened::from);
    }

    // -- approvals (an approver or admin token) -----------------------------------------------

    /**
     * The approval requests of a status ({@code pending}, {@code approved}, {@code denied},
     * {@code expired}, {@code cancelled}, {@code consumed}), or all of them for null.
     */
    public List<Approval> approvals(String status) {
        String path = status == null ? "/v1/approvals" : "/v1/approvals?status=" + encode(status);
        return send("GET", path, null).read(answer -> {
            if (!(answer.get("approvals") instanceof List<?> found)) {
                throw new IllegalArgumentException("'approvals' is not a list");
            }
            List<Approval> approvals = new ArrayList<>();
            for (Object item : found) {
                approvals.add(Approval.from(Fields.object(item, "an approval")));
            }
            return List.copyOf(approvals);
        });
    }

    /**
     * Approves a request; the same call, decided again, is then allowed once.
     *
     * @param comment recorded with the approval; may be null
     * @param editedArgs the arguments to allow instead of the asked ones (the call then runs as a
     *     modify with these); null to approve the call as asked
     * @return the request as approved
     * @throws CallwardenException 404 for an unknown request, 409 for one that is no longer
     *     pending, 403 for a token that may not approve it
     */
    public Approval approve(String id, String comment, Map<String, Object> editedArgs) {
        Map<String, Object> body = new LinkedHashMap<>();
        putIfNotNull(body, "comment", comment);
        putIfNotNull(body, "args", editedArgs);
        return send("POST", "/v1/approvals/" + encode(id) + "/approve", body)
                .read(Approval::from);
    }

    /**
     * Approves a request and remembers a standing grant ("approve, and don't ask again"): the
     * approval runs its own call once, the grant covers the calls after it.
     *
     * @param scope {@code session} (the call's session), {@code agent} (its agent) or
     *     {@code tool} (anyone)
     * @param ttl how long the grant lasts, at most a year; null for the approvals' ttl
     * @param exact only this exact call (the tool with these arguments), not every call of it
     * @return the grant
     * @throws CallwardenException 400 for a grant the request cannot have, a request a quorum
     *     must approve included (nothing approved), and as {@link #approve} does
     */
    public Grant approveAndRemember(String id, String comment, String scope, Duration ttl,
                                    boolean exact) {
        Map<String, Object> remember = new LinkedHashMap<>();
        remember.put("scope", Objects.requireNonNull(scope, "scope"));
        if (ttl != null) {
            remember.put("ttl", ttl.toMillis() / 1000.0);
        }
        remember.put("exact", exact);
        Map<String, Object> body = new LinkedHashMap<>();
        putIfNotNull(body, "comment", comment);
        body.put("remember", remember);
        return send("POST", "/v1/approvals/" + encode(id) + "/approve", body).read(answer -> {
            Object grant = answer.get("grant");
            return grant == null ? null : Grant.from(Fields.object(grant, "'grant'"));
        });
    }

    /**
     * The standing grants of a status ({@code active}, {@code revoked}, {@code expired}, or
     * {@code any}); the active ones for null.
     */
    public List<Grant> grants(String status) {
        String path = status == null ? "/v1/grants" : "/v1/grants?status=" + encode(status);
        return send("GET", path, null).read(answer -> {
            if (!(answer.get("grants") instanceof List<?> found)) {
                throw new IllegalArgumentException("'grants' is not a list");
            }
            List<Grant> grants = new ArrayList<>();
            for (Object item : found) {
                grants.add(Grant.from(Fields.object(item, "a grant")));
            }
            return List.copyOf(grants);
        });
    }

    /**
     * Revokes an active grant, recorded as revoked by this token's holder.
     *
     * @return the grant as revoked
     * @throws CallwardenException 404 for an unknown grant, 409 for one already revoked or
     *     expired, 403 for a token that may not revoke
     */
    public Grant revokeGrant(String id) {
        return send("POST", "/v1/grants/" + encode(id) + "/revoke", Map.of()).read(Grant::from);
    }

    /**
     * Denies a request; the same call, decided again, is denied with the reason.
     *
     * @param reason shown to the agent; may be null
     * @return the request as denied
     * @throws CallwardenException as {@link #approve} does
     */
    public Approval deny(String id, String reason) {
        Map<String, Object> body = new LinkedHashMap<>();
        putIfNotNull(body, "reason", reason);
        return send("POST", "/v1/approvals/" + encode(id) + "/deny", body).read(Approval::from);
    }

    // -- the exchange -------------------------------------------------------------------------

    /** What the service answered with a 2xx status: a JSON object. */
    private record Answer(int status, Map<String, Object> body) {

        /** The answer read as one of the client's types; an unexpected shape is an error. */
        <T> T read(Function<Map<String, Object>, T> reader) {
            try {
                return reader.apply(body);
            } catch (IllegalArgumentException | NullPointerException e) {
                throw new CallwardenException(status, CallwardenException.BAD_RESPONSE,
                                              "the service's answer is not what it documents: "
                                              + e.getMessage(), e);
            }
        }
    }

    private Answer send(String method, String path, Map<String, Object> body) {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(baseUrl + path))
                .timeout(timeout)
                .header("Authorization", "Bearer " + token)
                .header("Accept", "application/json");
        if (body == null) {
            request.GET();
        } else {
            request.header("Content-Type", "application/json")
                    .method(method, HttpRequest.BodyPublishers.ofString(Json.write(body),
                                                                        StandardCharsets.UTF_8));
        }
        HttpResponse<String> response;
        try {
            response = http.send(request.build(),
                                 HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (HttpTimeoutException e) {
            throw new CallwardenException(0, CallwardenException.TIMEOUT, "no answer from "
                                          + baseUrl + " within " + timeout, e);
        } catch (ConnectException e) {
            throw new CallwardenException(0, CallwardenException.UNREACHABLE, "cannot connect to "
                                          + baseUrl + ": " + describe(e), e);
        } catch (IOException e) {
            throw new CallwardenException(0, CallwardenException.UNREACHABLE, "no answer from "
                                          + baseUrl + ": " + describe(e), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CallwardenException(0, CallwardenException.INTERRUPTED,
                                          "interrupted while waiting for " + baseUrl, e);
        }
        return answer(response.statusCode(), response.body());
    }

    private static Answer answer(int status, String text) {
        Object parsed;
        try {
            parsed = Json.parse(text);
        } catch (IllegalArgumentException e) {
            parsed = null;
        }
        Map<String, Object> body = parsed instanceof Map<?, ?> ? Fields.object(parsed, "") : null;
        if (status >= 200 && status < 300 && body != null) {
            return new Answer(status, body);
        }
        if (status >= 400 && body != null && body.get("error") instanceof Map<?, ?> error
                && error.get("code") instanceof String code
                && error.get("message") instanceof String message) {
            throw new CallwardenException(status, code, message);
        }
        String shown = text.length() > 200 ? text.substring(0, 200) + "..." : text;
        throw new CallwardenException(status, CallwardenException.BAD_RESPONSE,
                                      "HTTP " + status + " with a body that is not the "
                                      + "service's JSON: " + shown);
    }

    /** The arguments as JSON values, or as the text when it is not JSON (see decide). */
    private static Object arguments(String text) {
        if (text == null || text.isBlank()) {
            return Map.of();
        }
        try {
            return Json.parse(text);
        } catch (IllegalArgumentException notJson) {
            return text;
        }
    }

    private static void putIfNotNull(Map<String, Object> body, String key, Object value) {
        if (value != null) {
            body.put(key, value);
        }
    }

    private static String encode(String part) {
        // URLEncoder writes a form (space as '+'); a path segment and a query value want %20.
        return URLEncoder.encode(Objects.requireNonNull(part), StandardCharsets.UTF_8)
                .replace("+", "%20");
    }

    private static String describe(IOException e) {
        // The JDK's HttpClient often wraps the telling exception ("Connection refused") in one
        // without a message.
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause.getMessage() != null && !cause.getMessage().isBlank()) {
                return cause.getMessage();
            }
        }
        return e.getClass().getSimpleName();
    }

    @Override
    public String toString() {
        return "CallwardenClient(" + baseUrl + ")"; // never the token
    }
}
