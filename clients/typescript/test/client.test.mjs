// The client against a real `callwarden serve` (tests/serve/test_typescript_client.py starts it
// and runs these with CALLWARDEN_URL, CALLWARDEN_AGENT_TOKEN and CALLWARDEN_APPROVER_TOKEN set;
// the policy is tests/serve/test_serve.py's POLICY).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import {
  ApprovalRequired,
  CallwardenClient,
  CallwardenError,
  RunHalted,
  ServiceUnavailable,
  ToolDenied,
} from "../dist/index.js";
import { agentToken, approverToken, SECRET, url } from "./service.mjs";

const NOBODY = "http://127.0.0.1:9"; // the discard port: nothing listens there

const agent = new CallwardenClient({ baseUrl: url, token: agentToken });
const approver = new CallwardenClient({ baseUrl: url, token: approverToken });
/** A session of its own per test, so that budgets and approval requests do not meet. */
const session = () => `ts-${randomUUID()}`;

/** A tool (async, or sync) that counts its runs and answers with the arguments it got. */
function counted(answer = (args) => ({ ran: args }), { sync = false } = {}) {
  const calls = [];
  const run = (args) => {
    calls.push(args);
    return answer(args);
  };
  const tool = sync ? run : async (args) => run(args);
  tool.calls = calls;
  return tool;
}

/** Asserts `promise` rejects with an instance of `type` and returns the error. */
async function rejection(promise, type) {
  let caught;
  await assert.rejects(promise, (e) => {
    caught = e;
    return e instanceof type;
  });
  return caught;
}

