package dev.callwarden;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A scripted walk through the client against a running {@code callwarden serve} with the policy
 * of {@code tests/serve/test_serve.py}; one JSON line per step on stdout, for that suite's
 * {@code test_java_client.py} to check.
 *
 * <pre>
 * java -cp CLASSES dev.callwarden.Main URL AGENT_TOKEN [APPROVER_TOKEN]
 * </pre>
 *
 * <p>Without arguments it reads {@code CALLWARDEN_URL}, {@code CALLWARDEN_TOKEN} and
 * {@code CALLWARDEN_APPROVER_TOKEN}. After the {@code ask} step it waits for a line on stdin: the
 * test approves the request over HTTP in between. The approver token, when given, runs the
 * steps that resolve requests through this client.
 */
public final class Main {

    /** A GitHub token's shape, for the output rule that redacts secrets. */
    static final String SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    /** Arguments that need every part of the JSON encoder and parser to come back the same. */
    static final String AWKWARD_ARGUMENTS = "{\"text\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" "
            + "back\\\\slash\\nline\\ttab\\u0001\", \"big\": 12345678901234567890, "
            + "\"negative\": -7, \"ratio\": 0.25, \"tiny\": 1.5e-300, "
            + "\"flags\": [true, false, null], \"nested\": {\"empty\": {}, \"list\": []}}";

    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    private Main() {}

    /** Runs the script; exits non-zero (with the stack trace) on anything unexpected. */
    public static void main(String[] args) throws IOException {
        String url = args.length > 0 ? args[0] : System.getenv("CALLWARDEN_URL");
        String token = args.length > 1 ? args[1] : System.getenv("CALLWARDEN_TOKEN");
        String approverToken = args.length > 2 ? args[2]
                : System.getenv("CALLWARDEN_APPROVER_TOKEN");
        if (url == null || token == null) {
            System.err.println("usage: Main URL AGENT_TOKEN [APPROVER_TOKEN] "
                               + "(or CALLWARDEN_URL, CALLWARDEN_TOKEN)");
            System.exit(2);
        }
        BufferedReader stdin = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        CallwardenClient client = new CallwardenClient(url, token, Duration.ofSeconds(30));
        CallwardenToolApprovalStrategy strategy = new CallwardenToolApprovalStrategy(client);

        approval("allow", strategy.approve(
                new ToolCall("call-1", "read_file", "{\"path\": \"notes.txt\"}")));
        approval("deny", strategy.approve(
                new ToolCall("call-2", "delete_file", "{\"path\": \"notes.txt\"}")));
        approval("modify", strategy.approve(
                new ToolCall("call-3", "search", "{\"query\": \"q\", \"limit\": 50}")));

        String deploy = "{\"env\": \"prod\"}";
        approval("ask", strategy.approve(new ToolCall("call-4", "deploy", deploy)));
        if (stdin.readLine() == null) {
            throw new IllegalStateException("stdin closed before the request was approved");
        }
        approval("approved", strategy.approve(new ToolCall("call-5", "deploy", deploy)));
        approval("ask_again", strategy.approve(new ToolCall("call-6", "deploy", deploy)));

        Decision read = client.decide(new ToolCall("call-7", "read_file", "{\"path\": \".env\"}"));
        Screened screened = client.outcome(read, Map.of("text", "TOKEN=" + SECRET, "lines", 1),
                                           false);
        line("outcome", "decision_id", read.decisionId(), "status", screened.status().wire(),
             "result", screened.result(), "halt", screened.halt(), "rule", screened.rule());

        Decision echoed = client.decide(new ToolCall("call-8", "echo", AWKWARD_ARGUMENTS));
        line("roundtrip", "effect", echoed.effect().wire(), "args", echoed.args());

        Decision notJson = client.decide(new ToolCall("call-9", "echo", "{not json"));
        line("not_json", "effect", notJson.effect().wire(), "message", notJson.message());

        if (approverToken != null) {
            resolveThroughTheClient(url, approverToken, client);
        }

        refused("wrong_token", () -> new CallwardenClient(url, "wrong-token-0123456789")
                .decide(new ToolCall("call-10", "read_file", "{}")));
        refused("forbidden", () -> client.approvals("pending"));
        CallwardenClient nowhere = new CallwardenClient("http://127.0.0.1:9", token,
                                                        Duration.ofSeconds(10));
        ToolApprovalDecision unreachable = new CallwardenToolApprovalStrategy(nowhere)
                .approve(new ToolCall("call-11", "read_file", "{}"));
        approval("unreachable", unreachable);
        refused("unreachable_decide", () -> nowhere.decide(new ToolCall("call-12", "read_file",
                                                                        "{}")));
        line("done");
    }

