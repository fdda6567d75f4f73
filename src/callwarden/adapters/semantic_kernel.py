"""Semantic Kernel 1.x adapter: kernel filters that put a policy in front of every function call.

``CallwardenFilter(policy).add_to(kernel)`` registers two of the kernel's own filters:

* ``FilterTypes.AUTO_FUNCTION_INVOCATION`` — every function the model calls through the
  auto-invoke loop (``FunctionChoiceBehavior.Auto()``: ``ChatCompletionAgent``,
  ``kernel.invoke_prompt``, ``get_chat_message_contents(..., kernel=kernel)``);
* ``FilterTypes.FUNCTION_INVOCATION`` — native functions code invokes itself
  (``kernel.invoke(fn)``, ``fn.invoke(kernel)``, ``{{plugin.fn}}`` in a prompt template). A call
  the auto filter already decided passes through it (decided once); prompt functions, which
  only call the model, are not tool calls and pass through too.

Effects in Semantic Kernel's idiom, for a call the model made:

* allow / modify — ``await next(context)`` runs the function; for modify ``context.arguments``
  is rewritten first (the function's parameters only; prompt variables stay as they were);
* deny — ``next`` is not called: ``context.function_result`` carries the decision's message,
  which the model receives as the tool result (the way Semantic Kernel itself reports an
  unknown function or bad arguments);
* ask — settled by the approver or by waiting ``wait`` seconds for ``callwarden approvals
  approve ID``. Semantic Kernel has no pause or approval step for kernel functions (its
  ``MCPToolApprovalCallback`` serves only Azure AI Agent hosted MCP tools), so otherwise the
  result names the pending request and the same call asked again runs once after approval;
  ``stop_on_pending=True`` also sets ``context.terminate`` so the run returns to the caller;
* halt — the result says the run halted and ``context.terminate = True`` ends the auto-invoke
  loop: the model gets no further turn. Calls already dispatched in the same parallel batch
  were each decided on their own; every later call is refused (and terminates its run) until
  :meth:`CallwardenFilter.clear_halt`.

After the function returns, the policy's output rules screen ``function_result.value`` (redact,
replace, halt) before the model sees it, and the outcome is audited (a function that raised,
which Semantic Kernel turns into an error text, is recorded as ``error``).

A direct call has no model to tell, so it raises instead: ``ToolDenied``, ``ApprovalPending``
(with its ``request_id``) or ``RunHalted``; ``kernel.invoke`` wraps them in its
``KernelInvokeException`` (the callwarden error is its ``__cause__``).

Filters run in the order they were added, the last one added closest to the function: add
callwarden's after your own, so no other filter changes the arguments after the decision.

The call's ``context.request`` is the text of the latest user message in the auto-invoke loop's
``AutoFunctionInvocationContext.chat_history``; a direct call carries none (Semantic Kernel's
``FunctionInvocationContext`` has no chat history).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from inspect import isasyncgen, isgenerator
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer, Screened, raise_unless_allowed
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import ApprovalPending, MissingDependency, RunHalted

try:
    from semantic_kernel.contents import AuthorRole, TextContent
    from semantic_kernel.filters import FilterTypes
    from semantic_kernel.functions import FunctionResult, KernelArguments
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Semantic Kernel adapter", "semantic-kernel",
                            "semantic-kernel") from e

__all__ = ["CallwardenFilter"]

FRAMEWORK = "semantic_kernel"

_perf = time.perf_counter
# Parameters Semantic Kernel fills in itself (gather_function_parameters), never the model.
_INJECTED = frozenset({"kernel", "service", "execution_settings", "arguments"})
_PLAIN = (str, int, float, bool, type(None), dict, list, tuple)


class _Running:
    """The function an auto-invoked call is running: its own FUNCTION_INVOCATION pass is
    already decided, and reports here whether the function raised."""

    __slots__ = ("entered", "error", "function")

    def __init__(self, function: Any) -> None:
        self.function = function
        self.entered = False
        self.error: BaseException | None = None


_RUNNING: ContextVar[_Running | None] = ContextVar("callwarden_sk_running", default=None)


class CallwardenFilter:
    """Decides every kernel function call with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        agent / principal / session: Recorded on every call (a kernel filter is not told which
            agent or thread runs it).
        qualified_names: Name tools ``plugin-function`` as the model sees them, instead of
            the function's own name (the plugin is in ``context.plugin`` either way).
        stop_on_pending: End the auto-invoke loop when a call's approval is pending, so the
            run returns to the caller until a person answers.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None, qualified_names: bool = False,
                 stop_on_pending: bool = False) -> None:
        self._enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self._qualified = qualified_names
        self._stop_on_pending = stop_on_pending
        self._halted: Decision | None = None
        # The exact objects handed to the kernel: remove_filter finds a filter by its id().
        self._auto = self.on_auto_function_invocation
        self._direct = self.on_function_invocation

    def __repr__(self) -> str:
        return f"CallwardenFilter({self._enforcer!r})"

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`Enforcer` deciding the calls (its ``guard`` holds the approvals)."""
        return self._enforcer

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests this filter reported as pending and not yet used."""
        return self._enforcer.pending

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`);
        the same call asked again then runs once, or is refused with the reviewer's reason."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    def add_to(self, kernel: Any, *, direct: bool = True) -> CallwardenFilter:
        """Registers the filters on ``kernel`` (``direct=False``: only the model's calls);
        returns this filter."""
        kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, self._auto)
        if direct:
            kernel.add_filter(FilterTypes.FUNCTION_INVOCATION, self._direct)
        return self

    def remove_from(self, kernel: Any) -> None:
        """Unregisters the filters :meth:`add_to` registered on ``kernel``."""
        for kind, handler in ((FilterTypes.AUTO_FUNCTION_INVOCATION, self._auto),
                              (FilterTypes.FUNCTION_INVOCATION, self._direct)):
            kernel.remove_filter(kind, filter_id=id(handler))

    # -- the model's calls (AUTO_FUNCTION_INVOCATION) ------------------------------------------

    async def on_auto_function_invocation(self, context: Any, next: Any) -> None:
        """The auto function invocation filter: decides, then runs, rewrites, refuses or halts.

        Never raises for a decision: an exception here would escape Semantic Kernel's
        ``asyncio.gather`` of the batch while the other calls of the batch run on unobserved.
        """
        function = context.function
        tool = self._name(function)
        if self._halted is not None:
            _reply(context, halted(self._halted))
            context.terminate = True
            return
        try:
            call = context.function_call_content
            decision = await self._enforcer.adecide(
                tool, _arguments(function, context.arguments),
                call_id=None if call is None else call.id,
                context=_context(function, _request(context)))
        except ApprovalPending as pending:
            _reply(context, approval_pending(pending.decision, pending.request_id))
            context.terminate = context.terminate or self._stop_on_pending
            return
        except Exception as e:  # fail closed: the function does not run
            _reply(context, undecided(tool, e))
            return
        if decision.effect is Effect.HALT:
            self._halted = self._halted or decision
            _reply(context, halted(decision))
            context.terminate = True
            return
        if not decision.effect.allows:
            _reply(context, describe_refusal(decision))
            return
        try:
            if decision.effect is Effect.MODIFY:
                context.arguments = _rewritten(function, context.arguments, decision)
        except Exception as e:  # a rewrite that cannot be applied is not run as asked
            _reply(context, undecided(tool, e))
            return
        running = _Running(function)
        token = _RUNNING.set(running)
        started = _perf()
        try:
            await next(context)
        except BaseException as e:  # an inner filter raised: Semantic Kernel's own error path
            self._record(decision, "error", started, e)
            raise
        finally:
            _RUNNING.reset(token)
        result = context.function_result
        try:
            screened = self._enforcer.finish(decision, _visible(result), started,
                                             failed=running.error is not None)
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record(decision, "error", started, e)
            _reply(context, output_unscreened(tool, e))
            return
        if screened.halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(screened.shown))
            _reply(context, halted(self._halted))
            context.terminate = True
        elif screened.status != "ok":
            _reply(context, screened.shown)

    # -- code's own calls (FUNCTION_INVOCATION) ------------------------------------------------

    async def on_function_invocation(self, context: Any, next: Any) -> None:
        """The function invocation filter: decides a call code made itself.

        Raises:
            ToolDenied: (``ApprovalPending``, ``RunHalted``) the call may not run or its
                output halts the run; any error deciding it (the function does not run).
        """
        function = context.function
        running = _RUNNING.get()
        if running is not None and running.function is function and not running.entered:
            running.entered = True  # the auto filter decided this very call
            try:
                await next(context)
            except BaseException as e:
                running.error = e
                raise
            return
        if function.is_prompt:  # renders a prompt and calls the model: no tool runs here
            await next(context)
            return
        if self._halted is not None:
            raise RunHalted(self._halted)
        tool = self._name(function)
        decision = await self._enforcer.adecide(tool, _arguments(function, context.arguments),
                                                context=_context(function))
        if decision.effect is Effect.HALT:
            self._halted = self._halted or decision
        raise_unless_allowed(decision)
        if decision.effect is Effect.MODIFY:
            context.arguments = _rewritten(function, context.arguments, decision)
        started = _perf()
        try:
            await next(context)
        except BaseException as e:
            self._record(decision, "error", started, e)
            raise
        result = context.result
        value = None if result is None else result.value
        if isasyncgen(value) or isgenerator(value):  # invoke_stream: screened as a whole
            context.result = FunctionResult(function=function.metadata, metadata=result.metadata,
                                            value=self._stream(decision, value, started))
            return
        self._settle_direct(context, decision, self._enforcer.finish(decision, _visible(result),
                                                                     started))

    async def _stream(self, decision: Decision, chunks: Any, started: float
                      ) -> AsyncIterator[Any]:
        """Collects a streaming function's chunks, screens them together, then yields them
        (or what the output rules left of them)."""
        try:
            collected = ([c async for c in chunks] if isasyncgen(chunks) else list(chunks))
        except BaseException as e:
            self._record(decision, "error", started, e)
            raise
        screened = self._enforcer.finish(decision, [_plain(c) for c in collected], started)
        if screened.halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(screened.shown))
            raise RunHalted(self._halted)
        shown = collected if screened.status == "ok" else screened.shown
        for chunk in shown if isinstance(shown, list) else [shown]:
            yield chunk

    def _settle_direct(self, context: Any, decision: Decision, screened: Screened) -> None:
        if screened.halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(screened.shown))
            raise RunHalted(self._halted)
        if screened.status != "ok":
            context.result = FunctionResult(function=context.function.metadata,
                                            value=screened.shown)

    # -- helpers -------------------------------------------------------------------------------

    def _name(self, function: Any) -> str:
        return str(function.fully_qualified_name if self._qualified else function.name)

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None) -> None:
        try:
            self._enforcer.record_outcome(decision, status, started, error)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


def _arguments(function: Any, arguments: Any) -> dict[str, Any]:
    """What the function will receive: its own parameters, from the model's call or from the
    kernel arguments (Semantic Kernel fills a parameter the model left out from those)."""
    names = [p.name for p in function.parameters if p.name and p.name not in _INJECTED]
    return {name: arguments[name] for name in names if arguments and name in arguments}


def _rewritten(function: Any, arguments: Any, decision: Decision) -> Any:
    """New kernel arguments with the function's parameters replaced by the rewritten ones."""
    own = {p.name for p in function.parameters if p.name and p.name not in _INJECTED}
    kept = {k: v for k, v in (arguments or {}).items() if k not in own}
    rewritten = KernelArguments(settings=getattr(arguments, "execution_settings", None), **kept)
    rewritten.update(thaw(decision.args))
    return rewritten


def _context(function: Any, request: str | None = None) -> dict[str, Any] | None:
    plugin = function.plugin_name
    context = {"plugin": plugin} if plugin else {}
    if request is not None:
        context["request"] = request
    return context or None


def _request(context: Any) -> str | None:
    """The text items of the latest user message in the auto-invoke loop's chat history; None
    when there is none or it cannot be read — never an exception."""
    try:
        for message in reversed(context.chat_history.messages):
            if message.role == AuthorRole.USER:
                text = "\n".join(item.text for item in message.items
                                 if isinstance(item, TextContent) and item.text)
                return latest_user_text([{"role": "user", "content": text}])  # trimmed alike
    except Exception:
        return None
    return None


def _plain(value: Any) -> Any:
    """A result value as the output rules read it (text for Semantic Kernel's contents)."""
    return value if isinstance(value, _PLAIN) else str(value)


def _visible(result: Any) -> Any:
    return None if result is None else _plain(result.value)


def _reply(context: Any, value: Any) -> None:
    """Puts ``value`` where the model reads the tool result; the function's own result (and
    its metadata) is dropped."""
    context.function_result = FunctionResult(function=context.function.metadata, value=value)
