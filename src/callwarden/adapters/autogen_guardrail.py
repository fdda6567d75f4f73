"""The AutoGen ``GuardrailProvider`` protocol (microsoft/autogen #7405, PR #7881), with callwarden
as a provider.

The proposal adds to ``autogen_core.tools``::

    class Decision(Enum): ALLOW, DENY, MODIFY
    @dataclass
    class GuardrailResult: decision, reason=None, modified_args=None, metadata={}
    @runtime_checkable
    class GuardrailProvider(Protocol):
        async def evaluate(self, *, tool_name, args, agent_name=None, call_id=None,
                           cancellation_token=None) -> GuardrailResult: ...

and runs the providers in ``BaseTool.run_json``: in sequence, a DENY short-circuits with
``"Tool call denied: {reason}"``, a MODIFY passes ``modified_args`` to the next provider and to
the tool. When the installed ``autogen_core`` has these types they are used; otherwise this
module defines them to the letter, so code written against the proposal works unchanged.

* :class:`CallwardenGuardrailProvider` decides with a callwarden policy. ``metadata`` carries
  ``rule``, ``source``, ``decision_id``, ``effect`` and ``code``. Effects outside the proposal:
  an ``ask`` is settled by the approver / ``wait``, else it is a DENY naming the pending request
  (``metadata["approval_request_id"]``; the same call asked again runs once after
  ``callwarden approvals approve ID``); a ``halt`` is a DENY with ``metadata["halt"] = True``,
  every later call is denied until :meth:`~CallwardenGuardrailProvider.clear_halt`, and
  ``CallwardenHaltTermination(provider)`` stops the team — as the AutoGen workbench adapter does
  (raising would hang ``AssistantAgent.run``). A provider error is a DENY, never an exception.
* :class:`GuardrailTool` wraps any ``BaseTool`` and runs the proposal's ``run_json`` flow for
  today's AutoGen; :class:`GuardrailWorkbench` does the same in front of any workbench
  (``McpWorkbench`` included). Both also apply callwarden providers' output rules to the result
  and record the outcome — something the protocol has no step for.

``evaluate`` is not told what the user asked for, so the provider reads the call's
``context.request`` from the agent's model context when given one (``model_context=``, the
``ChatCompletionContext`` also passed to ``AssistantAgent``): the text of its latest
``UserMessage`` whose source is ``"user"`` (the task of ``run`` / ``run_stream``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NoReturn, Protocol, runtime_checkable

from callwarden._call import thaw
from callwarden._decision import Decision as CallwardenDecision
from callwarden._decision import Effect
from callwarden._enforce import Enforcer
from callwarden._messages import approval_pending, describe_refusal, halted, output_unscreened
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import ApprovalPending, MissingDependency

try:
    from autogen_core import CancellationToken
    from autogen_core import tools as autogen_tools
    from autogen_core.models import UserMessage
    from autogen_core.tools import BaseTool, TextResultContent, ToolResult, ToolSchema, Workbench
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the AutoGen guardrail provider", "autogen-core", "autogen") from e

__all__ = ["CallwardenGuardrailProvider", "Decision", "GuardrailProvider", "GuardrailResult",
           "GuardrailTool", "GuardrailWorkbench", "run_guardrails"]

_perf = time.perf_counter
_KEEP = 4096  # decisions kept for the output step, by decision id


class _Decision(Enum):
    """The proposal's ``Decision``."""

    ALLOW = "allow"
    DENY = "deny"
    MODIFY = "modify"


