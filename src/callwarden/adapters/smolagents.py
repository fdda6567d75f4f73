"""smolagents 1.26 adapter: every tool call an agent makes, decided by a callwarden policy.

:func:`guard_agent` swaps each tool in ``agent.tools`` for a :class:`GuardedTool` (in place)
and registers a step callback (``agent.step_callbacks``, smolagents' per-step hook). A
``GuardedTool`` sits in front of the tool's ``Tool.__call__``, the one path both agent kinds
take: ``ToolCallingAgent.execute_tool_call`` calls ``tool(**args, sanitize_inputs_outputs=True)``,
and ``CodeAgent``'s ``LocalPythonExecutor`` calls ``tool(...)`` by name from the generated code.
Effects in smolagents' idiom:

* allow / modify — the tool runs, with the rewritten arguments for modify (positional
  arguments from code are bound to the tool's input names first);
* deny — the tool never runs. A ``ToolCallingAgent`` gets the decision's message as the call's
  observation (the other calls of the same step still report theirs); in a ``CodeAgent`` the
  call raises :class:`ToolCallRefused`, so the snippet stops at that line and the model reads
  ``Code execution failed at line ... due to: ToolCallRefused: <message>`` as the step's error;
* ask — smolagents has no approval mechanism: the ``approver`` settles it inline, or ``wait``
  seconds for ``callwarden approvals approve ID``; otherwise the model is told the request is
  pending (observation / ``ToolCallRefused``), and the same call made again runs once after
  approval. ``pause_on_pending=True`` also ends the run with
  :class:`~callwarden.ApprovalPending` after the step; resume with ``agent.run(..., reset=False)``;
* halt — the call is refused, the gate refuses every later call, and at the end of the step the
  callback calls ``agent.interrupt()`` and raises :class:`~callwarden.RunHalted` out of
  ``agent.run()`` (a final answer in the same step does not end the run normally). The gate
  stays halted, across runs, until :meth:`ToolGate.clear_halt`;
* output rules — the tool's result is screened before the agent sees it: redacted, withheld
  (refused like a deny) or halting.

An error while deciding refuses the call with the reason (fail closed). ``final_answer`` is the
agent's answer, not an action, and is left alone. Managed agents' own tools are guarded with
the same gate. Remote executors (e2b, docker, modal, blaxel) run tools inside their sandbox,
out of callwarden's reach: :func:`guard_agent` refuses them, and a ``GuardedTool`` refuses to be
serialized.

The call's ``context.request`` is the task of the latest ``TaskStep`` in the memory of the agent
given to :func:`guard_agent` (``agent.run(task)``; for a managed agent's tools, the managing
agent's task, not the one its model wrote); tools guarded alone (:func:`guard_tools`) belong to
no agent and carry no request.
"""

from __future__ import annotations

import inspect
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from callwarden.exceptions import MissingDependency

try:
    from smolagents.agent_types import AgentText  # type: ignore[import-untyped]
    from smolagents.agents import CodeAgent, MultiStepAgent  # type: ignore[import-untyped]
    from smolagents.local_python_executor import (  # type: ignore[import-untyped]
        LocalPythonExecutor,
    )
    from smolagents.memory import ActionStep, TaskStep  # type: ignore[import-untyped]
    from smolagents.tools import Tool  # type: ignore[import-untyped]
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the smolagents adapter", "smolagents", "smolagents") from e

from callwarden._call import thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
from callwarden._enforce import Enforcer, Screened
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    invalid_call,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import ApprovalPending, CallwardenError, RunHalted

__all__ = ["FRAMEWORK", "GuardedTool", "ToolCallRefused", "ToolGate", "guard_agent",
           "guard_tools"]

FRAMEWORK = "smolagents"
"""The name recorded in ``call.framework`` and the audit log."""

# The agent's answer, not an action: never decided (see the module docstring).
_FINAL_ANSWER = "final_answer"
_MAX_ASKED = 4096
_perf = time.perf_counter


class ToolCallRefused(CallwardenError):
    """A guarded tool refused a call made from Python code (``CodeAgent``'s generated code, or
    your own); ``str(error)`` is the text the model reads. ``decision`` is the decision that
    refused it, or None when callwarden could not decide."""

    def __init__(self, text: str, decision: Decision | None = None) -> None:
        super().__init__(text)
        self.decision = decision


