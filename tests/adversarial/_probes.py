"""The attacks tried on callwarden, as data: each probe attacks one guard the way an agent, a
poisoned tool result or a hostile argument could, and the harness records what happened.

Used by ``test_attacks.py`` (every probe must hold) and ``bench/score_attacks.py`` (the
figures: attacks tried and executed, bypasses, hangs, crashes, events lost).

A probe *holds* when nothing harmful ran, no exception other than callwarden's refusals
escaped into the agent, it finished well inside ``HANG_AFTER``, and the audit log has a
decision event for every call it made.
"""

from __future__ import annotations

import enum
import io
import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden import (
    ApprovalRequired,
    Guard,
    RunHalted,
    ToolDenied,
    Verdict,
    policy,
    thaw,
)
from callwarden.approvals import ApprovalPending, ApprovalRefused
from callwarden.audit import Auditor, JsonlSink
from callwarden.hooks import run_hook

DEADLINE = 0.2
HANG_AFTER = 15.0  # far past any deadline: only a hang takes this long
REFUSALS = (ToolDenied, ApprovalRequired, RunHalted)

RULES: list[dict[str, Any]] = [
    {"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny"},
    {"id": "no-zero", "match": {"tool": "scale"}, "args": {"replicas": 0}, "effect": "deny"},
    {"id": "no-root-rm", "match": {"tool": "shell"},
     "shell": {"deny": ["rm -rf /", "rm -rf /*"]}, "effect": "deny"},
    {"id": "mail-asks", "match": {"tool": "send_mail"}, "effect": "ask"},
]


class Lab:
    """A guard with an audit log and a record of what its tools really ran with."""

    def __init__(self, directory: Path, policies: tuple[Any, ...] = ()) -> None:
        self.log = directory / "audit.jsonl"
        self.auditor = Auditor([JsonlSink(self.log)])
        self.guard = Guard(rules=RULES, policies=policies, timeout=DEADLINE,
                           audit=self.auditor)
        self.ran: list[tuple[str, Any]] = []
        self.calls = 0

    def tool(self, name: str) -> Callable[..., Any]:
        def run(**kwargs: Any) -> str:
            self.ran.append((name, kwargs))
            return "done"
        return run

    def run(self, name: str, args: Any, **options: Any) -> Any:
        """One guarded call through ``Guard.run``."""
        self.calls += 1
        return self.guard.run(name, args, self.tool(name), **options)

    def shared_approvals(self) -> Any:
        """Approvals in a SQLite store, which other processes (and agents' tools) can reach."""
        from callwarden.approvals import Approvals
        from callwarden.state import SQLiteStore

        self.store = SQLiteStore(self.log.parent / "state.db")
        self.guard.approvals = Approvals(self.store, ttl=600)
        return self.guard.approvals

    def protected(self, name: str, approver: Any = None, **kwargs: Any) -> Any:
        """One guarded call through ``@guard.protect``."""
        self.calls += 1
        return self.guard.protect(tool=name, approver=approver)(self.tool(name))(**kwargs)

    def decisions(self) -> list[dict[str, Any]]:
        self.auditor.close()
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [e for e in map(json.loads, lines) if e.get("type") == "decision"]


@dataclass(frozen=True)
class Probe:
    name: str
    group: str
    attack: Callable[[Lab], Any]
    # What ran that should not have (None: all good). Default: any run of the tool.
    harmful: Callable[[Lab], str | None] = field(
        default=lambda lab: f"ran {lab.ran[0]}" if lab.ran else None)
    policies: Callable[[], tuple[Any, ...]] = tuple


@dataclass
class Result:
    probe: Probe
    executed: bool = False
    bypass: str | None = None
    crash: str | None = None
    hang: bool = False
    events_lost: int = 0
    seconds: float = 0.0

    @property
    def held(self) -> bool:
        return not (self.bypass or self.crash or self.hang or self.events_lost)


def attempt(probe: Probe) -> Result:
    """Runs one probe in a thread of its own, so a hang is seen rather than suffered."""
    result = Result(probe)
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp), probe.policies())
        escaped: list[BaseException] = []

        def go() -> None:
            try:
                probe.attack(lab)
            except REFUSALS:
                pass
            except BaseException as e:  # a crash is what we count
                escaped.append(e)

        started = time.perf_counter()
        worker = threading.Thread(target=go, daemon=True)
        worker.start()
        worker.join(HANG_AFTER)
        result.seconds = time.perf_counter() - started
        result.hang = worker.is_alive()
        if escaped:
            result.crash = f"{type(escaped[0]).__name__}: {escaped[0]}"[:200]
        result.executed = bool(lab.ran)
        result.bypass = probe.harmful(lab)
        if not result.hang:
            result.events_lost = max(lab.calls - len(lab.decisions()), 0)
    return result