@dataclass
class _GuardrailResult:
    """The proposal's ``GuardrailResult``."""

    decision: Any
    reason: str | None = None
    modified_args: Mapping[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class _GuardrailProvider(Protocol):
    """The proposal's ``GuardrailProvider``."""

    async def evaluate(self, *, tool_name: str, args: Mapping[str, Any],
                       agent_name: str | None = None, call_id: str | None = None,
                       cancellation_token: Any = None) -> Any: ...


# AutoGen's own types once it ships them, so results compare equal to what its run_json expects.
Decision: Any = getattr(autogen_tools, "Decision", _Decision)
GuardrailResult: Any = getattr(autogen_tools, "GuardrailResult", _GuardrailResult)
GuardrailProvider: Any = getattr(autogen_tools, "GuardrailProvider", _GuardrailProvider)


class CallwardenGuardrailProvider:
    """A ``GuardrailProvider`` deciding with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside ``evaluate`` (sync or async callback, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        agent / principal / session: Recorded on every call (``agent_name`` wins for agent).
        model_context: The agent's ``ChatCompletionContext`` (give the same one to
            ``AssistantAgent(model_context=...)``): its latest message from the user is each
            call's ``context.request``.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None, model_context: Any = None) -> None:
        self._enforcer: Enforcer = enforcement_path(policy, framework="autogen",
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self._model_context = model_context
        self._halted: CallwardenDecision | None = None
        self._decisions: OrderedDict[str, CallwardenDecision] = OrderedDict()

    def __repr__(self) -> str:
        return f"CallwardenGuardrailProvider({self._enforcer!r})"

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`Enforcer` deciding the calls (its ``guard`` holds the approvals)."""
        return self._enforcer

    @property
    def halted(self) -> CallwardenDecision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests reported as pending and not yet used."""
        return self._enforcer.pending

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`)."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    async def evaluate(self, *, tool_name: str, args: Mapping[str, Any],
                       agent_name: str | None = None, call_id: str | None = None,
                       cancellation_token: Any = None) -> Any:
        """The proposal's ``evaluate``: ALLOW, MODIFY (with ``modified_args``) or DENY."""
        if self._halted is not None:
            return _deny(halted(self._halted), self._halted, halt=True)
        try:
            decision = await self._enforcer.adecide(
                tool_name, args, call_id=call_id, agent=agent_name,
                context=await request_context(self._model_context))
        except ApprovalPending as pending:
            return _deny(approval_pending(pending.decision, pending.request_id),
                         pending.decision, approval_request_id=pending.request_id)
        except Exception as e:  # fail closed: the tool does not run
            return GuardrailResult(
                decision=Decision.DENY,
                reason=f"callwarden could not decide the call to '{tool_name}' "
                       f"({type(e).__name__}: {e}); it was not run.",
                metadata={"effect": Effect.DENY.value, "error": type(e).__name__})
        if decision.effect is Effect.HALT:
            self._halted = self._halted or decision
            return _deny(halted(decision), decision, halt=True)
        if not decision.effect.allows:
            return _deny(describe_refusal(decision), decision)
        self._decisions[decision.decision_id] = decision
        while len(self._decisions) > _KEEP:
            self._decisions.popitem(last=False)
        args_now = thaw(decision.args)
        if decision.effect is Effect.MODIFY and args_now != thaw(decision.call.args):
            return GuardrailResult(decision=Decision.MODIFY, reason=decision.message,
                                   modified_args=args_now, metadata=_metadata(decision))
        return GuardrailResult(decision=Decision.ALLOW, reason=decision.message or None,
                               metadata=_metadata(decision))

    def after_call(self, result: GuardrailResult, value: Any, started: float, *,
                   failed: bool = False) -> tuple[Any, bool]:
        """After the tool ran for an ALLOW / MODIFY ``result`` of this provider: its output
        screened by the policy's output rules and the outcome recorded. Returns (what the model
        sees, whether the run halts); a value that cannot be screened is withheld."""
        decision = self._decisions.pop(str(result.metadata.get("decision_id")), None)
        if decision is None:
            return value, False
        text = value if isinstance(value, str) else _text(value)
        try:
            screened = self._enforcer.finish(decision, text, started, failed=failed)
        except Exception as e:  # fail closed: withhold what could not be checked
            return output_unscreened(decision.tool, e), False
        if screened.halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(screened.shown))
            return halted(self._halted), True
        return (value if screened.status == "ok" else screened.shown), False


