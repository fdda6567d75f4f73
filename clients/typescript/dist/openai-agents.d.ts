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
import type { ToolInputGuardrailData, ToolInputGuardrailDefinition, ToolOutputGuardrailDefinition } from "@openai/agents";
import { type CallFields, type CallwardenClient } from "./index.js";
/** The name recorded in `call.framework` and the audit log. */
export declare const FRAMEWORK = "openai-agents-js";
/** How the guardrails describe each call to the service. */
export interface GuardrailOptions<TContext = unknown> {
    /** Fields of every call (session, principal, ...), or a function of the call that gives them. */
    fields?: CallFields | ((data: ToolInputGuardrailData<TContext>) => CallFields | Promise<CallFields>);
    /** The guardrails' name in the SDK's results and traces; `callwarden` by default. */
    name?: string;
}
/** The pair to attach to a tool: `tool({..., inputGuardrails: [input], outputGuardrails: [output]})`. */
export interface CallwardenGuardrails<TContext = unknown> {
    input: ToolInputGuardrailDefinition<TContext>;
    output: ToolOutputGuardrailDefinition<TContext>;
}
/** Builds the input and output tool guardrails that enforce `client`'s policy. */
export declare function callwardenGuardrails<TContext = unknown>(client: CallwardenClient, { fields, name }?: GuardrailOptions<TContext>): CallwardenGuardrails<TContext>;
/** Only the input guardrail: calls are decided, results are not screened nor recorded. */
export declare function callwardenInputGuardrail<TContext = unknown>(client: CallwardenClient, options?: GuardrailOptions<TContext>): ToolInputGuardrailDefinition<TContext>;