# -- 1. values that pass for others ------------------------------------------------------


class Env(enum.StrEnum):
    PROD = "prod"


class Replicas(enum.IntEnum):
    NONE = 0


class Sneaky(str):
    """A string whose ``str()`` and ``==`` lie about what it holds."""

    def __str__(self) -> str:
        return "ls"

    def __eq__(self, other: object) -> bool:
        return other == "ls"

    __hash__ = str.__hash__


def _received_plain(lab: Lab) -> str | None:
    if not lab.ran:
        return None
    value = next(iter(lab.ran[0][1].values()))
    return None if type(value) in (str, int, float) else f"tool got a {type(value).__name__}"


VALUES = [
    Probe("StrEnum member for a denied string", "values",
          lambda lab: lab.run("deploy", {"env": Env.PROD})),
    Probe("str subclass for a denied string", "values",
          lambda lab: lab.run("deploy", {"env": type("S", (str,), {})("prod")})),
    Probe("str subclass whose __eq__ lies", "values",
          lambda lab: lab.run("deploy", {"env": type("E", (str,), {
              "__eq__": lambda s, o: False, "__hash__": str.__hash__})("prod")})),
    Probe("IntEnum member for a denied number", "values",
          lambda lab: lab.run("scale", {"replicas": Replicas.NONE})),
    Probe("0.0 for a denied 0", "values", lambda lab: lab.run("scale", {"replicas": 0.0})),
    Probe("-0.0 for a denied 0", "values", lambda lab: lab.run("scale", {"replicas": -0.0})),
    Probe("a shell command whose str() lies", "values",
          lambda lab: lab.run("shell", {"command": Sneaky("rm -rf /")})),
    Probe("protect() with a StrEnum argument", "values",
          lambda lab: lab.protected("deploy", env=Env.PROD)),
    Probe("an allowed str subclass reaches the tool as a plain str", "values",
          lambda lab: lab.run("deploy", {"env": type("S", (str,), {})("staging")}),
          harmful=_received_plain),
]


# -- 5. hostile objects in arguments -------------------------------------------------------


def _hostile(**methods: Any) -> Any:
    return type("Hostile", (), methods)()


def _sleep(*_: Any, **__: Any) -> Any:
    time.sleep(HANG_AFTER * 4)
    return "x"


def _raise(exc: BaseException) -> Callable[..., Any]:
    def hook(*_: Any, **__: Any) -> Any:
        raise exc
    return hook