    /** Deny, edit-and-approve, and approve-and-remember, through the client with an approver
     * token. */
    private static void resolveThroughTheClient(String url, String approverToken,
                                                CallwardenClient client) {
        CallwardenClient approver = new CallwardenClient(url, approverToken);
        String deploy = "{\"env\": \"prod\"}";

        CallwardenToolApprovalStrategy frozen = new CallwardenToolApprovalStrategy(
                client, Caller.session("s-deny"));
        ToolApprovalDecision asked = frozen.approve(new ToolCall("call-20", "deploy", deploy));
        String denyId = (String) asked.metadata().get("approval_request");
        List<String> pending = approver.approvals("pending").stream().map(Approval::id).toList();
        Approval denied = approver.deny(denyId, "code freeze until Monday");
        ToolApprovalDecision after = frozen.approve(new ToolCall("call-21", "deploy", deploy));
        line("deny_by_person", "request", denyId, "pending", pending, "status", denied.status(),
             "resolved_by", denied.resolvedBy(), "approved", after.approved(),
             "reason", after.reason());

        CallwardenToolApprovalStrategy edited = new CallwardenToolApprovalStrategy(
                client, Caller.session("s-edit"));
        String editId = (String) edited.approve(new ToolCall("call-22", "deploy", deploy))
                .metadata().get("approval_request");
        Approval approved = approver.approve(editId, "staging only", Map.of("env", "staging"));
        ToolApprovalDecision ran = edited.approve(new ToolCall("call-23", "deploy", deploy));
        line("edit_and_approve", "request", editId, "status", approved.status(),
             "edited_args", approved.editedArgs(), "approved", ran.approved(),
             "effect", ran.metadata().get("effect"), "arguments", ran.metadata().get("arguments"));

        refused("approve_twice", () -> approver.approve(editId, null, null));

        CallwardenToolApprovalStrategy remembered = new CallwardenToolApprovalStrategy(
                client, Caller.session("s-grant"));
        String grantId = (String) remembered.approve(new ToolCall("call-24", "deploy", deploy))
                .metadata().get("approval_request");
        Grant grant = approver.approveAndRemember(grantId, null, "session",
                                                  Duration.ofHours(1), true);
        ToolApprovalDecision first = remembered.approve(new ToolCall("call-25", "deploy", deploy));
        ToolApprovalDecision second = remembered.approve(new ToolCall("call-26", "deploy", deploy));
        List<String> active = approver.grants(null).stream().map(Grant::id).toList();
        Grant revoked = approver.revokeGrant(grant.id());
        ToolApprovalDecision askedAgain = remembered.approve(
                new ToolCall("call-27", "deploy", deploy));
        line("grant", "id", grant.id(), "scope", grant.scope(), "exact", grant.exact(),
             "args", grant.args(), "by", grant.by(), "active", active,
             "first", first.approved(), "first_decision", first.metadata().get("decision_id"),
             "second", second.approved(),
             "second_decision", second.metadata().get("decision_id"), "status", revoked.status(),
             "revoked_by", revoked.revokedBy(), "after", askedAgain.approved(),
             "after_effect", askedAgain.metadata().get("effect"));
        refused("revoke_twice", () -> approver.revokeGrant(grant.id()));
    }

    private static void approval(String step, ToolApprovalDecision decision) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("approved", decision.approved());
        fields.put("reason", decision.reason());
        decision.metadata().forEach((key, value) -> {
            if (!"decision".equals(key)) { // the Decision object; its fields are the other keys
                fields.put(key, value);
            }
        });
        print(step, fields);
    }

    private static void refused(String step, Runnable request) {
        try {
            request.run();
            line(step, "thrown", false);
        } catch (CallwardenException e) {
            line(step, "thrown", true, "status", e.status(), "code", e.code(),
                 "message", e.getMessage());
        }
    }

    private static void line(String step, Object... keysAndValues) {
        Map<String, Object> fields = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            fields.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        print(step, fields);
    }

    private static void print(String step, Map<String, Object> fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", step);
        line.putAll(fields);
        OUT.println(Json.write(line));
    }
}
