"""``callwarden serve``: the policy as an HTTP service (Starlette on uvicorn).

Stateless: each worker loads the policy and keeps nothing of its own that a decision needs;
limits, approvals and history live in the policy's state store, so workers on several hosts
decide as one. Every answer is JSON, errors included (``{"error": {"code", "message"}}``).

Starlette rather than FastAPI: routing, requests and streaming are all the service needs; the
request bodies are checked here (a tool call is checked by the guard itself, which denies a bad
one with a reason rather than rejecting it), and the OpenAPI document is written by hand and
checked in (``openapi.json``), so FastAPI's models would add a validation pass and a
dependency to every decision for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

try:  # the serve extra brings it: an answer encoded in a tenth of the standard encoder's time
    import orjson
except ImportError:  # pragma: no cover - starlette and uvicorn installed without the extra
    orjson = None  # type: ignore[assignment]
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from callwarden._call import json_safe
from callwarden._decision import Decision
from callwarden._enforce import Enforcer
from callwarden._guard import Guard
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    AuditLogError,
    CallwardenError,
    PolicyError,
)
from callwarden.net import hangup_pending, signal_all_workers
from callwarden.net._raw import RawRoute
from callwarden.serve import _console as console
from callwarden.serve import _grants as grants
from callwarden.serve._audit import MAX_EVENTS, Filters, follow, live_log, log_files, query, replay_text
from callwarden.serve._auth import Holder, Tokens
from callwarden.serve._metrics import Metrics

__all__ = ["MAX_BODY", "Service", "create_app"]

MAX_BODY = 1024 * 1024  # bytes of a request body, at most (413 past it)
_CALL_FIELDS = ("agent", "session", "principal", "framework", "call_id")
_RETIRE = 30.0  # seconds a replaced guard stays open for the decisions still using it


class _Problem(CallwardenError):
    """A request the service refuses: its status and a JSON error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def encode(value: Any) -> bytes:
    """An answer as JSON bytes, whatever the strings it holds: a lone surrogate (a client may
    send one escaped) or an int past 64 bits leave escaped, as the standard encoder writes
    them, rather than failing the answer."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # orjson's JSONEncodeError: the standard encoder says it right
            pass
    return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


def _parse(data: bytes | bytearray) -> Any:
    """A body's JSON value: orjson's reading when it reads it (UTF-8, the usual), else the
    standard reader's (UTF-16 and -32, ints past 64 bits, NaN; and its error message)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except ValueError:
            pass
    return json.loads(data)


class _Json(JSONResponse):
    """A JSON answer, encoded by ``encode``."""

    def render(self, content: Any) -> bytes:
        return encode(content)


def _error(status: int, code: str, message: str, **extra: str) -> _Json:
    return _Json({"error": {"code": code, "message": message}}, status_code=status,
                 headers=extra or None)


