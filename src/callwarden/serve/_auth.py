"""Who may call the decision service: bearer tokens, each with a role and a name.

A token file (``--tokens FILE``, or ``CALLWARDEN_SERVE_TOKENS`` holding the same text) has one
token per line, ``ROLE NAME TOKEN``; ``#`` starts a comment::

    agent   support-bot   3f9c...   # decide and report outcomes
    approver alice        91ab...   # resolve approval requests (never her own calls)
    admin   ops           c0de...   # everything: audit, metrics, reload

Roles: ``agent`` (decide, outcome), ``approver`` (approvals), ``admin`` (all of these and the
rest). The name is who the holder is: the agent a decision is made for when the call does not
say, the person an approval is recorded as made by.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from callwarden.net import bearer

__all__ = ["ROLES", "Holder", "Tokens"]

ROLES = ("agent", "approver", "admin")
_MIN_LENGTH = 16


@dataclass(frozen=True)
class Holder:
    """Whoever presented a token: their role and name."""

    role: str
    name: str

    def may(self, role: str) -> bool:
        """Whether this holder may do what ``role`` may (an admin may do everything)."""
        return self.role == role or self.role == "admin"


class Tokens:
    """The tokens the service accepts."""

    def __init__(self, holders: dict[bytes, Holder]) -> None:
        self._holders = holders

    @classmethod
    def parse(cls, text: str, where: str = "tokens") -> Tokens:
        """Reads ``ROLE NAME TOKEN`` lines.

        Raises:
            ValueError: a line that is not one, an unknown role, a short or repeated token, or
                no token at all (the message names the line).
        """
        holders: dict[bytes, Holder] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError(f"{where}:{number}: write ROLE NAME TOKEN")
            role, name, token = parts
            if role not in ROLES:
                raise ValueError(f"{where}:{number}: role {role!r} is none of "
                                 f"{', '.join(ROLES)}")
            if len(token) < _MIN_LENGTH:
                raise ValueError(f"{where}:{number}: the token is shorter than {_MIN_LENGTH} "
                                 "characters")
            if token.encode() in holders:
                raise ValueError(f"{where}:{number}: this token is given twice")
            holders[token.encode()] = Holder(role, name)
        if not holders:
            raise ValueError(f"{where}: no token (write ROLE NAME TOKEN lines)")
        return cls(holders)

    def holder(self, authorization: str | None) -> Holder | None:
        """The holder of the token in an ``Authorization: Bearer ...`` header, or None. Every
        known token is compared, in constant time each."""
        presented = bearer(authorization)
        if presented is None:
            return None
        found = None
        for token, holder in self._holders.items():
            if hmac.compare_digest(presented, token):
                found = holder
        return found
