// The guardrails of src/openai-agents.ts in a real @openai/agents run, its model scripted (the
// SDK's own Model interface, no network), against a real `callwarden serve`. Optional:
// tests/serve/test_typescript_client.py runs this file only when node_modules/@openai/agents
// is installed (`npm ci`).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import {
  Agent,
  Runner,
  ToolCallError,
  ToolInputGuardrailTripwireTriggered,
  Usage,
  setTracingDisabled,
  tool,
} from "@openai/agents";
import { z } from "zod";

import { CallwardenClient } from "../dist/index.js";
import { callwardenGuardrails } from "../dist/openai-agents.js";
import { agentToken, approverToken, SECRET, url } from "./service.mjs";

setTracingDisabled(true);

const agentClient = new CallwardenClient({ baseUrl: url, token: agentToken });
const approver = new CallwardenClient({ baseUrl: url, token: approverToken });

/** A Model that answers each turn from a script: tool calls, then "done". */
class ScriptedModel {
  constructor(turns) {
    this.turns = turns;
    this.requests = [];
  }

  async getResponse(request) {
    this.requests.push(request);
    const calls = this.turns.shift();
    const output = calls === undefined
      ? [{ type: "message", id: `m${this.requests.length}`, role: "assistant",
        status: "completed", content: [{ type: "output_text", text: "done" }] }]
      : calls.map(([name, args], i) => ({ type: "function_call", id: `fc-${randomUUID()}`,
        callId: `call-${this.requests.length}-${i}-${name}`, name, status: "completed",
        arguments: JSON.stringify(args) }));
    return { usage: new Usage(), output, responseId: `r${this.requests.length}` };
  }

  async *getStreamedResponse() {
    throw new Error("the scripted model does not stream");
  }
}

/** The tools of the policy in tests/serve/test_serve.py, each counting its runs. */
function tools(guardrails) {
  const runs = {};
  const make = (name, parameters, answer = (args) => `${name} ran with ${JSON.stringify(args)}`) => {
    runs[name] = [];
    return tool({
      name, description: `The ${name} tool.`, parameters,
      execute: async (args) => {
        runs[name].push(args);
        return answer(args);
      },
      inputGuardrails: [guardrails.input], outputGuardrails: [guardrails.output],
    });
  };
  return {
    runs,
    list: [
      make("read_file", z.object({ path: z.string() }), () => `TOKEN=${SECRET}\nlines: 1`),
      make("delete_file", z.object({ path: z.string() })),
      make("search", z.object({ query: z.string(), limit: z.number() })),
      make("deploy", z.object({ env: z.string() })),
      make("wipe", z.object({ disk: z.string() })),
    ],
  };
}

/** Runs one scripted agent; answers the run's result, the tool runs and what the model read. */
async function run(turns, { client = agentClient, fields } = {}) {
  const guardrails = callwardenGuardrails(client, { fields });
  const { runs, list } = tools(guardrails);
  const model = new ScriptedModel(turns);
  const agent = new Agent({ name: "ops", instructions: "Do the task.", model, tools: list });
  const outcome = { runs, model, result: undefined, error: undefined };
  try {
    outcome.result = await new Runner({ tracingDisabled: true }).run(agent, "go");
  } catch (error) {
    outcome.error = error;
  }
  return outcome;
}

/** What the model read as each call's output, by tool name (from its last request). */
function outputs(model) {
  const request = model.requests.at(-1);
  const items = Array.isArray(request.input) ? request.input : [];
  const found = {};
  for (const item of items) {
    if (item.type === "function_call_result") {
      found[item.name] = typeof item.output === "string" ? item.output
        : item.output?.text ?? JSON.stringify(item.output);
    }
  }
  return found;
}

describe("openai-agents guardrails", () => {
  test("an allowed call runs with its output redacted; a denied one is refused", async () => {
    const session = `oa-${randomUUID()}`;
    const { runs, model, result, error } = await run(
      [[["read_file", { path: ".env" }], ["delete_file", { path: "a" }]]],
      { fields: { session } });
    assert.equal(error, undefined);
    assert.equal(result.finalOutput, "done");
    assert.deepEqual(runs.read_file, [{ path: ".env" }]);
    assert.deepEqual(runs.delete_file, []);
    const read = outputs(model);
    assert.ok(!read.read_file.includes(SECRET), read.read_file);
    assert.match(read.read_file, /lines: 1/);
    assert.match(read.delete_file, /trash\//);
  });

  test("a halt stops the run before the tool runs", async () => {
    const { runs, error } = await run([[["wipe", { disk: "sda" }]]]);
    // The SDK surfaces the tripwire as the cause of a ToolCallError.
    assert.ok(error instanceof ToolCallError, String(error));
    assert.ok(error.error instanceof ToolInputGuardrailTripwireTriggered, String(error.error));
    assert.equal(error.error.result.output.outputInfo.effect, "halt");
    assert.deepEqual(runs.wipe, []);
  });

  test("a modified call is refused with the arguments the policy permits", async () => {
    const { runs, model } = await run([[["search", { query: "q", limit: 50 }]]]);
    assert.deepEqual(runs.search, []);
    assert.match(outputs(model).search, /"limit":5/);
  });

  for (const sync of [true, false]) {
    test(`an ask waits for approval, then the same call runs once (${
      sync ? "sync" : "async"} fields)`, async () => {
      const session = `oa-${randomUUID()}`;
      const fields = sync ? (data) => ({ session, context: { callId: data.toolCall.callId } })
        : async () => ({ session });
      const deploy = [["deploy", { env: "prod" }]];
      const first = await run([deploy], { fields });
      assert.deepEqual(first.runs.deploy, []);
      const [request] = await approver.approvals({ status: "pending", session });
      assert.ok(request, "no pending request for the session");
      assert.equal(request.agent, "bot");
      assert.match(outputs(first.model).deploy, new RegExp(`Approval request ${request.id}`));
      await approver.approve(request.id, { comment: "go" });
      const second = await run([deploy, deploy], { fields });
      assert.deepEqual(second.runs.deploy, [{ env: "prod" }]);  // the second asks again
      assert.match(outputs(second.model).deploy, /approval/);
    });
  }

  test("an unreachable service runs nothing and tells the model why", async () => {
    const nowhere = new CallwardenClient({ baseUrl: "http://127.0.0.1:9", token: agentToken });
    const { runs, model, error } = await run([[["read_file", { path: "a" }]]],
      { client: nowhere, fields: { session: `oa-${randomUUID()}` } });
    assert.equal(error, undefined);
    assert.deepEqual(runs.read_file, []);
    assert.match(outputs(model).read_file, /could not decide/);
  });
});
