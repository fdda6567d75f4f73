"""The user's latest prompt, read from a coding agent's transcript, as the call's
``context.request``.

Every hook payload names the session's transcript (``transcript_path``); what the user asked
for is its latest user prompt. Each agent writes its own format:

* Claude Code — JSONL, one entry per line; a prompt is ``{"type": "user", "message": {"role":
  "user", "content": str | [blocks]}}``. Tool results come back as user entries too (blocks of
  ``tool_result``) and are skipped, as are ``isMeta`` (injected caveats), ``isSidechain`` (a
  sub-agent's prompt, written by the main agent) and ``isCompactSummary`` entries.
* Codex — the rollout JSONL (``{"type": ..., "payload": ...}`` per line); what the user typed
  is the ``event_msg`` whose payload is ``{"type": "user_message", "message": str}``. (The
  ``response_item`` user messages also hold the injected ``<environment_context>`` and
  AGENTS.md instructions, so they are not used.)
* Gemini CLI — the chat recording (packages/core/src/services/chatRecordingService.ts): an
  append-only JSONL log of message records ``{"id", "type": "user" | "gemini" | ..., "content",
  "displayContent"?}``, rewritten in place by id, ``{"$rewindTo": id}`` (drops that message and
  the later ones) and ``{"$set": {...}}`` (``messages`` there replaces the list); older releases
  wrote one JSON object ``{"messages": [...]}``. The prompt is the latest ``user`` record, as
  the user typed it (``displayContent``, else ``content``: a string or parts with ``text``).

Reading it never breaks a call: only a regular file is opened (never a FIFO or a device), only
its last :data:`MAX_TAIL` bytes are read, partial and malformed lines are skipped, and anything
amiss means "no request" — a policy that needs one then decides without it. At most the last
20,000 characters of the prompt are kept.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from typing import Any

from callwarden._call import MAX_REQUEST_CHARS

__all__ = ["MAX_TAIL", "latest_prompt", "with_request"]

MAX_TAIL = 256 * 1024  # bytes read from the end of a transcript
_SKIP = object()  # an entry that is not a prompt (a tool result): look further back


def with_request(context: dict[str, Any], transcript: Any, dialect: str) -> dict[str, Any]:
    """``context`` with ``request``: the latest prompt of the ``dialect``'s transcript, when
    there is one and the context has none yet."""
    if "request" not in context:
        request = latest_prompt(transcript, dialect)
        if request is not None:
            context["request"] = request
    return context


def latest_prompt(path: Any, dialect: str) -> str | None:
    """The text of the latest user prompt in the transcript at ``path`` written by
    ``dialect`` (``claude-code``, ``codex``, ``gemini-cli``); None when there is none, the
    path is not a regular file, or anything goes wrong."""
    try:
        tail = _read_tail(path)
        if tail is None:
            return None
        text = _READERS[dialect](*tail)
    except Exception:  # a transcript is a hint: whatever is amiss, there is no request
        return None
    return text[-MAX_REQUEST_CHARS:] if text else None


def _read_tail(path: Any) -> tuple[list[bytes], bytes | None] | None:
    """(the complete lines of the file's last MAX_TAIL bytes, the whole file when it fits)."""
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a device is not a transcript
        return None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
                info.st_dev, info.st_ino):  # replaced between the look and the open
            return None
        start = max(0, opened.st_size - MAX_TAIL)
        chunks: list[bytes] = []
        offset, left = start, opened.st_size - start
        while left > 0:
            chunk = os.pread(fd, left, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # begins inside a line
    return lines, (data if start == 0 else None)


def _entry(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:  # a partial line still being written, or garbage: not an entry
        return None


def _text_of(content: Any, results: tuple[str, ...]) -> Any:
    """The text of a message's content (a string, or blocks / parts with ``text``); _SKIP when
    it only carries tool results (``results``: their block keys or types) or is malformed, ""
    when it has no text (an image alone)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return _SKIP
    texts: list[str] = []
    tool_results = 0
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            if block.get("type") in results or any(key in block for key in results):
                tool_results += 1
            elif isinstance(block.get("text"), str) and block.get("type") in (None, "text"):
                texts.append(block["text"])
    if not texts and tool_results:
        return _SKIP
    return "\n".join(texts)


def _claude_code(lines: list[bytes], _: bytes | None) -> str | None:
    for line in reversed(lines):
        if b'"user"' not in line:  # cheap: most lines are the assistant's and tool output
            continue
        entry = _entry(line)
        if not isinstance(entry, Mapping) or entry.get("type") != "user" or any(
                entry.get(flag) for flag in ("isMeta", "isSidechain", "isCompactSummary")):
            continue
        message = entry.get("message")
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        text = _text_of(message.get("content"), ("tool_result",))
        if text is not _SKIP:
            return text or None
    return None


def _codex(lines: list[bytes], _: bytes | None) -> str | None:
    for line in reversed(lines):
        if b'"user_message"' not in line:
            continue
        entry = _entry(line)
        if not isinstance(entry, Mapping) or entry.get("type") != "event_msg":
            continue
        payload = entry.get("payload")
        if isinstance(payload, Mapping) and payload.get("type") == "user_message":
            message = payload.get("message")
            return message if isinstance(message, str) and message else None
    return None


def _gemini_cli(lines: list[bytes], whole: bytes | None) -> str | None:
    messages: dict[str, Mapping[str, Any]] = {}
    legacy = _entry(whole) if whole is not None and whole.lstrip().startswith(b"{") else None
    if isinstance(legacy, Mapping) and isinstance(legacy.get("messages"), list):
        _replace(messages, legacy["messages"])  # the single-object file of older releases
    else:
        for line in lines:
            record = _entry(line)
            if not isinstance(record, Mapping):
                continue
            target = record.get("$rewindTo")
            if isinstance(target, str):
                ids = list(messages)
                drop = ids[ids.index(target):] if target in messages else ids
                for key in drop:  # a target before the tail: every message read is later
                    del messages[key]
            elif isinstance(record.get("id"), str):
                messages[record["id"]] = record
            else:
                patch = record.get("$set", record)
                if isinstance(patch, Mapping) and isinstance(patch.get("messages"), list):
                    _replace(messages, patch["messages"])
    for message in reversed(list(messages.values())):
        if message.get("type") != "user":
            continue
        shown = message.get("displayContent")
        text = _text_of(shown if shown is not None else message.get("content"),
                        ("functionResponse",))
        if text is not _SKIP:
            return text or None
    return None


def _replace(messages: dict[str, Mapping[str, Any]], records: list[Any]) -> None:
    messages.clear()
    for number, record in enumerate(records):
        if isinstance(record, Mapping):
            key = record.get("id")
            messages[key if isinstance(key, str) else f"#{number}"] = record


_READERS: dict[str, Callable[[list[bytes], bytes | None], str | None]] = {
    "claude-code": _claude_code, "codex": _codex, "gemini-cli": _gemini_cli}
