"""Tool pinning: what an MCP server's tools were when first seen, and whether they changed.

A server can change a tool after it was approved for use ("rug pull"): the description now
tells the model to send files elsewhere, the input schema grows a field. The first time a
server's tool is seen, a digest of its definition (name, description, input schema) is kept
in the approvals' store, sealed with the approvals key like every approval record; a later
definition with another digest marks the tool changed until someone accepts it
(``callwarden mcp accept SERVER TOOL``). A record whose seal does not verify (written to the
store by anything else, or edited there) counts as changed: it fails closed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from callwarden.approvals._integrity import canonical

if TYPE_CHECKING:
    from callwarden.approvals._approvals import Approvals

__all__ = ["CHANGED", "NEW", "SAME", "ToolPins", "definition_digest"]

NEW = "new"
SAME = "same"
CHANGED = "changed"
_ATTEMPTS = 8  # compare-and-set retries against concurrent gateways


def definition_digest(definition: Mapping[str, Any]) -> str:
    """The digest of a tool definition's name, description and input schema."""
    body = {k: definition.get(k) for k in ("name", "description", "inputSchema")}
    return hashlib.sha256(canonical(body)).hexdigest()


class ToolPins:
    """The pinned definitions of MCP servers' tools, in an :class:`Approvals`' store."""

    __slots__ = ("_approvals",)
    NEW, SAME, CHANGED = NEW, SAME, CHANGED  # what check() and state() say

    def __init__(self, approvals: Approvals) -> None:
        self._approvals = approvals

    def _key(self, server: str, tool: str) -> str:
        return f"{self._approvals.namespace}pin:{json.dumps([server, tool])}"

    def _read(self, key: str) -> tuple[dict[str, Any] | None, int | None]:
        """(the opened record, or None when it is missing or its seal is bad; its version)."""
        stored = self._approvals.store.get(key)
        if stored is None:
            return None, None
        return self._approvals._seal.opened(key, stored.value), stored.version

    def _write(self, key: str, version: int | None, record: Mapping[str, Any]) -> bool:
        return self._approvals.store.compare_and_set(
            key, version, self._approvals._seal.sealed(key, record), ttl=None)

    def check(self, server: str, tool: str, definition: Mapping[str, Any]) -> str:
        """Compares a tool's definition with its pin: ``new`` (pinned now), ``same`` or
        ``changed`` (the latest definition is kept for :meth:`accept`).

        Raises:
            StoreUnavailable: the store failed (the caller fails closed).
        """
        digest = definition_digest(definition)
        key = self._key(server, tool)
        for _ in range(_ATTEMPTS):
            record, version = self._read(key)
            if version is None:
                pinned = {"server": server, "tool": tool, "digest": digest, "seen": digest,
                          "at": self._approvals.clock()}
                if self._write(key, None, pinned):
                    return NEW
                continue  # another gateway pinned it first: compare with that
            if record is None:  # a record nobody sealed: it fails closed
                return CHANGED
            if record.get("reset"):  # accepted after a bad record: pin what is seen now
                pinned = {"server": server, "tool": tool, "digest": digest, "seen": digest,
                          "at": self._approvals.clock()}
                if self._write(key, version, pinned):
                    return NEW
                continue
            if record.get("digest") == digest:  # as pinned (again, after a change: back)
                if record.get("seen") == digest or self._write(key, version,
                                                               {**record, "seen": digest}):
                    return SAME
                continue
            if record.get("seen") == digest or self._write(
                    key, version, {**record, "seen": digest, "seen_at": self._approvals.clock()}):
                return CHANGED
        return CHANGED

    def state(self, server: str, tool: str) -> str | None:
        """``same`` or ``changed`` as last seen, or None when the tool was never pinned."""
        record, version = self._read(self._key(server, tool))
        if version is None:
            return None
        if record is None or record.get("reset") or record.get("digest") != record.get("seen"):
            return CHANGED
        return SAME

    def accept(self, server: str, tool: str, *, by: str) -> bool:
        """Pins the tool's latest definition (a person reviewed it; after a record that was not
        sealed, the next definition seen); False when the tool was never seen.

        Raises:
            StoreUnavailable: the store failed.
        """
        key = self._key(server, tool)
        for _ in range(_ATTEMPTS):
            record, version = self._read(key)
            if version is None:
                return False
            if record is None:  # unsealed: the next definition seen is pinned afresh
                accepted: dict[str, Any] = {"server": server, "tool": tool, "reset": True}
            else:
                accepted = {**record, "digest": record.get("seen"), "reset": False}
            accepted.update(accepted_by=by, accepted_at=self._approvals.clock())
            if self._write(key, version, accepted):
                return True
        return False