class GuardedTool(Tool):  # type: ignore[misc]  # smolagents ships no type information
    """A smolagents ``Tool`` that asks a :class:`ToolGate` before the wrapped tool runs.

    It shows the model the wrapped tool's name, description, inputs and output type; other
    attributes are read through to the wrapped tool. Build it with :meth:`ToolGate.tools` or
    :func:`guard_tools`.
    """

    # forward() takes whatever the wrapped tool takes: its signature is not ours to check.
    skip_forward_signature_validation = True

    def __init__(self, tool: Any, gate: ToolGate, *, agent: str | None = None) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f"GuardedTool wraps a smolagents Tool, got {type(tool).__name__}")
        self._inner = tool
        self._gate = gate
        self._agent = agent
        self.name = tool.name
        self.description = tool.description
        self.inputs = tool.inputs
        self.output_type = tool.output_type
        self.output_schema = getattr(tool, "output_schema", None)
        self.is_initialized = True  # the wrapped tool sets itself up when it first runs
        # The agent the user gives tasks to (ToolGate.agent sets it): its task is the request.
        self._user_agent: weakref.ref[Any] | None = None

    def __repr__(self) -> str:
        return f"GuardedTool({self._inner!r}, {self._gate!r})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def inner(self) -> Any:
        """The guarded tool."""
        return self._inner

    @property
    def agent_name(self) -> str | None:
        """The agent recorded on this tool's calls (None: the gate's default)."""
        return self._agent

    @property
    def gate(self) -> ToolGate:
        """The gate that decides this tool's calls."""
        return self._gate

    def __call__(self, *args: Any, sanitize_inputs_outputs: bool = False, **kwargs: Any) -> Any:
        # ToolCallingAgent dispatches with sanitize_inputs_outputs=True and reads the return
        # value as the observation; a call from code (CodeAgent) must raise to stop the code.
        return self._gate.call(self, args, kwargs, dispatched=sanitize_inputs_outputs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._gate.call(self, args, kwargs, dispatched=False)

    def to_dict(self) -> NoReturn:
        raise NotImplementedError(
            f"the guarded tool '{self.name}' holds a live policy and cannot be serialized or "
            "sent to a remote executor, where callwarden could not see its calls; use "
            "CodeAgent's local executor, or save the unguarded tool and guard it after loading")


class ToolGate:
    """Guards smolagents tools with one callwarden policy, and stops runs it halts.

    Args:
        guard: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        pause_on_pending: End the run (``ApprovalPending`` from ``agent.run``) after a step in
            which a call's approval request became pending.
        **enforcer_kwargs: ``approver``, ``wait``, ``agent``, ``principal``, ``session`` for
            :class:`~callwarden.adapters.Enforcer`. In a ``CodeAgent`` keep ``wait`` below the
            executor's ``timeout_seconds`` (30 s by default): the snippet runs under it.
    """

    def __init__(self, guard: Any, *, pause_on_pending: bool = False,
                 **enforcer_kwargs: Any) -> None:
        self.enforcer: Enforcer = enforcement_path(guard, framework=FRAMEWORK,
                                                   **enforcer_kwargs)
        self.pause_on_pending = pause_on_pending
        self._halted: Decision | None = None
        self._lock = threading.Lock()
        # The decisions of requests reported pending, for ApprovalPending(pause_on_pending).
        self._asked: OrderedDict[str, Decision] = OrderedDict()
        self._agents: weakref.WeakSet[Any] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"ToolGate({self.enforcer!r})"

    # -- state -------------------------------------------------------------------------------

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the gate, or None while calls may run."""
        return self._halted

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests reported to the model as pending and not yet used."""
        return self.enforcer.pending

    def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`):
        the same call made again then runs once, or is refused with the reviewer's reason."""
        self.enforcer.answer(request_id, answer, by=by)

    # -- guarding ------------------------------------------------------------------------------

    def tools(self, tools: Iterable[Any], *, agent: str | None = None) -> list[GuardedTool]:
        """Guarded wrappers of ``tools`` (a tool guarded by this gate already is kept as it is).

        Pass them to an agent together with :meth:`step_callback`, or use :meth:`agent`,
        which does both; without the callback a halt refuses calls but cannot end the run.
        """
        return [tool if isinstance(tool, GuardedTool) and tool.gate is self
                else GuardedTool(tool, self, agent=agent) for tool in tools]

    def agent(self, agent: Any) -> Any:
        """Guards ``agent`` in place (its tools, its managed agents' tools) and registers the
        step callback that ends a halted run; returns the agent.

        Raises:
            TypeError: not a smolagents agent, or a ``CodeAgent`` whose executor is remote.
        """
        return self._agent(agent, None)

    def _agent(self, agent: Any, user_agent: weakref.ref[Any] | None) -> Any:
        if not isinstance(agent, MultiStepAgent):
            raise TypeError(f"guard_agent takes a smolagents agent, got {type(agent).__name__}")
        if isinstance(agent, CodeAgent) and not isinstance(agent.python_executor,
                                                           LocalPythonExecutor):
            raise TypeError(
                f"{type(agent.python_executor).__name__} runs the agent's tools inside a "
                "remote sandbox, where callwarden cannot see their calls; guard a CodeAgent "
                "with the local executor (executor_type='local')")
        user_agent = user_agent or weakref.ref(agent)
        name = agent.name if isinstance(agent.name, str) else None
        for key, tool in list(agent.tools.items()):
            if key != _FINAL_ANSWER:
                guarded = agent.tools[key] = self.tools([tool], agent=name)[0]
                guarded._user_agent = user_agent
        if agent not in self._agents:
            self._agents.add(agent)
            agent.step_callbacks.register(ActionStep, self.step_callback())
        for managed in agent.managed_agents.values():
            self._agent(managed, user_agent)  # its task is written by the managing model
        return agent

    def step_callback(self) -> _StepCheck:
        """A callback for ``step_callbacks=[...]`` (or ``{ActionStep: ...}``) that ends the
        run after a step in which the gate halted (``RunHalted``) or, with
        ``pause_on_pending``, in which an approval request became pending."""
        return _StepCheck(self)

    # -- one call --------------------------------------------------------------------------

    def call(self, tool: GuardedTool, args: tuple[Any, ...], kwargs: dict[str, Any], *,
             dispatched: bool) -> Any:
        """Decides one call of ``tool`` and runs it, or refuses it in the caller's idiom: the
        refusal text as the result when ``dispatched`` (a ``ToolCallingAgent`` call), else
        :class:`ToolCallRefused`."""
        inner = tool.inner
        name: str = inner.name
        stopped = self._halted
        if stopped is not None:
            return _refuse(halted(stopped), stopped, dispatched)
        try:
            arguments = _arguments(inner, args, kwargs)
        except TypeError as e:
            return _refuse(invalid_call(name, e), None, dispatched)
        try:
            decision = self.enforcer.decide(name, arguments, agent=tool.agent_name,
                                            context=_request(tool._user_agent))
        except ApprovalPending as pending:
            self._note_pending(pending)
            return _refuse(approval_pending(pending.decision, pending.request_id),
                           pending.decision, dispatched)
        except Exception as e:  # fail closed: the tool does not run
            return _refuse(undecided(name, e), None, dispatched)
        if decision.effect is Effect.HALT:
            return _refuse(halted(self._halt(decision)), decision, dispatched)
        if not decision.effect.allows:
            return _refuse(describe_refusal(decision), decision, dispatched)
        started = _perf()
        try:
            result = inner(**thaw(decision.args), sanitize_inputs_outputs=dispatched)
        except BaseException as e:
            self._record(decision, OutcomeStatus.ERROR, started, e)
            raise
        return self._screen(decision, result, started, dispatched)

    def _note_pending(self, pending: ApprovalPending) -> None:
        with self._lock:
            self._asked[pending.request_id] = pending.decision
            while len(self._asked) > _MAX_ASKED:
                self._asked.popitem(last=False)

    def asked(self, request_id: str) -> Decision | None:
        """The ``ask`` decision of a request this gate reported pending, or None."""
        return self._asked.get(request_id)

    def _halt(self, decision: Decision) -> Decision:
        with self._lock:  # ToolCallingAgent runs a step's calls in threads: the first halt wins
            if self._halted is None:
                self._halted = decision
            return self._halted

    def _screen(self, decision: Decision, result: Any, started: float, dispatched: bool) -> Any:
        name = decision.call.tool
        try:
            screened = self.enforcer.screen(
                decision, str(result) if isinstance(result, AgentText) else result)
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record(decision, OutcomeStatus.ERROR, started, e)
            return _refuse(output_unscreened(name, e), decision, dispatched)
        self._record(decision, screened.status, started, None, screened)
        if screened.halt:
            stop = self._halt(decision._replace(effect=Effect.HALT, message=str(screened.shown)))
            return _refuse(halted(stop), stop, dispatched)
        if screened.status is OutcomeStatus.OK:
            return result
        if screened.status is OutcomeStatus.OUTPUT_BLOCKED:
            return _refuse(str(screened.shown), decision, dispatched)
        return screened.shown

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Screened | None = None) -> None:
        try:
            self.enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


class _StepCheck:
    """The step callback of one agent: stops its run after a halt (or a new pending request)."""

    __slots__ = ("_gate", "_reported")

    def __init__(self, gate: ToolGate) -> None:
        self._gate = gate
        self._reported: set[str] = set()

    def __repr__(self) -> str:
        return f"<callwarden step check of {self._gate!r}>"

    def __call__(self, step: Any, agent: Any = None) -> None:
        gate = self._gate
        if gate.halted is not None:
            _stop(agent, step, RunHalted(gate.halted))
        if not gate.pause_on_pending:
            return
        fresh = [(r, asked) for r in gate.pending if r not in self._reported
                 and (asked := gate.asked(r)) is not None]
        if fresh:
            self._reported.update(r for r, _ in fresh)
            request_id, asked = fresh[-1]
            _stop(agent, step, ApprovalPending(asked, request_id))


def _stop(agent: Any, step: Any, error: Exception) -> NoReturn:
    """Ends the run: the agent's own interrupt switch (a later step never starts), and the error
    raised out of ``agent.run()`` now. smolagents appends the step to memory after its
    callbacks, so a callback that raises appends it first: a resumed run sees the step."""
    if agent is not None:
        agent.interrupt()
        steps = agent.memory.steps
        if not any(s is step for s in steps):
            steps.append(step)
    raise error


def _request(user_agent: weakref.ref[Any] | None) -> dict[str, Any] | None:
    """``{"request": text}``: the task of the latest ``TaskStep`` in the agent's memory; None
    when there is none or it cannot be read — never an exception."""
    try:
        agent = None if user_agent is None else user_agent()
        if agent is None:
            return None
        for step in reversed(list(agent.memory.steps)):
            if isinstance(step, TaskStep):
                said = latest_user_text([{"role": "user", "content": step.task}])
                return None if said is None else {"request": said}
    except Exception:
        return None
    return None


def _refuse(text: str, decision: Decision | None, dispatched: bool) -> str:
    if dispatched:
        return text
    raise ToolCallRefused(text, decision)


def _arguments(tool: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments by input name, as ``Tool.__call__`` would pass them on.

    Raises:
        TypeError: they do not fit the tool's inputs.
    """
    inputs: list[str] = list(tool.inputs)
    if len(args) == 1 and not kwargs and isinstance(args[0], dict) \
            and all(key in inputs for key in args[0]):
        return dict(args[0])  # Tool.__call__ accepts one dict of the inputs
    if not args:
        return dict(kwargs)
    try:
        signature: inspect.Signature | None = inspect.signature(tool.forward)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        params = list(signature.parameters.values())
        if params and params[0].name == "self":  # @tool's forward shows `self` (a staticmethod)
            signature = signature.replace(parameters=params[1:])
    if signature is not None and not any(p.kind is inspect.Parameter.VAR_POSITIONAL
                                         for p in signature.parameters.values()):
        bound = signature.bind(*args, **kwargs)
        named = {k: v for k, v in bound.arguments.items()
                 if signature.parameters[k].kind is not inspect.Parameter.VAR_KEYWORD}
        for key, value in bound.arguments.items():
            if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
                named.update(value)
        return named
    if len(args) > len(inputs):
        raise TypeError(f"takes {len(inputs)} arguments ({', '.join(inputs)}), "
                        f"{len(args)} were given")
    named = dict(zip(inputs, args, strict=False))
    for key, value in kwargs.items():
        if key in named:
            raise TypeError(f"got multiple values for argument '{key}'")
        named[key] = value
    return named


def guard_tools(tools: Iterable[Any], guard: Any, **kwargs: Any) -> list[GuardedTool]:
    """Guarded wrappers of smolagents ``tools``.

    Args:
        tools: ``Tool`` s (``@tool`` functions, ``Tool`` subclasses, MCP tools, ...).
        guard: A :class:`ToolGate`, a :class:`~callwarden.Guard`, a policy file path, or a
            policy dict.
        **kwargs: :class:`ToolGate` arguments (``approver``, ``wait``, ``pause_on_pending``,
            ...) when ``guard`` is not a gate already.
    """
    return _gate(guard, kwargs).tools(tools)


def guard_agent(agent: Any, guard: Any, **kwargs: Any) -> ToolGate:
    """Guards a ``ToolCallingAgent`` or ``CodeAgent`` in place and returns its gate (for
    ``halted``, ``clear_halt``, ``pending``, ``answer``); arguments as for
    :func:`guard_tools`."""
    gate = _gate(guard, kwargs)
    gate.agent(agent)
    return gate


def _gate(guard: Any, kwargs: dict[str, Any]) -> ToolGate:
    if isinstance(guard, ToolGate):
        if kwargs:
            raise TypeError(f"pass options to ToolGate(...) itself, not with a ToolGate: "
                            f"{sorted(kwargs)}")
        return guard
    return ToolGate(guard, **kwargs)