async def request_context(model_context: Any) -> dict[str, Any] | None:
    """``{"request": text}`` from an AutoGen ``ChatCompletionContext``: its latest
    ``UserMessage`` from ``"user"`` (another agent's message in a team is not the user's);
    None when there is none or it cannot be read — never an exception."""
    if model_context is None:
        return None
    try:
        said = latest_user_text([
            {"role": "user", "content": m.content if isinstance(m.content, str) else
             [{"type": "text", "text": part} for part in m.content if isinstance(part, str)]}
            for m in await model_context.get_messages()
            if isinstance(m, UserMessage) and m.source == "user"])
    except Exception:
        return None
    return None if said is None else {"request": said}


def _deny(reason: str, decision: CallwardenDecision, **extra: Any) -> Any:
    return GuardrailResult(decision=Decision.DENY, reason=reason,
                           metadata={**_metadata(decision), **extra})


def _metadata(decision: CallwardenDecision) -> dict[str, Any]:
    return {"rule": decision.rule, "source": decision.source,
            "decision_id": decision.decision_id, "effect": decision.effect.value,
            "code": decision.code}


def _text(value: Any) -> str:
    if isinstance(value, ToolResult):
        return value.to_text(replace_image="[image]")
    return str(value)


async def run_guardrails(providers: Sequence[Any], tool_name: str, args: Mapping[str, Any], *,
                         agent_name: str | None = None, call_id: str | None = None,
                         cancellation_token: Any = None
                         ) -> tuple[Mapping[str, Any] | None, str | None, list[tuple[Any, Any]]]:
    """The proposal's chain: (the arguments to run with, or None when denied; the denial text;
    each provider with its result). A DENY short-circuits; a MODIFY feeds the next provider.
    A provider that raises or returns something else denies the call."""
    current: Mapping[str, Any] = dict(args)
    results: list[tuple[Any, Any]] = []
    for provider in providers:
        try:
            result = await provider.evaluate(tool_name=tool_name, args=current,
                                             agent_name=agent_name, call_id=call_id,
                                             cancellation_token=cancellation_token)
            verdict = _verdict(result)
        except Exception as e:  # fail closed
            return None, f"Tool call denied: guardrail provider error ({type(e).__name__}: {e})", \
                results
        results.append((provider, result))
        if verdict == "deny":
            return None, f"Tool call denied: {result.reason}", results
        if verdict == "modify" and result.modified_args is not None:
            current = dict(result.modified_args)
    return current, None, results


def _verdict(result: Any) -> str:
    value = getattr(getattr(result, "decision", None), "value", None)
    if value not in ("allow", "deny", "modify"):
        raise TypeError(f"evaluate returned {result!r}, not a GuardrailResult")
    return str(value)


def _after(results: Sequence[tuple[Any, Any]], value: Any, started: float,
           failed: bool = False) -> tuple[Any, bool]:
    """Output rules of the callwarden providers in the chain, in order."""
    halt = False
    for provider, result in results:
        if isinstance(provider, CallwardenGuardrailProvider):
            value, stop = provider.after_call(result, value, started, failed=failed)
            halt = halt or stop
    return value, halt