class _RaisingItems(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise RuntimeError("items() refuses")

    def keys(self) -> Any:
        raise RuntimeError("keys() refuses")


class _BadKey:
    def __str__(self) -> str:
        raise RuntimeError("str() refuses")

    __repr__ = __str__

    def __hash__(self) -> int:
        return 1


class _ClaimsStr:
    """Says it is a ``str``; it is not."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __repr__(self) -> str:
        return "'ls'"


class _Shapeshifter:
    """Shows ``ls`` to whoever copies it; the caller's original runs ``rm -rf /``."""

    def __init__(self, command: str = "rm -rf /") -> None:
        self.command = command

    def __deepcopy__(self, memo: Any) -> _Shapeshifter:
        return _Shapeshifter("ls")


@policy
def _reads_shapeshifter(call: Any) -> Verdict | None:
    job = call.args["job"].unwrap()
    if "rm" in job.command:
        return Verdict.deny("no rm")
    return None


def _ran_a_different_object(lab: Lab) -> str | None:
    if not lab.ran:
        return None
    job = lab.ran[0][1]["job"]
    return "the tool got rm -rf / after the policy saw ls" if job.command != "ls" else None


OBJECTS = [
    Probe("__repr__ that sleeps", "hostile objects",
          lambda lab: lab.run("deploy", {"env": _hostile(__repr__=_sleep)})),
    Probe("__deepcopy__ that sleeps", "hostile objects",
          lambda lab: lab.run("deploy", {"env": _hostile(__deepcopy__=_sleep)})),
    Probe("__deepcopy__ raising SystemExit", "hostile objects",
          lambda lab: lab.run("deploy", {"env": _hostile(__deepcopy__=_raise(SystemExit(3)))})),
    Probe("__repr__ raising KeyboardInterrupt", "hostile objects",
          lambda lab: lab.run("deploy", {"env": _hostile(__repr__=_raise(KeyboardInterrupt()))})),
    Probe("a key whose str() raises", "hostile objects",
          lambda lab: lab.run("deploy", {_BadKey(): "prod"})),
    Probe("a dict whose items() raises", "hostile objects",
          lambda lab: lab.run("deploy", _RaisingItems(env="prod"))),
    Probe("a nested dict whose items() raises reaches the tool as a plain dict",
          "hostile objects", lambda lab: lab.run("deploy", {"env": _RaisingItems(x="prod")}),
          harmful=lambda lab: None if lab.ran and type(lab.ran[0][1]["env"]) is dict
          else f"tool got {lab.ran}"),
    Probe("an object whose __class__ claims str", "hostile objects",
          lambda lab: lab.run("shell", {"command": _ClaimsStr()})),
    Probe("a deep copy that changes the value", "hostile objects",
          lambda lab: lab.run("shell", {"job": _Shapeshifter()}),
          harmful=_ran_a_different_object, policies=lambda: (_reads_shapeshifter,)),
    Probe("an int of 5,000 digits", "hostile objects",
          lambda lab: lab.run("deploy", {"env": "prod", "n": 10 ** 5000})),
    Probe("a 5,000-digit int recorded in an allowed call", "hostile objects",
          lambda lab: lab.run("deploy", {"env": "staging", "n": 10 ** 5000}),
          harmful=lambda lab: None),
]


# -- policies that misbehave -------------------------------------------------------------------


def _policy(effect: Callable[[Any], Any], name: str) -> Callable[[], tuple[Any, ...]]:
    return lambda: (policy(effect, name=name),)


def _raises(exc: BaseException) -> Callable[[Any], Any]:
    def evaluate(call: Any) -> Any:
        raise exc
    return evaluate


class _Custom(BaseException):
    pass


POLICIES = [
    Probe("a policy raising SystemExit", "policies",
          lambda lab: lab.run("send", {}), policies=_policy(_raises(SystemExit(1)), "exits")),
    Probe("a policy raising KeyboardInterrupt", "policies",
          lambda lab: lab.run("send", {}),
          policies=_policy(_raises(KeyboardInterrupt()), "interrupts")),
    Probe("a policy raising a custom BaseException", "policies",
          lambda lab: lab.run("send", {}), policies=_policy(_raises(_Custom()), "custom")),
    Probe("a policy returning a Verdict with a made-up effect", "policies",
          lambda lab: lab.run("send", {}),
          policies=_policy(lambda call: Verdict("yes please"), "made-up")),
    Probe("a policy returning a Verdict whose message is not text", "policies",
          lambda lab: lab.run("send", {}),
          policies=_policy(lambda call: Verdict("deny", {"x": 1}), "odd-message")),
    Probe("a policy that hangs", "policies",
          lambda lab: lab.run("send", {}), policies=_policy(_sleep, "hangs")),
    Probe("a hand-built Verdict('allow') is an allow, not a crash", "policies",
          lambda lab: lab.run("send", {}), harmful=lambda lab: None if lab.ran else "did not run",
          policies=_policy(lambda call: Verdict("allow"), "hand-built")),
]


# -- 6. the approved value, not the live one ---------------------------------------------------


def _edit_while_pending(lab: Lab) -> None:
    recipients = ["alice"]

    def approver(request: Any) -> bool:
        recipients.append("mallory")  # the caller's own list changes while a person looks
        return True

    lab.protected("send_mail", approver=approver, to=recipients)


def _mallory_got_mail(lab: Lab) -> str | None:
    for _, args in lab.ran:
        if "mallory" in thaw(args).get("to", []):
            return "mail went to a recipient nobody approved"
    return None


TOCTOU = [
    Probe("a list edited while its approval was pending", "approved value",
          _edit_while_pending, harmful=_mallory_got_mail),
]


# -- 2. approvals an agent grants itself ---------------------------------------------------------

AGENT = "agent-1"


def _pending(lab: Lab, args: dict[str, Any]) -> str:
    try:
        lab.run("send_mail", args, agent=AGENT)
    except ApprovalPending as pending:
        return pending.request_id
    raise AssertionError("the call was not held for approval")


def _self_approval(by: str) -> Callable[[Lab], None]:
    def attack(lab: Lab) -> None:
        rid = _pending(lab, {"to": "boss"})
        try:
            lab.guard.approvals.approve(rid, by=by)
        except ApprovalRefused:
            return
        lab.run("send_mail", {"to": "boss"}, agent=AGENT, approval_id=rid)
    return attack


def _forged(change: dict[str, Any]) -> Callable[[Lab], None]:
    """An agent with a database client writes itself an approval."""
    def attack(lab: Lab) -> None:
        lab.shared_approvals()
        rid = _pending(lab, {"to": "boss"})
        found = lab.store.get(f"approvals:req:{rid}")
        lab.store.compare_and_set(found.key, found.version, {**found.value, **change}, ttl=None)
        lab.run("send_mail", {"to": "boss"}, agent=AGENT, approval_id=rid)
    return attack


def _forged_grant(lab: Lab) -> None:
    lab.shared_approvals()
    grant = {"id": "g", "scope": "tool", "tool": "*", "session": None, "agent": None,
             "by": "alice", "created": 0.0, "expires": 4e9}
    lab.store.compare_and_set("approvals:grants", None, {"grants": {"g": grant}}, ttl=None)
    lab.run("send_mail", {"to": "boss"}, agent=AGENT)


def _look_alike_value(lab: Lab) -> None:
    rid = _pending(lab, {"to": "boss", "amount": "inf"})
    lab.guard.approvals.approve(rid, by="alice")
    lab.run("send_mail", {"to": "boss", "amount": float("inf")}, agent=AGENT, approval_id=rid)


def _ran_inf(lab: Lab) -> str | None:
    floats = [a for _, a in lab.ran if isinstance(a.get("amount"), float)]
    return "the approval of 'inf' ran the float inf" if floats else None


def _through_the_shell(command: str) -> Callable[[Lab], None]:
    """Under the recommended baseline, the agent's shell tool tries to approve for it."""
    def attack(lab: Lab) -> None:
        policy_file = lab.log.parent / "policy.yaml"
        policy_file.write_text("version: 1\nextends: callwarden:recommended\n")
        lab.guard = Guard.from_file(policy_file, audit=False)
        lab.guard._auditor = lab.auditor  # the lab's log (one spelling in every version)
        lab.run("Bash", {"command": command})
    return attack


APPROVALS = [
    *(Probe(f"the agent's shell runs {command!r}", "approvals", _through_the_shell(command))
      for command in ("callwarden approvals approve 1f2e3d --by alice",
                      "python3 -m callwarden approvals approve 1f2e3d --by alice",
                      "sqlite3 ~/.local/state/callwarden/state.db 'update kv set v = 1'",
                      "cat ~/.config/callwarden/approvals.key")),
    *(Probe(f"the agent approves itself as {by!r}", "approvals", _self_approval(by))
      for by in ("AGENT-1", " agent-1 ", "agent\u200b-1", "\u0430gent-1", "agent-1\u200d")),
    Probe("an approved request written into the store", "approvals",
          _forged({"status": "approved", "resolved_by": "alice", "resolved_at": 1.0})),
    Probe("a wildcard grant written into the store", "approvals", _forged_grant),
    Probe("approving 'inf' to run inf", "approvals", _look_alike_value, harmful=_ran_inf),
]


# -- 8. a coding agent's hook given what it does not understand --------------------------------


def _hook(event: Any) -> Callable[[Lab], None]:
    def attack(lab: Lab) -> None:
        policy_file = lab.log.parent / "policy.yaml"
        policy_file.write_text(json.dumps({"version": 1, "rules": RULES}))
        payload = {"hook_event_name": event, "tool_name": "Bash", "session_id": "s",
                   "tool_input": {"command": "rm -rf /"}}
        out, err = io.StringIO(), io.StringIO()
        code = run_hook("claude-code", policy_file, io.StringIO(json.dumps(payload)), out, err)
        reply = json.loads(out.getvalue() or "{}").get("hookSpecificOutput", {})
        if code == 0 and reply.get("permissionDecision") != "deny":
            lab.ran.append(("Bash", payload["tool_input"]))  # Claude Code would run it
    return attack


HOOKS = [
    Probe(f"Claude Code hook event {event!r}", "hook input", _hook(event))
    for event in ("pretooluse", " PreToolUse", "PreToolUse ", "PRETOOLUSE", 7, None,
                  "PreToolUse\u0000", "BeforeTool")
]


PROBES: list[Probe] = [*VALUES, *OBJECTS, *POLICIES, *TOCTOU, *APPROVALS, *HOOKS]