class Service:
    """What the routes share: the guard (replaced on reload), the tokens, the metrics."""

    def __init__(self, policy: Path, tokens: Tokens, *, max_body: int = MAX_BODY) -> None:
        self.policy = policy
        self.tokens = tokens
        self.max_body = max_body
        self.metrics = Metrics()
        self.guard = Guard.from_file(policy)  # a broken policy: PolicyError, no service
        self.loaded_at = time.time()
        self.frozen = False  # what it loaded is kept out of the collector's passes (settle)

    # -- the policy -----------------------------------------------------------------------

    def reload(self) -> tuple[bool, list[str]]:
        """Compiles and lints the policy file again; the new policy replaces the old one
        only when it loads without a problem. (loaded?, the problems)."""
        try:
            fresh = Guard.from_file(self.policy)
        except PolicyError as e:
            return False, [str(p) for p in e.problems]
        except Exception as e:  # the file, or the store it names: the old policy stays
            return False, [f"{self.policy}: {type(e).__name__}: {e}"]
        old, self.guard = self.guard, fresh
        self.loaded_at = time.time()
        with contextlib.suppress(RuntimeError):  # no loop: close at once
            asyncio.get_running_loop().call_later(_RETIRE, _retire, [old], self.frozen)
            return True, []
        _retire([old], self.frozen)
        return True, []

    # -- requests -------------------------------------------------------------------------

    def holder(self, request: Request, role: str) -> Holder:
        return self.holder_of(request.headers.get("authorization"), role)

    def holder_of(self, authorization: str | None, role: str) -> Holder:
        """Who the ``Authorization`` header names, if they may do what ``role`` may."""
        holder = self.tokens.holder(authorization)
        if holder is None:
            raise _Problem(401, "unauthorized", "give Authorization: Bearer TOKEN (a token "
                                                "of the service's token file)")
        if role != "any" and not holder.may(role):
            raise _Problem(403, "forbidden", f"a {holder.role} token may not do this (it "
                                             f"needs the {role} role)")
        return holder

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object (413 past the size cap, 400 for anything else)."""
        return await self.read(request.headers.get("content-length", ""), request.stream())

    async def read(self, declared: str, chunks: AsyncIterator[bytes]) -> dict[str, Any]:
        """A body's JSON object from its declared length and its chunks."""
        if declared.isdigit() and int(declared) > self.max_body:
            raise _Problem(413, "too_large", f"the body is over {self.max_body} bytes")
        data = bytearray()
        async for chunk in chunks:
            data += chunk
            if len(data) > self.max_body:
                raise _Problem(413, "too_large", f"the body is over {self.max_body} bytes")
        return self.parsed(data)

    def parsed(self, data: bytes | bytearray) -> dict[str, Any]:
        """A whole body's JSON object (400 when it is not one)."""
        try:
            parsed = _parse(data) if data else None
        except ValueError as e:
            raise _Problem(400, "bad_json", f"the body is not JSON: {e}") from None
        except RecursionError:
            raise _Problem(400, "bad_json", "the body is not JSON this service reads: its "
                                            "values are nested too deeply") from None
        if not isinstance(parsed, dict):
            raise _Problem(400, "bad_request", "the body must be a JSON object")
        return parsed

    # -- deciding -------------------------------------------------------------------------

    async def decide(self, body: Mapping[str, Any], holder: Holder) -> dict[str, Any]:
        """One tool call decided; an ``ask`` answered with its approval request's id (and
        once that request is approved, the same call is allowed once)."""
        tool = body.get("tool")
        if not isinstance(tool, str) or not tool:
            raise _Problem(400, "bad_request", "'tool' must be a non-empty string")
        fields: dict[str, Any] = {}
        for name in _CALL_FIELDS:
            value = body.get(name)
            if value is not None and not isinstance(value, str):
                raise _Problem(400, "bad_request", f"'{name}' must be a string")
            fields[name] = value
        context = _with_request(body.get("context"), body.get("request"))
        approval_id = body.get("approval_id")
        if approval_id is not None and not isinstance(approval_id, str):
            raise _Problem(400, "bad_request", "'approval_id' must be a string")
        enforcer = Enforcer(self.guard, framework=fields.pop("framework") or "service",
                            agent=holder.name if holder.role == "agent" else None)
        started = time.perf_counter()
        request_id = None
        try:
            decision = await enforcer.adecide(tool, body.get("args", {}), context=context,
                                              approval_id=approval_id, **fields)
        except ApprovalPending as pending:
            decision, request_id = pending.decision, pending.request_id
        self.metrics.decided(decision, time.perf_counter() - started)
        answer = decision.to_dict()  # a new dict: completed in place
        answer["approval_request"] = request_id
        return answer

    async def outcome(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A tool's result after the output rules; the outcome recorded."""
        decision = _decision_from(body.get("decision"))
        if not decision.effect.allows:
            raise _Problem(409, "not_allowed", f"the call was decided {decision.effect}: it "
                                               "did not run, so it has no outcome")
        failed = body.get("failed", False)
        if not isinstance(failed, bool):
            raise _Problem(400, "bad_request", "'failed' must be true or false")
        started = time.perf_counter()
        duration = body.get("duration_ms")
        if duration is not None:
            if not isinstance(duration, int | float) or isinstance(duration, bool) \
                    or not 0 <= duration < 1e9:
                raise _Problem(400, "bad_request", "'duration_ms' must be the milliseconds "
                                                   "the tool ran (a number, 0 or more)")
            started -= duration / 1000
        # The decision read back lets go of its slots of concurrent limits (see engine/slots).
        screened = await Enforcer(self.guard).afinish(decision, body.get("result"), started,
                                                      failed=failed)
        return {"status": str(screened.status), "result": json_safe(screened.shown),
                "halt": screened.halt, "rule": screened.rule, "source": screened.source}

    # -- AuthZEN --------------------------------------------------------------------------

    async def evaluate(self, body: Mapping[str, Any], holder: Holder) -> dict[str, Any]:
        """An AuthZEN evaluation (subject / action / resource / context) as a tool call: the
        action's name is the tool, the resource's properties (or ``context.args``) its
        arguments, the subject its principal, ``context.request`` the user's request (the
        rest of the context is the call's context); the answer is ``{"decision": bool,
        "context": {...}}``, true for allow and modify."""
        subject, action, resource, context = (body.get(k) for k in
                                              ("subject", "action", "resource", "context"))
        for name, part in (("subject", subject), ("action", action), ("resource", resource)):
            if not isinstance(part, dict):
                raise _Problem(400, "bad_request", f"'{name}' must be an object")
            for key, kind in (("type", str), ("id", str), ("properties", dict)):
                if part.get(key) is not None and not isinstance(part[key], kind):
                    raise _Problem(400, "bad_request", f"'{name}.{key}' must be "
                                                       f"{'a string' if kind is str else 'an object'}")
        if context is not None and not isinstance(context, dict):
            raise _Problem(400, "bad_request", "'context' must be an object")
        context = dict(context or {})
        name = action.get("name")  # type: ignore[union-attr]
        if not isinstance(name, str) or not name:
            raise _Problem(400, "bad_request", "'action.name' must be the tool's name")
        properties = resource.get("properties")  # type: ignore[union-attr]
        args = context.pop("args", properties or {})
        subject_properties = subject.get("properties")  # type: ignore[union-attr]
        agent = subject_properties.get("agent") if isinstance(subject_properties, dict) \
            else None
        call = {"tool": name, "args": args, "principal": _text(subject.get("id")),  # type: ignore[union-attr]
                "agent": _text(agent), "session": _text(context.pop("session", None)),
                "framework": "authzen", "context": {
                    **context, "authzen": json_safe({"subject": subject, "action": action,
                                                     "resource": resource})}}
        decided = await self.decide(call, holder)
        answer = {"effect": decided["effect"], "rule": decided["rule"],
                  "decision_id": decided["decision_id"],
                  "reason_user": {"en": decided["message"]} if decided["message"] else None,
                  "args": decided["args"] if decided["effect"] == "modify" else None,
                  "approval_request": decided["approval_request"]}
        return {"decision": decided["effect"] in ("allow", "modify"),
                "context": {k: v for k, v in answer.items() if v is not None}}

    # -- approvals ------------------------------------------------------------------------

    async def approvals(self, request: Request) -> list[dict[str, Any]]:
        status = request.query_params.get("status") or None  # empty: any
        if status is not None and status not in ("pending", "approved", "denied", "expired",
                                                 "cancelled", "consumed"):
            raise _Problem(400, "bad_request", f"status {status!r} is not a request status")
        found = await self.guard.approvals.alist(status)
        wanted = {k: request.query_params.get(k) for k in ("session", "agent", "tool")}
        return [r.to_dict() for r in found
                if all(not v or getattr(r, k) == v for k, v in wanted.items())]

    async def resolve(self, request_id: str, body: Mapping[str, Any], holder: Holder,
                      approve: bool) -> dict[str, Any]:
        text = body.get("comment" if approve else "reason")
        if text is not None and not isinstance(text, str):
            raise _Problem(400, "bad_request", "'comment' / 'reason' must be a string")
        edit = body.get("args")
        if edit is not None and (not approve or not isinstance(edit, dict)):
            raise _Problem(400, "bad_request", "'args' (an object) edits an approval only")
        try:
            remember = grants.remember_options(body.get("remember")) if approve else None
        except ValueError as e:
            raise _Problem(400, "bad_request", str(e)) from None
        approvals = self.guard.approvals
        try:
            if edit is not None:  # made on the redacted view: what was left as shown stays
                args = (await approvals.aget(request_id)).args
                edit = console.restore_redacted(edit, console.redacted_view(self.guard, args), args)
            # The holder's name, never one the body gives: the person the token is.
            if remember is None:
                done = await Enforcer(self.guard).aanswer(request_id, {
                    "approve": approve, "reason": text, "edit": edit}, by=holder.name)
                return dict(done.to_dict())
            done, grant = await approvals.aapprove_and_remember(
                request_id, by=holder.name, comment=text, edit=edit, **remember)
        except ApprovalError as e:
            raise _approval_problem(e) from None
        except ValueError as e:  # a grant this request cannot have: nothing was approved
            raise _Problem(400, "bad_request", f"{e}; nothing was approved") from None
        # No grant while a quorum still waits: the approval that completes it may remember.
        return {**done.to_dict(), "grant": None if grant is None else grants.view(self.guard,
                                                                                  grant)}

    # -- standing grants ------------------------------------------------------------------

    async def grants(self, request: Request) -> list[dict[str, Any]]:
        """The grants (active ones unless ``status`` says), filtered as asked."""
        try:
            status, filters = grants.wanted(request.query_params)
        except ValueError as e:
            raise _Problem(400, "bad_request", str(e)) from None
        found = await self.guard.approvals.agrants(include_inactive=status != "active")
        return grants.listed(self.guard, found, status, filters)

    async def revoke(self, grant_id: str, holder: Holder) -> dict[str, Any]:
        """Revokes an active grant, recorded (and audited) as revoked by the token's holder."""
        try:
            done = await self.guard.approvals.arevoke(grant_id, by=holder.name)
        except ApprovalError as e:
            raise _approval_problem(e) from None
        return grants.view(self.guard, done)


def _filters(request: Request) -> Filters:
    try:
        return Filters(request.query_params)
    except ValueError as e:
        raise _Problem(400, "bad_request", str(e)) from None


async def _remind_waiting(service: Service) -> None:
    """Every minute (``CALLWARDEN_REMIND_EVERY`` seconds), the policy's ``approvals: {remind:
    ...}`` function for the requests left waiting; a reminder that fails is tried again."""
    try:
        every = float(os.environ.get("CALLWARDEN_REMIND_EVERY", "60"))
    except ValueError:
        every = 60.0
    while True:
        await asyncio.sleep(max(every, 0.05))
        with contextlib.suppress(Exception):  # reminding never stops the service
            approvals = service.guard.approvals
            if approvals.reminder is not None:
                await approvals.aremind()


def _with_request(context: Any, request: Any) -> dict[str, Any] | None:
    """The call's context, with the user's request (top-level ``request``, an alias of
    ``context.request``) in it.

    Raises:
        _Problem: ``context`` is not an object, the request is not a string, or the two
            request fields disagree.
    """
    if context is not None and not isinstance(context, dict):
        raise _Problem(400, "bad_request", "'context' must be an object")
    if request is not None:
        if not isinstance(request, str):
            raise _Problem(400, "bad_request", "'request' must be a string (the text of "
                                               "the user's latest message)")
        if context is not None and context.get("request") not in (None, request):
            raise _Problem(400, "bad_request", "'request' and 'context.request' differ: "
                                               "give the user's request once")
        return {**(context or {}), "request": request}
    if context is not None and not isinstance(context.get("request"), str | None):
        raise _Problem(400, "bad_request", "'context.request' must be a string (the text "
                                           "of the user's latest message)")
    return context


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _approval_problem(e: ApprovalError) -> _Problem:
    if isinstance(e, ApprovalRefused):
        return _Problem(403, e.code, e.message)
    if isinstance(e, ApprovalInvalid) and e.code in ("approval_not_found", "grant_not_found"):
        return _Problem(404, e.code, e.message)
    return _Problem(409, e.code, e.message)


def _decision_from(data: Any) -> Decision:
    """The decision ``/v1/decide`` answered, as the outcome's request carries it back."""
    if not isinstance(data, dict):
        raise _Problem(400, "bad_request", "'decision' must be the object /v1/decide answered")
    budgets = data.get("budgets")
    if budgets is not None and not (isinstance(budgets, list)
                                    and all(_is_budget(b) for b in budgets)):
        raise _Problem(400, "bad_request", "'decision.budgets' is not what /v1/decide answered:"
                                           " a list of {rule, limit, used, remaining, reset_at}")
    try:
        return Decision.from_dict(data)
    except ValueError as e:
        raise _Problem(400, "bad_request", f"'decision' is not one /v1/decide answered: {e}") \
            from None


def _is_budget(item: Any) -> bool:
    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    return isinstance(item, dict) and isinstance(item.get("rule"), str) \
        and all(number(item.get(k)) for k in ("limit", "used", "remaining")) \
        and "reset_at" in item and (item["reset_at"] is None or number(item["reset_at"]))


def _handler(service: Service, role: str | None,
             work: Callable[[Request, Holder | None], Awaitable[Any]]
             ) -> Callable[[Request], Awaitable[Response]]:
    """A route: the token checked for ``role`` (None: open), problems answered as JSON."""
    async def endpoint(request: Request) -> Response:
        try:
            holder = service.holder(request, role) if role is not None else None
            result = await work(request, holder)
        except Exception as e:
            return _failure(e, request.url.path)
        return result if isinstance(result, Response) else _Json(result)
    return endpoint


def _failure(e: Exception, path: str) -> _Json:
    """A request's failure as a JSON answer: a refusal with its status, or the service's own
    failure (500, and it says what)."""
    if isinstance(e, _Problem):
        extra = {"WWW-Authenticate": 'Bearer realm="callwarden"'} if e.status == 401 else {}
        return _error(e.status, e.code, e.message, **extra)
    print(f"callwarden serve: {path}: {type(e).__name__}: {e}", file=sys.stderr)
    return _error(500, "internal", f"{type(e).__name__}: {e}")


class _Decide:
    """``POST /v1/decide``, the hot path, answered without Starlette's layers (its routing,
    middleware, request and response objects cost more than the decision); every other
    request, and the lifespan, go to the Starlette application. Same answers either way.

    Served by ``callwarden serve``, a decide request sent whole skips ASGI as well: it is a
    raw route (:mod:`callwarden.net._raw`), answered by :meth:`raw` from the parsed request.
    """

    def __init__(self, service: Service, app: Starlette) -> None:
        self.service = service
        self.app = app
        self.raw_routes = {b"/v1/decide": RawRoute(self.raw, service.max_body)}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/decide" \
                or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = {k.decode(): v.decode("latin-1") for k, v in scope["headers"]
                   if k in (b"authorization", b"content-length")}

        async def body() -> dict[str, Any]:
            return await self.service.read(headers.get("content-length", ""), _chunks(receive))

        status, head, data = await self.answer(headers.get("authorization"), body)
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": data})

    async def raw(self, headers: list[tuple[bytes, bytes]], data: bytes
                  ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The same answer to a decide request the HTTP parser read whole (its body within
        the size cap)."""
        authorization = None
        for name, value in headers:
            if name == b"authorization":
                authorization = value.decode("latin-1")

        async def body() -> dict[str, Any]:
            return self.service.parsed(data)

        return await self.answer(authorization, body)

    async def answer(self, authorization: str | None,
                     body: Callable[[], Awaitable[dict[str, Any]]]
                     ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """A decide request's answer (status, headers, body), whichever way it came in: the
        token checked, then the body read (``body()``) and decided; a refusal as JSON."""
        try:
            holder = self.service.holder_of(authorization, "agent")
            result = await self.service.decide(await body(), holder)
        except Exception as e:
            failed = _failure(e, "/v1/decide")
            return failed.status_code, failed.raw_headers, bytes(failed.body)
        data = encode(result)
        return 200, [(b"content-type", b"application/json"),
                     (b"content-length", str(len(data)).encode())], data


async def _chunks(receive: Any) -> AsyncIterator[bytes]:
    """A raw ASGI request's body, chunk by chunk."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Problem(400, "bad_request", "the client left before sending the body")
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


def create_app(service: Service, *, own_process: bool = False) -> Any:
    """The ASGI application serving ``service``. ``own_process``: the application is all its
    process serves (``callwarden serve``), so once started, what the process has loaded is
    kept out of the garbage collector's full passes (:func:`settle`); an application mounted
    among others leaves its host's collector as it is."""
    s = service

    async def decide(request: Request, holder: Holder | None) -> Any:
        return await s.decide(await s.body(request), holder)  # type: ignore[arg-type]

    async def outcome(request: Request, _: Holder | None) -> Any:
        return await s.outcome(await s.body(request))

    async def evaluation(request: Request, holder: Holder | None) -> Any:
        return await s.evaluate(await s.body(request), holder)  # type: ignore[arg-type]

    async def evaluations(request: Request, holder: Holder | None) -> Any:
        body = await s.body(request)
        items = body.get("evaluations", [{}])  # absent: the top-level evaluation alone
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items) \
                or len(items) > 1000:
            raise _Problem(400, "bad_request", "'evaluations' must be a list of at most "
                                               "1000 objects")
        defaults = {k: body.get(k) for k in ("subject", "action", "resource", "context")}
        for name, part in defaults.items():
            if part is not None and not isinstance(part, dict):
                raise _Problem(400, "bad_request", f"'{name}' must be an object")
        answers = []
        for item in items:  # one that is not an evaluation is refused alone (fail closed)
            try:
                answers.append(await s.evaluate(
                    {**defaults, **{k: v for k, v in item.items() if v is not None}},
                    holder))  # type: ignore[arg-type]
            except _Problem as p:
                answers.append({"decision": False, "context": {"error": {
                    "code": p.code, "message": p.message}}})
        return {"evaluations": answers}

    async def approvals(request: Request, _: Holder | None) -> Any:
        return {"approvals": await s.approvals(request)}

    async def approval(request: Request, _: Holder | None) -> Any:
        try:
            return (await s.guard.approvals.aget(request.path_params["id"])).to_dict()
        except ApprovalError as e:
            raise _approval_problem(e) from None

    async def approval_context(request: Request, _: Holder | None) -> Any:
        try:
            found = await s.guard.approvals.aget(request.path_params["id"])
        except ApprovalError as e:
            raise _approval_problem(e) from None
        return await asyncio.to_thread(console.context, s.guard, found.to_dict())

    async def me(request: Request, holder: Holder | None) -> Any:
        return console.whoami(holder.role, holder.name)  # type: ignore[union-attr]

    async def policies(request: Request, _: Holder | None) -> Any:
        return {"policies": console.policy_files(s.policy)}

    async def policy(request: Request, _: Holder | None) -> Any:
        name = request.path_params["name"]
        text = console.policy_text(s.policy, name)
        if text is None:
            raise _Problem(404, "not_found", f"{name!r} is not a policy file beside the one "
                                             "served (see /v1/policies)")
        return {"name": name, "text": text}

    async def page(request: Request, _: Holder | None) -> Any:
        found = console.asset(request.path_params.get("asset", ""))
        if found is None:
            raise _Problem(404, "not_found", f"{request.url.path} is not part of the console")
        return found

    async def approve(request: Request, holder: Holder | None) -> Any:
        return await s.resolve(request.path_params["id"], await s.body(request), holder,  # type: ignore[arg-type]
                               approve=True)

    async def deny(request: Request, holder: Holder | None) -> Any:
        return await s.resolve(request.path_params["id"], await s.body(request), holder,  # type: ignore[arg-type]
                               approve=False)

    async def grant_list(request: Request, _: Holder | None) -> Any:
        return {"grants": await s.grants(request)}

    async def revoke(request: Request, holder: Holder | None) -> Any:
        return await s.revoke(request.path_params["id"], holder)  # type: ignore[arg-type]

    async def reload(request: Request, _: Holder | None) -> Any:
        loaded, problems = await asyncio.to_thread(s.reload)
        if not loaded:
            return _Json({"error": {
                "code": "policy_error", "message": "the policy was not reloaded; the one "
                                                   "loaded before stays in force",
                "problems": problems}}, status_code=422)
        # The other workers (--workers N) load it too: SIGHUP reaches them all.
        everywhere = signal_all_workers(signal.SIGHUP)
        return {"reloaded": True, "policy": s.guard.loaded.digest, "workers": everywhere}

    async def events(request: Request, _: Holder | None) -> Any:
        wanted = _filters(request)
        limit = request.query_params.get("limit", "100")
        if not limit.isdigit() or not 0 < int(limit) <= MAX_EVENTS:
            raise _Problem(400, "bad_request", f"'limit' must be 1 to {MAX_EVENTS}")
        found = await asyncio.to_thread(query, log_files(s.guard), wanted, int(limit))
        return {"events": found}

    async def stream(request: Request, _: Holder | None) -> Any:
        wanted = _filters(request)
        return StreamingResponse(follow(live_log(s.guard), wanted, request.is_disconnected),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def replay(request: Request, _: Holder | None) -> Any:
        body = await s.body(request)
        text, show = body.get("policy"), body.get("show", 20)
        if not isinstance(text, str) or not text.strip():
            raise _Problem(400, "bad_request", "'policy' must be the candidate policy's YAML")
        if isinstance(show, float) and show.is_integer():
            show = int(show)  # 20.0 is an integer in JSON
        if not isinstance(show, int) or isinstance(show, bool) or not 0 <= show <= 1000:
            raise _Problem(400, "bad_request", "'show' must be 0 to 1000")
        try:
            return await asyncio.to_thread(replay_text, text, s.policy.parent,
                                           log_files(s.guard), show)
        except PolicyError as e:
            return _Json({"error": {
                "code": "policy_error", "message": "the candidate policy has problems",
                "problems": [str(p) for p in e.problems]}}, status_code=422)
        except AuditLogError as e:
            raise _Problem(409, "no_log", str(e)) from None

    async def healthz(request: Request, _: Holder | None) -> Any:
        return {"status": "ok"}

    async def readyz(request: Request, _: Holder | None) -> Any:
        try:
            await asyncio.wait_for(asyncio.to_thread(_probe_store, s.guard), 5.0)
        except Exception as e:
            return _Json({"status": "not ready",
                          "reason": f"the state store does not answer: "
                                    f"{type(e).__name__}: {e}"}, status_code=503)
        return {"status": "ready", "policy": s.guard.loaded.digest,
                "loaded_at": s.loaded_at}

    async def metrics(request: Request, _: Holder | None) -> Any:
        pending = len(await s.guard.approvals.alist("pending"))
        return Response(s.metrics.render(pending), media_type="text/plain; version=0.0.4")

    async def openapi(request: Request, _: Holder | None) -> Any:
        return Response(OPENAPI, media_type="application/json")

    def route(path: str, work: Any, role: str | None, method: str = "POST") -> Route:
        return Route(path, _handler(s, role, work), methods=[method])

    routes = [
        route("/v1/decide", decide, "agent"),
        route("/v1/outcome", outcome, "agent"),
        route("/access/v1/evaluation", evaluation, "agent"),
        route("/access/v1/evaluations", evaluations, "agent"),
        route("/v1/approvals", approvals, "approver", "GET"),
        route("/v1/approvals/{id}", approval, "approver", "GET"),
        route("/v1/approvals/{id}/context", approval_context, "approver", "GET"),
        route("/v1/approvals/{id}/approve", approve, "approver"),
        route("/v1/approvals/{id}/deny", deny, "approver"),
        route("/v1/grants", grant_list, "approver", "GET"),
        route("/v1/grants/{id}/revoke", revoke, "approver"),
        route("/v1/reload", reload, "admin"),
        route("/v1/audit/events", events, "admin", "GET"),
        route("/v1/audit/stream", stream, "admin", "GET"),
        route("/v1/replay", replay, "admin"),
        route("/v1/policies", policies, "admin", "GET"),
        route("/v1/policies/{name}", policy, "admin", "GET"),
        route("/v1/whoami", me, "any", "GET"),
        route("/console", page, None, "GET"),
        route("/console/{asset}", page, None, "GET"),
        route("/metrics", metrics, "admin", "GET"),
        route("/healthz", healthz, None, "GET"),
        route("/readyz", readyz, None, "GET"),
        route("/openapi.json", openapi, None, "GET"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        response = _error(status, "not_found" if status == 404 else "method_not_allowed",
                          f"{request.method} {request.url.path} is not served here "
                          "(see /openapi.json)")
        allow = (getattr(exc, "headers", None) or {}).get("Allow")
        if allow:  # a 405 says which methods are served (RFC 9110)
            response.headers["Allow"] = allow
        return response

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, _reload_on_signal, s)
        if hangup_pending():  # one came while this worker was starting: the file changed
            _reload_on_signal(s)
        reminding = asyncio.create_task(_remind_waiting(s))
        if own_process:
            settle()
            s.frozen = True
        try:
            yield
        finally:
            reminding.cancel()
            s.guard.close()

    return _Decide(s, Starlette(routes=routes, lifespan=lifespan,
                                exception_handlers={404: not_found, 405: not_found}))


def settle() -> None:
    """Keeps what the service holds from now on (its modules, the policy compiled) out of
    the garbage collector's full passes. A loaded policy is tens of thousands of objects
    that live as long as the process: traversing them made each full collection a pause of
    ~30 ms, which a decision waiting behind it saw (a p99 of 25-30 ms under load)."""
    gc.collect()
    gc.freeze()


def _retire(held: list[Guard], frozen: bool) -> None:
    """A replaced policy, once the decisions that had it are done: closed, and let go (when
    its objects were kept out of collection with the rest, they are let back in first). It
    comes in a list emptied here, so nothing holds it when the collector runs."""
    held.pop().close()
    if frozen:
        gc.unfreeze()
        settle()


def _reload_on_signal(service: Service) -> None:
    loaded, problems = service.reload()
    if loaded:
        print("callwarden serve: policy reloaded", file=sys.stderr, flush=True)
    else:
        print("callwarden serve: the policy was not reloaded (the one loaded before stays "
              "in force):", *problems, sep="\n  ", file=sys.stderr, flush=True)


def _probe_store(guard: Guard) -> None:
    """Reads one key of the state store and one approval (raises when the store does not
    answer)."""
    store = guard.engine.store
    read = getattr(store, "get", None)
    if read is not None:
        read("callwarden:readyz")
    with contextlib.suppress(ApprovalInvalid):
        guard.approvals.get("readyz-probe")


OPENAPI = resources.files("callwarden.serve").joinpath("openapi.json").read_bytes()
