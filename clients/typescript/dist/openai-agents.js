/**
 * Tool guardrails for the OpenAI Agents JS SDK (`@openai/agents`) that ask a callwarden
 * decision service about every call of the tools they are attached to.
 *
 * Each effect maps onto the SDK's own idiom:
 *
 * - allow: the tool runs; the output guardrail screens its result with the output rules.
 * - deny, ask: the input guardrail answers `rejectContent(message)`: the tool does not run and
 *   the model reads callwarden's message (for ask: the approval request to approve; once it
 *   is approved, the same call with the same arguments runs once).
 * - modify: also refused, with the arguments the policy permits. An input guardrail cannot
 *   hand the tool other arguments (the SDK runs it with the model's own), so to run modified
 *   calls as rewritten, call {@link CallwardenClient.guard} inside the tool's `execute`.
 * - halt: `throwException()`: the run stops with the SDK's `ToolCallError`, whose `error` is a
 *   `ToolInputGuardrailTripwireTriggered` (its `result.output.outputInfo` is the decision).
 * - output rules: the output guardrail answers `rejectContent` with the redacted or blocked
 *   text; a halting output rule throws `ToolOutputGuardrailTripwireTriggered`.
 *
 * A service that cannot decide refuses the call with the reason: the tool does not run.
 *
 * @module
 */
import { defineToolInputGuardrail, defineToolOutputGuardrail, ToolGuardrailFunctionOutputFactory as Output, } from "@openai/agents";
import { allows, describePending, describeRefusal, } from "./index.js";
/** The name recorded in `call.framework` and the audit log. */
export const FRAMEWORK = "openai-agents-js";
// Decisions waiting for the same call's output guardrail. A run that stops between the two
// leaves its entry behind: the cap bounds that.
const MAX_STAGED = 4096;
/** Builds the input and output tool guardrails that enforce `client`'s policy. */
export function callwardenGuardrails(client, { fields = {}, name = "callwarden" } = {}) {
    const staged = new Map();
    async function decide(data) {
        const { toolCall } = data;
        const extra = typeof fields === "function" ? await fields(data) : fields;
        return await client.decide({
            framework: FRAMEWORK, call_id: toolCall.callId, ...extra, tool: toolCall.name,
            args: parseArguments(toolCall.arguments),
        });
    }
    const input = defineToolInputGuardrail({
        name,
        async run(data) {
            let decision;
            try {
                decision = await decide(data);
            }
            catch (error) {
                return Output.rejectContent(`The call to '${data.toolCall.name}' was not run: ` +
                    `callwarden could not decide it (${errorText(error)}). Do not retry the same call.`);
            }
            switch (decision.effect) {
                case "allow":
                    if (staged.size >= MAX_STAGED)
                        staged.delete(staged.keys().next().value);
                    staged.set(data.toolCall.callId, { decision, started: performance.now() });
                    return Output.allow(decision);
                case "modify":
                    return Output.rejectContent(`The call to '${data.toolCall.name}' was not run: the ` +
                        `policy permits it only with these arguments: ${JSON.stringify(decision.args)}. ` +
                        "Call it again with them.", decision);
                case "halt":
                    return Output.throwException(decision);
                case "ask":
                    return Output.rejectContent(describePending(decision), decision);
                default:
                    return Output.rejectContent(describeRefusal(decision), decision);
            }
        },
    });
    const output = defineToolOutputGuardrail({
        name,
        async run(data) {
            const tool = data.toolCall.name;
            try {
                const entry = staged.get(data.toolCall.callId);
                staged.delete(data.toolCall.callId);
                // Without the input guardrail's decision (it is not attached, or the SDK ran the tool
                // some other way) the output is screened against a fresh decision, not let through.
                const { decision, started } = entry ?? { decision: await decide(data),
                    started: performance.now() };
                if (!allows(decision)) {
                    return Output.rejectContent(`The output of '${tool}' was withheld: ${describeRefusal(decision)}`, decision);
                }
                const screened = await client.outcome(decision, data.output, { durationMs: performance.now() - started });
                if (screened.halt)
                    return Output.throwException(screened);
                if (screened.status !== "ok") {
                    return Output.rejectContent(asText(screened.result), screened);
                }
                return Output.allow(screened);
            }
            catch (error) {
                return Output.rejectContent(`The output of '${tool}' was withheld: callwarden could ` +
                    `not check it (${errorText(error)}).`);
            }
        },
    });
    return { input, output };
}
/** Only the input guardrail: calls are decided, results are not screened nor recorded. */
export function callwardenInputGuardrail(client, options = {}) {
    return callwardenGuardrails(client, options).input;
}
function parseArguments(raw) {
    // What is not JSON goes as it is: the service denies arguments that are not an object,
    // with the reason. "" is a call without arguments, or one the SDK redacted because they
    // failed its own parsing (then the tool does not run whatever is decided here).
    try {
        return raw === "" ? {} : JSON.parse(raw);
    }
    catch {
        return raw;
    }
}
function asText(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
}
function errorText(error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
