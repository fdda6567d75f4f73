"""What every framework adapter shares: a guard from whatever the user passed, and the one
enforcement path it translates to and from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from callwarden import _enforce
from callwarden._call import MAX_REQUEST_CHARS
from callwarden._guard import Guard
from callwarden._messages import policy_answer

__all__ = ["Enforcer", "as_guard", "enforcer"]


def as_guard(source: Any) -> Guard:
    """Returns a :class:`Guard` for a guard, a policy file path, or a policy dict.

    Raises:
        TypeError: ``source`` is none of those.
        PolicyError: the policy file or dict is broken (with every problem listed).
    """
    if isinstance(source, Guard):
        return source
    if isinstance(source, str | os.PathLike):
        return Guard.from_file(os.fspath(source))
    if isinstance(source, Mapping):
        return Guard.from_dict(source)
    raise TypeError(f"expected a callwarden.Guard, a policy file path or a policy dict, "
                    f"got {type(source).__name__}")


class Enforcer(_enforce.Enforcer):
    """The one enforcement path (see :class:`callwarden._enforce.Enforcer`), built from a
    :class:`Guard`, a policy file path or a policy dict."""

    __slots__ = ()

    def __init__(self, guard: Any, *, framework: str | None = None, **options: Any) -> None:
        super().__init__(as_guard(guard), framework=framework, **options)


def enforcer(source: Any, *, framework: str, **options: Any) -> _enforce.Enforcer:
    """The enforcement path for a framework: ``source`` is an enforcer (used as it is), a
    :class:`Guard`, a policy file path or a policy dict; ``options`` are the enforcer's
    (``approver``, ``wait``, ``agent``, ``principal``, ``session``)."""
    if isinstance(source, _enforce.Enforcer):
        return source
    return Enforcer(source, framework=framework, **options)


def policy_tool(source: Any, *, name: str = "check_policy", **fields: Any) -> Any:
    """A tool to give the model: "would this call be allowed, asked or denied, and why?".

    ``source`` is a :class:`Guard`, a policy file path or a dict; ``fields`` (``agent``,
    ``session``, ``principal``, ``request`` ...) are used for every question. The returned
    function ``check_policy(tool: str, arguments: str) -> str`` decides with
    :meth:`Guard.query` — limits read, not counted; no history recorded; nothing audited — and
    answers with the effect and the message the model would get, never the policy's rules.
    (``arguments`` is a JSON text, so strict tool schemas accept it; a dict works too.)
    Wrap it as your framework's tool (LangChain ``tool(fn)``, OpenAI Agents
    ``function_tool(fn)``, Pydantic AI ``Tool(fn)``, AutoGen ``FunctionTool(fn, ...)``).
    """
    guard = as_guard(source)

    def check_policy(tool: str, arguments: str) -> str:
        """Before calling a tool, asks whether the policy would allow this exact call.

        Args:
            tool: the name of the tool you want to call.
            arguments: the call's arguments, as a JSON object.

        Returns 'allow', 'allow with changes: ...', 'needs approval: ...', 'deny: ...' or
        'halt: ...'."""
        if not isinstance(tool, str) or not tool:
            return "deny: name the tool to check"
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as e:
            return f"deny: the arguments are not a JSON object ({e})"
        return policy_answer(guard.query(tool, args, **fields))

    check_policy.__name__ = check_policy.__qualname__ = name
    return check_policy




def latest_user_text(messages: Any) -> str | None:
    """The text of the latest user message in a framework's message list — LangChain messages
    (``type == "human"``), chat dicts (``{"role": "user", "content": ...}``) and content given
    as a string or as blocks (``{"type": "text" | "input_text", "text": ...}``) — as the
    call's ``context.request``; None when there is none. At most the last 20,000 characters."""
    if not isinstance(messages, list | tuple):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping):
            role, content = message.get("role") or message.get("type"), message.get("content")
        else:
            role, content = getattr(message, "type", None), getattr(message, "content", None)
        if role not in ("human", "user"):
            continue
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(str(block.get("text", "")) for block in content
                             if isinstance(block, Mapping)
                             and block.get("type") in ("text", "input_text"))
        else:
            continue
        return text[-MAX_REQUEST_CHARS:] if text else None
    return None