class GuardrailTool(BaseTool[Any, Any]):
    """Any AutoGen ``BaseTool`` behind guardrail providers (the proposal's ``run_json`` flow).

    Args:
        tool: The tool to guard (``FunctionTool``, an MCP tool adapter ...).
        guardrail_providers: Providers run in sequence before each call.
        agent_name: Passed to ``evaluate`` as ``agent_name``.
    """

    component_provider_override = "callwarden.adapters.autogen_guardrail.GuardrailTool"

    def __init__(self, tool: BaseTool[Any, Any], guardrail_providers: Sequence[Any] = (), *,
                 agent_name: str | None = None) -> None:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"GuardrailTool wraps an AutoGen BaseTool, got {type(tool).__name__}")
        super().__init__(tool.args_type(), tool.return_type(), tool.name, tool.description,
                         strict=getattr(tool, "_strict", False))
        self._tool = tool
        self._providers: list[Any] = []
        self._agent_name = agent_name
        for provider in guardrail_providers:
            self.add_guardrail(provider)

    def add_guardrail(self, provider: Any) -> None:
        """Appends a provider to this tool's chain."""
        if not isinstance(provider, GuardrailProvider):
            raise TypeError(f"{type(provider).__name__} is not a GuardrailProvider (it needs an "
                            "async evaluate(*, tool_name, args, ...) method)")
        self._providers.append(provider)

    @property
    def schema(self) -> ToolSchema:
        return self._tool.schema

    @property
    def tool(self) -> BaseTool[Any, Any]:
        """The guarded tool."""
        return self._tool

    async def run(self, args: Any, cancellation_token: CancellationToken) -> Any:
        return await self.run_json(args.model_dump(), cancellation_token)

    async def run_json(self, args: Mapping[str, Any], cancellation_token: CancellationToken,
                       call_id: str | None = None) -> Any:
        run_args, denied, results = await run_guardrails(
            self._providers, self.name, args, agent_name=self._agent_name, call_id=call_id,
            cancellation_token=cancellation_token)
        if run_args is None:
            return denied
        started = _perf()
        try:
            value = await self._tool.run_json(run_args, cancellation_token, call_id=call_id)
        except Exception as e:
            _after(results, f"{type(e).__name__}: {e}", started, failed=True)
            raise
        shown, _ = _after(results, value, started)
        return shown

    async def save_state_json(self) -> Mapping[str, Any]:
        return await self._tool.save_state_json()

    async def load_state_json(self, state: Mapping[str, Any]) -> None:
        await self._tool.load_state_json(state)

    def _to_config(self) -> NoReturn:
        raise NotImplementedError("a GuardrailTool holds live providers and cannot be "
                                  "serialized; serialize the inner tool and wrap it again")


class GuardrailWorkbench(Workbench):
    """Any AutoGen workbench (``McpWorkbench``, ``StaticWorkbench`` ...) behind guardrail
    providers: the proposal's flow on ``Workbench.call_tool``. A denial is an error
    ``ToolResult`` with ``"Tool call denied: {reason}"``; it never raises (AutoGen hangs on a
    workbench that does)."""

    component_provider_override = "callwarden.adapters.autogen_guardrail.GuardrailWorkbench"

    def __init__(self, workbench: Workbench, guardrail_providers: Sequence[Any], *,
                 agent_name: str | None = None) -> None:
        if not isinstance(workbench, Workbench):
            raise TypeError(f"GuardrailWorkbench wraps an AutoGen Workbench, got "
                            f"{type(workbench).__name__}")
        self._inner = workbench
        self._providers = list(guardrail_providers)
        self._agent_name = agent_name

    @property
    def inner(self) -> Workbench:
        return self._inner

    async def list_tools(self) -> list[ToolSchema]:
        return list(await self._inner.list_tools())

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,
                        cancellation_token: CancellationToken | None = None,
                        call_id: str | None = None) -> ToolResult:
        run_args, denied, results = await run_guardrails(
            self._providers, name, arguments or {}, agent_name=self._agent_name,
            call_id=call_id, cancellation_token=cancellation_token)
        if run_args is None:
            return _error(name, str(denied))
        started = _perf()
        try:
            result: ToolResult = await self._inner.call_tool(name, dict(run_args), cancellation_token,
                                                 call_id)
        except Exception as e:
            _after(results, f"{type(e).__name__}: {e}", started, failed=True)
            return _error(name, f"The tool '{name}' failed: {type(e).__name__}: {e}")
        shown, halt = _after(results, result, started, failed=result.is_error)
        if not halt and isinstance(shown, ToolResult):
            return shown  # the result as the tool gave it (the output rules left it alone)
        return _error(name, str(shown)) if halt else ToolResult(
            name=name, result=[TextResultContent(content=str(shown))], is_error=result.is_error)

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    async def reset(self) -> None:
        await self._inner.reset()

    async def save_state(self) -> Mapping[str, Any]:
        return await self._inner.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self._inner.load_state(state)

    def _to_config(self) -> NoReturn:
        raise NotImplementedError("a GuardrailWorkbench holds live providers and cannot be "
                                  "serialized; serialize the inner workbench and wrap it again")


def _error(name: str, text: str) -> ToolResult:
    return ToolResult(name=name, result=[TextResultContent(content=text)], is_error=True)
