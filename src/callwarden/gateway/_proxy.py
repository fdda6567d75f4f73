"""The gateway's message loop: MCP over stdio (JSON-RPC, one message per line) both ways.

What each effect becomes (``tools/call``):

* allow / modify — the call is forwarded (with the rewritten arguments for modify); its result
  is screened by the policy's output rules (text and structured content alike) on the way back;
* deny — a tool result with ``isError: true`` and the decision's message, which the model
  reads and adapts to; the server never sees the call;
* ask — a tool result with ``isError: true`` naming the approval request; once someone runs
  ``callwarden approvals approve ID``, the same call goes through once;
* halt — a JSON-RPC error for the call, and the session ends (the server is stopped).

Fails closed: a call that cannot be decided is refused; a result that cannot be screened is
withheld; when the server exits or does not answer a call within its timeout, every call it
had not answered gets an error, and the gateway never leaves the client waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from callwarden._call import new_id, thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
from callwarden._enforce import Enforcer
from callwarden._guard import Guard
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    output_unscreened,
    tool_changed,
    undecided,
)
from callwarden._profiles import SideEffect, ToolProfile, default_profile
from callwarden.exceptions import ApprovalPending
from callwarden.gateway._upstream import (
    _META_PROTOCOL,
    MAX_MESSAGE,
    NOT_TEXT,
    Upstream,
    encode,
    load,
    not_text,
    read_line,
)

__all__ = ["Gateway", "policy_tool_name", "serve_stdio", "server_slug"]

_perf = time.perf_counter
# JSON-RPC error codes.
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_INTERNAL_ERROR = -32603
_HALTED = -32001  # the policy halted the session
_UPSTREAM_GONE = -32002  # the server exited or did not answer in time
_DRAIN = 10.0  # seconds the server gets to answer what a departed client asked


async def serve_stdio(run: Callable[[asyncio.StreamReader, Callable[..., None]],
                                   Awaitable[int]]) -> int:
    """Runs ``run(reader, write)`` on this process's stdin / stdout (MCP over stdio).
    ``write(message, related=None)``: ``related`` names the client's request a message
    to the client belongs to (a transport with a stream per request uses it)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def write(message: dict[str, Any], related: Any = None) -> None:
        out.write(encode(message))
        out.flush()

    return await run(reader, write)


def policy_tool_name(server: str, tool: str) -> str:
    """The name a policy sees for ``tool`` of ``server``: ``mcp__SERVER__TOOL``."""
    return f"mcp__{server}__{tool}"


def server_slug(name: Any) -> str:
    """A server's name as policy tool names hold it: lower case, ``_`` for the rest."""
    text = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    return text or "upstream"


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def _tool_error(msg_id: Any, text: str, modern: bool) -> dict[str, Any]:
    """A tool result the model reads as the call's failure; ``modern``: for a client speaking
    protocol 2026-07-28 or later, whose results say they are complete."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    if modern:
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def _is_modern(params: Any) -> bool:
    """Whether a request comes from a client of protocol 2026-07-28 or later (each request
    carries its protocol version in ``_meta``)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and _META_PROTOCOL in meta


class _Forwarded:
    """A client request the server has not answered yet."""

    __slots__ = ("decision", "method", "modern", "msg_id", "started", "timer", "tool")

    def __init__(self, method: str, msg_id: Any, decision: Decision | None = None,
                 tool: str | None = None, modern: bool = False) -> None:
        self.modern = modern
        self.method = method
        self.msg_id = msg_id
        self.decision = decision
        self.tool = tool
        self.started = _perf()
        self.timer: asyncio.TimerHandle | None = None