describe("decide", () => {
  test("an allowed call is allowed, for the token's agent", async () => {
    const decision = await agent.decide({ tool: "read_file", args: { path: "a" },
      session: session() });
    assert.equal(decision.effect, "allow");
    assert.equal(decision.call.agent, "bot");
    assert.deepEqual(decision.args, { path: "a" });
    assert.equal(decision.approval_request, null);
  });

  test("a denied call says why", async () => {
    const decision = await agent.decide({ tool: "delete_file", args: { path: "a" } });
    assert.equal(decision.effect, "deny");
    assert.equal(decision.rule, "no-delete");
    assert.match(decision.message, /trash\//);
  });

  test("a modified call carries the rewritten arguments", async () => {
    const decision = await agent.decide({ tool: "search", args: { query: "q", limit: 50 } });
    assert.equal(decision.effect, "modify");
    assert.deepEqual(decision.args, { query: "q", limit: 5 });
  });

  test("a halt is a decision, not an error", async () => {
    const decision = await agent.decide({ tool: "wipe", args: { disk: "sda" } });
    assert.equal(decision.effect, "halt");
  });
});

describe("approvals", () => {
  test("an ask, approved, allows the same call once, then asks again", async () => {
    const call = { tool: "deploy", args: { env: "prod" }, session: session(), principal: "bob" };
    const asked = await agent.decide(call);
    assert.equal(asked.effect, "ask");
    assert.ok(asked.approval_request);
    const pending = await approver.approvals({ status: "pending", session: call.session });
    assert.deepEqual(pending.map((a) => a.id), [asked.approval_request]);
    assert.deepEqual(await approver.approvals({ session: session() }), []);
    const approved = await approver.approve(asked.approval_request, { comment: "ok for today" });
    assert.equal(approved.status, "approved");
    assert.equal(approved.resolved_by, "carol");
    assert.equal((await approver.approval(asked.approval_request)).status, "approved");
    assert.equal((await agent.decide(call)).effect, "allow");
    const again = await agent.decide(call);
    assert.equal(again.effect, "ask");
    assert.notEqual(again.approval_request, asked.approval_request);
  });

  test("edit-and-approve runs the call with the approver's arguments", async () => {
    const call = { tool: "deploy", args: { env: "prod" }, session: session() };
    const asked = await agent.decide(call);
    const edited = await approver.approve(asked.approval_request, { args: { env: "staging" } });
    assert.deepEqual(edited.edited_args, { env: "staging" });
    const ran = await agent.decide(call);
    assert.equal(ran.effect, "modify");
    assert.deepEqual(ran.args, { env: "staging" });
  });

  test("a denied request gives the agent the approver's reason", async () => {
    const call = { tool: "deploy", args: { env: "prod" }, session: session() };
    const asked = await agent.decide(call);
    const denied = await approver.deny(asked.approval_request, { reason: "code freeze" });
    assert.equal(denied.status, "denied");
    const refused = await agent.decide(call);
    assert.equal(refused.effect, "deny");
    assert.match(refused.message, /code freeze/);
  });

  test("a request resolved twice is a 409 with an approval_ code", async () => {
    const asked = await agent.decide({ tool: "deploy", args: { env: "x" }, session: session() });
    await approver.approve(asked.approval_request);
    const error = await rejection(approver.approve(asked.approval_request), CallwardenError);
    assert.equal(error.status, 409);
    assert.match(error.code, /^approval_/);
  });
});

describe("grants", () => {
  test("approve and remember: the grant covers the same call until it is revoked", async () => {
    const call = { tool: "deploy", args: { env: "qa" }, session: session() };
    const asked = await agent.decide(call);
    const approved = await approver.approve(asked.approval_request,
      { remember: { scope: "session", ttl: 3600, exact: true } });
    assert.equal(approved.status, "approved");
    const grant = approved.grant;
    assert.deepEqual([grant.scope, grant.session, grant.exact, grant.by],
      ["session", call.session, true, "carol"]);
    assert.deepEqual(grant.args, { env: "qa" });
    assert.deepEqual((await approver.grants({ session: call.session })).map((g) => g.id),
      [grant.id]);
    assert.equal((await agent.decide(call)).reasons[0].code, "approved");  // its own call
    assert.equal((await agent.decide(call)).reasons[0].code, "approval_remembered");
    assert.equal((await agent.decide({ ...call, args: { env: "dev" } })).effect, "ask");
    const revoked = await approver.revokeGrant(grant.id);
    assert.deepEqual([revoked.status, revoked.revoked_by], ["revoked", "carol"]);
    assert.equal((await agent.decide(call)).effect, "ask");
    assert.deepEqual(await approver.grants({ session: call.session }), []);
    assert.equal((await approver.grants({ session: call.session, status: "revoked" })).length,
      1);
    const again = await rejection(approver.revokeGrant(grant.id), CallwardenError);
    assert.deepEqual([again.status, again.code], [409, "grant_already_revoked"]);
  });

  test("a grant the request cannot have is refused and approves nothing", async () => {
    const asked = await agent.decide({ tool: "deploy", args: { env: "qa" } });  // no session
    const error = await rejection(approver.approve(asked.approval_request,
      { remember: { scope: "session" } }), CallwardenError);
    assert.equal(error.status, 400);
    assert.match(error.message, /nothing was approved/);
    assert.equal((await approver.approval(asked.approval_request)).status, "pending");
  });

  test("an agent token may not list or revoke grants", async () => {
    for (const attempt of [agent.grants(), agent.revokeGrant("nope")]) {
      const error = await rejection(attempt, CallwardenError);
      assert.deepEqual([error.status, error.code], [403, "forbidden"]);
    }
    const unknown = await rejection(approver.revokeGrant("nope"), CallwardenError);
    assert.deepEqual([unknown.status, unknown.code], [404, "grant_not_found"]);
  });
});

describe("outcome", () => {
  test("a secret in a result is redacted, the rest kept", async () => {
    const decision = await agent.decide({ tool: "read_file", args: { path: ".env" },
      session: session() });
    const screened = await agent.outcome(decision, { text: `TOKEN=${SECRET}`, lines: 1 },
      { durationMs: 12 });
    assert.equal(screened.status, "output_modified");
    assert.equal(screened.rule, "redact-secrets");
    assert.equal(screened.halt, false);
    assert.ok(!JSON.stringify(screened.result).includes(SECRET));
    assert.equal(screened.result.lines, 1);
  });

  test("a plain result comes back as it was", async () => {
    const decision = await agent.decide({ tool: "read_file", args: { path: "a" },
      session: session() });
    assert.deepEqual(await agent.outcome(decision, "fine"),
      { status: "ok", result: "fine", halt: false, rule: null, source: null });
  });
});

describe("guard", () => {
  for (const sync of [false, true]) {
    test(`an allowed call runs ${sync ? "a sync" : "an async"} tool once, with its arguments`,
      async () => {
        const tool = counted(undefined, { sync });
        const result = await agent.guard("read_file", { path: "a" }, tool,
          { session: session() });
        assert.deepEqual(result, { ran: { path: "a" } });
        assert.deepEqual(tool.calls, [{ path: "a" }]);
      });
  }

  test("a modified call runs with the rewritten arguments", async () => {
    const tool = counted();
    await agent.guard("search", { query: "q", limit: 50 }, tool);
    assert.deepEqual(tool.calls, [{ query: "q", limit: 5 }]);
  });

  test("a denied call never runs and carries its decision", async () => {
    const tool = counted();
    const error = await rejection(agent.guard("delete_file", { path: "a" }, tool), ToolDenied);
    assert.equal(tool.calls.length, 0);
    assert.equal(error.decision.rule, "no-delete");
    assert.match(error.message, /trash\//);
    assert.ok(error instanceof CallwardenError);
  });

  test("an ask does not run until approved, then runs once", async () => {
    const tool = counted();
    const fields = { session: session() };
    const error = await rejection(agent.guard("deploy", { env: "prod" }, tool, fields),
      ApprovalRequired);
    assert.equal(tool.calls.length, 0);
    assert.ok(error.approvalRequest);
    assert.equal(error.approvalRequest, error.decision.approval_request);
    assert.match(error.message, new RegExp(error.approvalRequest));
    await approver.approve(error.approvalRequest);
    await agent.guard("deploy", { env: "prod" }, tool, fields);
    assert.deepEqual(tool.calls, [{ env: "prod" }]);
    await rejection(agent.guard("deploy", { env: "prod" }, tool, fields), ApprovalRequired);
    assert.equal(tool.calls.length, 1);
  });

  test("a halt never runs and says to stop the run", async () => {
    const tool = counted();
    const error = await rejection(agent.guard("wipe", { disk: "sda" }, tool), RunHalted);
    assert.equal(tool.calls.length, 0);
    assert.equal(error.decision.effect, "halt");
  });

  test("the result is screened before it is returned", async () => {
    const tool = counted(() => `TOKEN=${SECRET}`);
    const result = await agent.guard("read_file", { path: ".env" }, tool, { session: session() });
    assert.equal(tool.calls.length, 1);
    assert.equal(typeof result, "string");
    assert.ok(!result.includes(SECRET));
  });

  test("a tool's own error reaches the caller", async () => {
    const boom = new Error("disk on fire");
    await assert.rejects(agent.guard("read_file", { path: "a" }, () => { throw boom; },
      { session: session() }), (e) => e === boom);
  });

  test("an unreachable service runs nothing", async () => {
    const tool = counted();
    const nowhere = new CallwardenClient({ baseUrl: NOBODY, token: agentToken });
    const error = await rejection(nowhere.guard("read_file", { path: "a" }, tool),
      ServiceUnavailable);
    assert.equal(tool.calls.length, 0);
    assert.equal(error.status, 0);
    assert.equal(error.code, "unreachable");
    assert.ok(error instanceof CallwardenError);
  });

  describe("a service that answers badly", () => {
    // hang: never answers; html: answers 200 with something that is not JSON;
    // shape: answers JSON that is not a decision.
    let server;
    let base;
    before(async () => {
      server = createServer((request, response) => {
        if (request.url === "/hang/v1/decide") return; // leave it hanging
        response.writeHead(200, { "content-type": request.url.startsWith("/html") ?
          "text/html" : "application/json" });
        response.end(request.url.startsWith("/html") ? "<html>hello</html>"
          : JSON.stringify({ effect: "allow" }));
      });
      await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${server.address().port}`;
    });
    after(() => {
      server.closeAllConnections();
      server.close();
    });

    test("one that does not answer in time runs nothing", async () => {
      const tool = counted();
      const slow = new CallwardenClient({ baseUrl: `${base}/hang`, token: agentToken,
        timeoutMs: 200 });
      const error = await rejection(slow.guard("read_file", {}, tool), ServiceUnavailable);
      assert.equal(error.code, "timeout");
      assert.equal(tool.calls.length, 0);
    });

    for (const prefix of ["/html", "/shape"]) {
      test(`one that answers ${prefix.slice(1)} runs nothing`, async () => {
        const tool = counted();
        const odd = new CallwardenClient({ baseUrl: base + prefix, token: agentToken });
        const error = await rejection(odd.guard("read_file", {}, tool), CallwardenError);
        assert.equal(error.code, "bad_response");
        assert.equal(tool.calls.length, 0);
      });
    }
  });
});

describe("errors", () => {
  test("a wrong token is a 401", async () => {
    const stranger = new CallwardenClient({ baseUrl: url, token: "wrong-token-0123456789" });
    const error = await rejection(stranger.decide({ tool: "read_file" }), CallwardenError);
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
    assert.ok(error.message);
  });

  test("an agent token may not approve: a 403", async () => {
    const asked = await agent.decide({ tool: "deploy", args: { env: "y" }, session: session() });
    const error = await rejection(agent.approve(asked.approval_request), CallwardenError);
    assert.equal(error.status, 403);
    assert.equal(error.code, "forbidden");
  });

  test("an unknown approval request is a 404", async () => {
    const error = await rejection(approver.approval("nope"), CallwardenError);
    assert.equal(error.status, 404);
  });

  test("a base URL that is not http(s) is refused at once", () => {
    assert.throws(() => new CallwardenClient({ baseUrl: "ftp://x", token: "t" }), TypeError);
    assert.throws(() => new CallwardenClient({ baseUrl: url, token: "" }), TypeError);
    assert.throws(() => new CallwardenClient({ baseUrl: url, token: "t", timeoutMs: 0 }),
      TypeError);
  });
});
