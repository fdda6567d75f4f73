"""A scripted Anthropic Messages API on 127.0.0.1, for running the real Claude Code CLI offline.

The CLI (bundled with claude-agent-sdk) talks to ``ANTHROPIC_BASE_URL``. This server answers
``POST /v1/messages`` (streamed as server-sent events when the request asks for ``stream``, as
one JSON message otherwise) from a script of assistant turns, records every request body so a
test can read what the model was sent, and answers the CLI's side requests (token counting,
anything else) harmlessly.

A request is part of the agent loop when it offers tools; each such request takes the next
scripted turn, and once the script is used up the model says ``FINAL_TEXT``. Side requests
without tools (titles, summaries) get a short text reply and do not consume the script.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FINAL_TEXT", "FakeMessagesAPI", "text", "tool_use"]

FINAL_TEXT = "All done."
_ids = itertools.count(1)


def tool_use(name: str, tool_input: Mapping[str, Any], tool_id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` content block for a scripted turn."""
    return {"type": "tool_use", "id": tool_id or f"toolu_{next(_ids):04d}", "name": name,
            "input": dict(tool_input)}


def text(value: str) -> dict[str, Any]:
    """A ``text`` content block for a scripted turn."""
    return {"type": "text", "text": value}


class FakeMessagesAPI:
    """The server; use as a context manager. ``url`` goes into ``ANTHROPIC_BASE_URL``.

    Args:
        turns: Assistant turns for the agent loop, each a list of content blocks.
        before_turn: Called before each scripted turn is answered (a real model takes its
            time: the CLI's writes of the turn so far land meanwhile).
    """

    def __init__(self, turns: Sequence[Sequence[Mapping[str, Any]]] = (),
                 before_turn: Callable[[], None] | None = None) -> None:
        self._turns = [list(t) for t in turns]
        self._before_turn = before_turn
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # every /v1/messages body, in order
        self.loop_requests: list[dict[str, Any]] = []  # those that offered tools
        self.paths: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeMessagesAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # -- what the model was told -------------------------------------------------------------

    def tool_results(self) -> dict[str, dict[str, Any]]:
        """Every ``tool_result`` block the CLI sent back, by ``tool_use_id``."""
        found: dict[str, dict[str, Any]] = {}
        for body in self.loop_requests:
            for message in body.get("messages", ()):
                content = message.get("content")
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        found[block["tool_use_id"]] = block
        return found

    def result_text(self, tool_id: str) -> str:
        """The text of the tool result the model received for ``tool_id`` ('' if none)."""
        block = self.tool_results().get(tool_id)
        if block is None:
            return ""
        content = block.get("content")
        if isinstance(content, str):
            return content
        return "".join(c.get("text", "") for c in content or () if isinstance(c, dict))

    # -- serving -----------------------------------------------------------------------------

    def _reply_for(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            self.requests.append(dict(body))
            if not body.get("tools"):
                return [text("ok")]
            self.loop_requests.append(dict(body))
            if not self._turns:
                return [text(FINAL_TEXT)]
            turn = self._turns.pop(0)
        if self._before_turn is not None:
            self._before_turn()
        return turn

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                api.paths.append(f"GET {self.path}")
                self._json(200, {"data": [], "has_more": False})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                api.paths.append(f"POST {self.path}")
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                if path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                    return
                if not path.endswith("/v1/messages"):
                    self._json(200, {})
                    return
                blocks = api._reply_for(body)
                model = str(body.get("model") or "claude-fake")
                if body.get("stream"):
                    self._stream(model, blocks)
                else:
                    self._json(200, _message(model, blocks))

            def _stream(self, model: str, blocks: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for event, data in _events(model, blocks):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _stop_reason(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def _usage() -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def _message(model: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant",
            "model": model, "content": blocks, "stop_reason": _stop_reason(blocks),
            "stop_sequence": None, "usage": _usage()}


def _events(model: str, blocks: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    start = {**_message(model, []), "stop_reason": None}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": opening}
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}