class Gateway:
    """Decides an MCP server's tool calls with a policy, between any client and that server.

    Args:
        guard: The :class:`~callwarden.Guard` deciding the calls.
        server: The server's name in policy tool names (``mcp__SERVER__TOOL``); default: the
            name the server gives in its ``initialize`` answer.
        hide_refused: Leave out of ``tools/list`` the tools the policy refuses whatever
            their arguments; default: the policy's ``mcp.hide_refused`` (on unless it says
            otherwise).
        call_timeout: Seconds a forwarded ``tools/call`` may take before the client gets an
            error (and the server a cancellation).
        session: The session every call belongs to (limits per session, history); default:
            one new id per gateway process.
        pin: Pin each tool's definition the first time it is listed and refuse calls to a tool
            whose definition changed since, until someone accepts it (``callwarden mcp accept
            SERVER TOOL``); changed tools are left out of ``tools/list``. Default: the
            policy's ``mcp.pin_tools`` (on unless it says otherwise).
    """

    def __init__(self, guard: Guard, *, server: str | None = None,
                 hide_refused: bool | None = None, call_timeout: float = 120.0,
                 session: str | None = None, pin: bool | None = None) -> None:
        settings = guard.loaded.mcp
        self._enforcer = Enforcer(guard, framework="mcp", session=session or f"mcp-{new_id()}")
        self._server = server_slug(server) if server else None
        self._hide = settings.get("hide_refused", True) if hide_refused is None \
            else hide_refused
        self._timeout = call_timeout
        self._pending: dict[str, _Forwarded] = {}
        self._to_client: Callable[..., None] = lambda *_, **__: None
        self._to_server: Callable[[dict[str, Any]], None] = lambda _: None
        self._ended = asyncio.Event()
        self._halted: Decision | None = None
        self._pin = settings.get("pin_tools", True) if pin is None else pin
        self._pinned: dict[str, str] = {}  # tool -> what its pin said when last listed
        self._listing: dict[str, dict[str, Any]] = {}  # tool -> its definition, as listed
        self._hinted: dict[str, ToolProfile] = {}  # profiles from the tools' annotations
        self._calls: set[asyncio.Task[None]] = set()  # tools/call being decided
        # Elicitation: whether the client (2025 protocol) said it can, our requests to it
        # awaiting an answer, and the calls each approval request was put to it for.
        self._elicits = False
        self._client_name = "mcp client"
        self._answers: dict[str, asyncio.Future[Any]] = {}
        self._asked: dict[str, tuple[str, str]] = {}

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`~callwarden._enforce.Enforcer` deciding the calls."""
        return self._enforcer

    @property
    def server(self) -> str | None:
        """The server's name in policy tool names (None until the server has said it)."""
        return self._server

    # -- running --------------------------------------------------------------------------

    async def serve_stdio(self, upstream: Upstream) -> int:
        """Serves MCP on this process's stdin / stdout, forwarding to ``upstream``; returns
        the exit status."""
        return await serve_stdio(lambda reader, write: self.serve(reader, write, upstream))

    async def serve(self, client: asyncio.StreamReader, write: Callable[..., None],
                    upstream: Upstream) -> int:
        """Runs the gateway between a client (``client`` lines in, ``write`` messages out) and
        the server; returns when either side ends or the policy halts."""
        self._to_client = write
        try:
            await upstream.start()
        except Exception as e:
            print(f"callwarden mcp: cannot reach the MCP server ({upstream}): {e}",
                  file=sys.stderr)
            return 1
        self._to_server = upstream.send
        tasks = [asyncio.ensure_future(self._from_client(client)),
                 asyncio.ensure_future(self._from_server(upstream)),
                 asyncio.ensure_future(self._ended.wait())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if tasks[0].done() and not tasks[1].done() and self._halted is None:
                # The client closed its side: the answers it is owed still reach it.
                tasks.append(asyncio.ensure_future(self._drained()))
                await asyncio.wait(tasks[1:], timeout=min(self._timeout, _DRAIN),
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [*tasks, *self._calls]:
                task.cancel()
            for answer in self._answers.values():
                answer.cancel()
            self._fail_pending("the MCP server behind callwarden is gone; the call's outcome "
                               "is unknown")
            await upstream.stop()
        return 0 if self._halted is None else 3

    async def _drained(self) -> None:
        while self._pending or self._calls:
            await asyncio.sleep(0.01)

    # -- client to server -----------------------------------------------------------------

    async def _from_client(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await read_line(reader, MAX_MESSAGE)
            if line is None:
                return
            if isinstance(line, Exception):
                self._to_client(_error(None, _PARSE_ERROR, f"callwarden: {line}"))
                continue
            if not line.strip():
                continue
            try:
                message = load(line)
            except ValueError as e:
                self._to_client(_error(None, _PARSE_ERROR, f"callwarden: not JSON ({e})"))
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                msg_id = message.get("id") if isinstance(message, dict) else None
                self._to_client(_error(msg_id, _INVALID_REQUEST,
                                       "callwarden: not a JSON-RPC 2.0 message object"))
                continue
            if not_text(message) is not None:  # sent on escaped, a server may choke on it
                if "id" in message:  # (the Python SDK's does): refused here, saying why
                    self._to_client(_error(message["id"], _INVALID_REQUEST, NOT_TEXT))
                continue
            method = message.get("method")
            if method == "tools/call" and "id" in message:
                # A task: deciding may wait for the client's own answer to an elicitation.
                task = asyncio.ensure_future(self._call_safely(message))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)
                continue
            if method is None and isinstance(message.get("id"), str) \
                    and message["id"] in self._answers:
                self._answers.pop(message["id"]).set_result(message)
                continue
            if method == "initialize":
                self._learn_client(message.get("params"))
            if isinstance(method, str) and "id" in message:
                self._track(_Forwarded(method, message["id"]))
            self._to_server(message)

    async def _call_safely(self, message: dict[str, Any]) -> None:
        """:meth:`_call`, with any failure of the gateway's own answered as an error: the
        client is never left waiting, and the server never sees an undecided call."""
        try:
            await self._call(message)
        except Exception as e:
            with contextlib.suppress(Exception):
                self._to_client(_error(message.get("id"), _INTERNAL_ERROR,
                                       f"callwarden: the call was not run ({type(e).__name__}: "
                                       f"{e})"))

    async def _call(self, message: dict[str, Any]) -> None:
        """Decides a ``tools/call``; forwards it when allowed, answers it otherwise."""
        msg_id = message["id"]
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str) or not name:
            self._to_client(_error(msg_id, _INVALID_REQUEST,
                                   "callwarden: tools/call needs params.name (a tool name)"))
            return
        if self._server is None:  # the policy could not tell which server's tool this is
            self._to_client(_error(msg_id, _INVALID_REQUEST,
                                   "callwarden: no tools/call before the server has answered "
                                   "initialize (or run callwarden mcp with --name)"))
            return
        modern = _is_modern(params)
        arguments = params.get("arguments")  # type: ignore[union-attr]
        arguments = {} if arguments is None else arguments
        tool = policy_tool_name(self._server, name)
        if self._pin and await self._pin_changed(name):
            refused = self._enforcer.refuse(
                tool, arguments, rule="mcp.tool_pin", code="mcp.tool_changed",
                message=tool_changed(self._server, name), call_id=str(msg_id))
            self._to_client(_tool_error(msg_id, describe_refusal(refused), modern))
            return
        asked = _call_key(tool, arguments)
        try:
            await self._take_answer(params, asked)
            try:
                decision = await self._enforcer.adecide(tool, arguments, call_id=str(msg_id),
                                                        context=self._context(name))
            except ApprovalPending as pending:
                if modern and _can_elicit(params):  # the client asks its user, then retries
                    self._asked[pending.request_id] = asked
                    self._to_client(_input_required(msg_id, pending))
                    return
                if not modern and self._elicits and await self._elicit(pending, msg_id):
                    decision = await self._enforcer.adecide(tool, arguments,
                                                            call_id=str(msg_id),
                                                            context=self._context(name))
                else:
                    raise
        except ApprovalPending as pending:
            self._to_client(_tool_error(msg_id, approval_pending(pending.decision,
                                                                 pending.request_id), modern))
            return
        except Exception as e:  # fail closed: the server never sees the call
            self._to_client(_tool_error(msg_id, undecided(tool, e), modern))
            return
        if decision.effect is Effect.HALT:
            self._to_client(self._halt(msg_id, decision))
            return
        if not decision.effect.allows:
            self._to_client(_tool_error(msg_id, describe_refusal(decision), modern))
            return
        upstream = {k: v for k, v in params.items()  # type: ignore[union-attr]
                    if k not in ("inputResponses", "requestState")}
        forwarded = {**message, "params": {**upstream, "arguments": thaw(decision.args)}}
        self._track(_Forwarded("tools/call", msg_id, decision, name, modern))
        try:
            self._to_server(forwarded)
        except Exception:  # never sent: no answer to wait for
            gone = self._pending.pop(_key(msg_id), None)
            if gone is not None and gone.timer is not None:
                gone.timer.cancel()
            raise

    def _learn_client(self, params: Any) -> None:
        """What a 2025-protocol client's ``initialize`` says: its name, and whether it can
        put a question to its user (elicitation)."""
        if not isinstance(params, dict):
            return
        capabilities = params.get("capabilities")
        self._elicits = isinstance(capabilities, dict) and "elicitation" in capabilities
        info = params.get("clientInfo")
        if isinstance(info, dict) and isinstance(info.get("name"), str) and info["name"]:
            self._client_name = f"{info['name'][:60]} (MCP client)"

    async def _elicit(self, pending: ApprovalPending, msg_id: Any) -> bool:
        """Puts a pending approval to the client's user (``elicitation/create``); True when
        an answer was recorded (the call is then decided again)."""
        request_id = pending.request_id
        ask_id = f"callwarden-{request_id}-{new_id()}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[ask_id] = answer
        self._to_client({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                         "params": _approval_question(pending)}, related=msg_id)
        try:
            reply = await asyncio.wait_for(answer, self._timeout)
        except TimeoutError:
            self._answers.pop(ask_id, None)
            return False
        return await self._record_answer(request_id, reply.get("result"))

    async def _take_answer(self, params: Any, asked: tuple[str, str]) -> None:
        """A 2026-protocol client's retry carrying its user's answer: recorded on the approval
        request it was asked for, if that request was put for this very call."""
        responses = params.get("inputResponses") if isinstance(params, dict) else None
        request_id = params.get("requestState") if isinstance(params, dict) else None
        if not isinstance(responses, dict) or not isinstance(request_id, str):
            return
        if self._asked.get(request_id) != asked:
            return  # not a question this gateway put for this call: the call is asked anew
        del self._asked[request_id]
        await self._record_answer(request_id, responses.get(_ELICITATION))

    async def _record_answer(self, request_id: str, result: Any) -> bool:
        """Records an elicitation result on the approval request; False for no answer."""
        if not isinstance(result, dict) or result.get("action") not in ("accept", "decline"):
            return False  # cancelled or malformed: the request stays pending
        content = result.get("content")
        approve = result["action"] == "accept" and isinstance(content, dict) \
            and content.get("approve") is True
        reason = content.get("reason") if isinstance(content, dict) else None
        await self._enforcer.aanswer(request_id, {
            "approve": approve, "reason": reason if isinstance(reason, str) and reason
            else (None if approve else "declined in the MCP client")}, by=self._client_name)
        return True

    async def _pin_changed(self, name: str) -> bool:
        """Whether a tool changed since it was pinned (as listed in this session, else as its
        pin says); True when the store cannot tell (fail closed)."""
        pins = self._enforcer.guard.approvals.pins
        state = self._pinned.get(name)
        if state is None:
            try:
                state = await asyncio.to_thread(pins.state, self._server, name)
            except Exception:
                return True
        return bool(state == pins.CHANGED)

    def _track(self, forwarded: _Forwarded) -> None:
        key = _key(forwarded.msg_id)
        self._pending[key] = forwarded
        if forwarded.method == "tools/call":
            forwarded.timer = asyncio.get_running_loop().call_later(
                self._timeout, self._expire, key)

    def _expire(self, key: str) -> None:
        forwarded = self._pending.pop(key, None)
        if forwarded is None:
            return
        self._to_server({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": forwarded.msg_id,
                                    "reason": "callwarden: the call timed out"}})
        self._answer_gone(forwarded, f"the MCP server did not answer within "
                                     f"{self._timeout:g} s; the call's outcome is unknown")

    def _halt(self, msg_id: Any, decision: Decision) -> dict[str, Any]:
        """Ends the session; returns the error that answers the call."""
        self._halted = decision
        self._ended.set()
        return _error(msg_id, _HALTED, halted(decision))

    # -- server to client -----------------------------------------------------------------

    async def _from_server(self, upstream: Upstream) -> None:
        async for message in upstream.messages():
            if message is None:
                continue  # a call it was meant to answer times out: the client hears of it
            if "method" not in message and "id" in message:
                forwarded = self._pending.pop(_key(message["id"]), None)
                if forwarded is not None:
                    if forwarded.timer is not None:
                        forwarded.timer.cancel()
                    if forwarded.method == "tools/list":
                        message = await self._listed(message)
                    else:
                        message = self._answered(forwarded, message)
            self._to_client(message)
            if self._halted is not None:
                return

    def _answered(self, forwarded: _Forwarded, message: dict[str, Any]) -> dict[str, Any]:
        """The server's answer as the client gets it."""
        if forwarded.method in _HANDSHAKES and self._server is None:
            self._server = server_slug(_server_name(message.get("result")) or "upstream")
        elif forwarded.method == "tools/call" and forwarded.decision is not None:
            return self._screened(forwarded, forwarded.decision, message)
        return message

    async def _listed(self, message: dict[str, Any]) -> dict[str, Any]:
        """``tools/list`` as the client gets it: each tool's definition checked against its
        pin; changed tools, and tools the policy refuses whatever their arguments, left out."""
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return message
        named = [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if self._pin and self._server is not None:
            self._pinned.update(await asyncio.to_thread(self._check_pins, named))
        self._listing.update((t["name"], t) for t in named)
        self._learn_profiles(named)
        engine = self._enforcer.guard.engine
        server = self._server or "upstream"
        changed = self._enforcer.guard.approvals.pins.CHANGED
        kept = [t for t in named
                if self._pinned.get(t["name"]) != changed
                and not (self._hide and engine.refuses_every_call(
                    policy_tool_name(server, t["name"])))]
        return {**message, "result": {**result, "tools": kept}}  # type: ignore[dict-item]

    def _context(self, name: str) -> dict[str, Any]:
        """What rules see of the tool as listed (``context.mcp``): its server, name,
        description (for a rule on instructions hidden in it) and annotations."""
        listed = self._listing.get(name, {})
        description = listed.get("description")
        annotations = listed.get("annotations")
        return {"mcp": {"server": self._server, "tool": name,
                        "description": description[:4000] if isinstance(description, str)
                        else "",
                        "annotations": annotations if isinstance(annotations, dict) else {}}}

    def _learn_profiles(self, tools: list[dict[str, Any]]) -> None:
        """Profiles from the tools' annotations (``readOnlyHint``, ``destructiveHint``,
        ``openWorldHint``: the server's own claims) for tools the policy has no profile for;
        the guard is rebuilt on the same store, audit log and approvals when they change."""
        guard = self._enforcer.guard
        hinted = dict(self._hinted)
        for tool in tools:
            name = policy_tool_name(self._server or "upstream", tool["name"])
            effect = _annotated_side_effect(tool.get("annotations"))
            base = default_profile(name)
            if effect is None or guard.engine.profile(name) not in (base, hinted.get(name)):
                continue  # no claim, or the policy's own profile decides
            hinted[name] = base.merged(side_effect=effect, source="mcp annotations")
        if hinted == self._hinted:
            return
        self._hinted = hinted
        loaded = guard.loaded
        profiles = {**hinted, **loaded.profiles}
        rebuilt = Guard.from_loaded(dataclasses.replace(loaded, profiles=profiles),
                                    state=guard.engine.store,
                                    audit=guard.auditor if guard.auditor is not None else False,
                                    approvals=guard.approvals)
        self._enforcer = Enforcer(rebuilt, framework="mcp", session=self._enforcer.session)

    def _check_pins(self, tools: list[dict[str, Any]]) -> dict[str, str]:
        pins = self._enforcer.guard.approvals.pins
        states = {}
        for tool in tools:
            try:
                state = pins.check(self._server, tool["name"], tool)
            except Exception:  # the store failed: the tool cannot be vouched for
                state = pins.CHANGED
            states[tool["name"]] = state
        return states

    def _screened(self, forwarded: _Forwarded, decision: Decision,
                  message: dict[str, Any]) -> dict[str, Any]:
        """A call's result after the output rules; the outcome recorded."""
        msg_id = message["id"]
        result = message.get("result")
        enforcer = self._enforcer
        if not isinstance(result, dict):  # a JSON-RPC error: the tool did not run properly
            enforcer.record_outcome(decision, OutcomeStatus.ERROR, forwarded.started)
            return message
        payload = {k: result[k] for k in ("content", "structuredContent") if k in result}
        try:
            screened = enforcer.finish(decision, payload, forwarded.started,
                                       failed=result.get("isError") is True)
        except Exception as e:  # fail closed: withhold what could not be checked or recorded
            with contextlib.suppress(Exception):
                enforcer.record_outcome(decision, OutcomeStatus.ERROR, forwarded.started, e)
            return _tool_error(msg_id, output_unscreened(forwarded.tool or "?", e),
                               forwarded.modern)
        status = screened.status
        if screened.halt:
            return self._halt(msg_id, decision._replace(effect=Effect.HALT,
                                                        message=str(screened.shown)))
        if status is OutcomeStatus.OK:
            return message
        if status is OutcomeStatus.OUTPUT_MODIFIED and isinstance(screened.shown, Mapping):
            return {**message, "result": {**result, **thaw(screened.shown)}}
        return _tool_error(msg_id, str(screened.shown), forwarded.modern)

    # -- the end --------------------------------------------------------------------------

    def _fail_pending(self, why: str) -> None:
        for key in list(self._pending):
            forwarded = self._pending.pop(key)
            if forwarded.timer is not None:
                forwarded.timer.cancel()
            self._answer_gone(forwarded, why)

    def _answer_gone(self, forwarded: _Forwarded, why: str) -> None:
        if forwarded.decision is not None:
            self._enforcer.record_outcome(forwarded.decision, OutcomeStatus.ERROR,
                                          forwarded.started, TimeoutError(why))
        with contextlib.suppress(Exception):
            self._to_client(_error(forwarded.msg_id, _UPSTREAM_GONE, f"callwarden: {why}"))


# The answers that name the server: ``initialize``, and ``server/discover`` (protocol
# 2026-07-28, where the name travels in ``_meta``).
_HANDSHAKES = ("initialize", "server/discover")
_META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def _server_name(result: Any) -> str | None:
    if not isinstance(result, dict):
        return None
    meta = result.get("_meta")
    for info in (result.get("serverInfo"),
                 meta.get(_META_SERVER_INFO) if isinstance(meta, dict) else None):
        if isinstance(info, dict) and isinstance(info.get("name"), str) and info["name"]:
            return str(info["name"])
    return None


def _annotated_side_effect(annotations: Any) -> SideEffect | None:
    """The side effect a tool's MCP annotations claim, from the hints given (not their
    defaults): read-only, destructive, open-world (external), or a write."""
    if not isinstance(annotations, dict):
        return None
    if annotations.get("readOnlyHint") is True:
        return SideEffect.READ
    if annotations.get("destructiveHint") is True:
        return SideEffect.DESTRUCTIVE
    if annotations.get("openWorldHint") is True:
        return SideEffect.EXTERNAL
    if annotations.get("readOnlyHint") is False and annotations.get("destructiveHint") is False:
        return SideEffect.WRITE
    return None


_ELICITATION = "callwarden_approval"  # our key in an InputRequiredResult's inputRequests
_META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


def _can_elicit(params: Any) -> bool:
    """Whether a 2026-protocol request says its client can elicit."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    capabilities = meta.get(_META_CAPABILITIES) if isinstance(meta, dict) else None
    return isinstance(capabilities, dict) and "elicitation" in capabilities


def _call_key(tool: str, arguments: Any) -> tuple[str, str]:
    return tool, json.dumps(arguments, sort_keys=True, default=repr)


def _approval_question(pending: ApprovalPending) -> dict[str, Any]:
    """The elicitation form for a pending approval: approve (yes / no) and a reason."""
    decision = pending.decision
    shown = json.dumps(thaw(decision.call.args), ensure_ascii=False, sort_keys=True)
    if len(shown) > 2000:
        shown = shown[:2000] + " ... (truncated)"
    why = f" {decision.message}" if decision.message else ""
    return {"mode": "form",
            "message": f"callwarden: the agent wants to call {decision.call.tool} with "
                       f"{shown}.{why} Approve this exact call (it runs once)? "
                       f"(request {pending.request_id})",
            "requestedSchema": {"type": "object", "required": ["approve"], "properties": {
                "approve": {"type": "boolean", "title": "Approve",
                            "description": "Run this exact call once"},
                "reason": {"type": "string", "title": "Reason",
                           "description": "Why not (shown to the agent)"}}}}


def _input_required(msg_id: Any, pending: ApprovalPending) -> dict[str, Any]:
    """A 2026-protocol answer asking the client to put the approval to its user and retry."""
    return {"jsonrpc": "2.0", "id": msg_id, "result": {
        "resultType": "input_required", "requestState": pending.request_id,
        "inputRequests": {_ELICITATION: {"method": "elicitation/create",
                                         "params": _approval_question(pending)}}}}


def _key(msg_id: Any) -> str:
    return json.dumps(msg_id, sort_keys=True)
