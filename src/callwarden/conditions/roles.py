"""The ``roles:`` condition: every value an argument role carries is known — in a named list or
named by the user in this request.

::

    tools:
      send_email: {kind: email, roles: {recipient: [to, cc, bcc], text: body}}
    rules:
      - id: strangers-need-approval
        roles:
          recipient: {in: [contacts, request]}          # e-mail addresses, case-folded
          payee: {in: [payees, request]}                 # IBANs, without spaces
          text: {find: urls, as: domain, in: [company_domains, request]}
        effect: ask

One rule covers every tool that has the role (a tool without a value for it passes). Values are
compared after the same normalization on both sides (:mod:`callwarden.analysis.entities`):
``as:`` says how (``email``, ``domain``, ``url``, ``iban``, ``card``, ``phone``, ``amount``,
``date``, ``text``, ``name``; by default the role's own: ``recipient`` → email, ``payee`` →
iban, ``url`` → url, ``amount`` → amount, ``person`` → name, others → text; a name is in the
request when the request has its words in a row), ``find:`` takes the entities of that kind out of free
text first (the links of a body). ``in:`` lists where a value may come from: a named list of
``lists:``, ``request`` — the entities of the user's request (``guard.check(...,
request="...")``, the service's and hooks' ``context.request``) — or ``seen``, the values this
role had in the session's earlier calls that ran (kept in the state store, state/_facts.py).
The condition holds — the rule applies — when some value is in none of them, or is not a
value of that kind at all (``bob`` is no e-mail address); the reason names it.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from callwarden.conditions.base import CompileEnv, ConfigError, Hit, Subject, register_condition

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["RolesMatcher", "entities_module", "seen_values"]

# ``as:`` -> the entity kind compared.
_AS = {"email": "emails", "domain": "domains", "url": "urls", "iban": "ibans", "card": "cards",
       "phone": "phones", "amount": "amounts", "date": "dates", "text": "quoted",
       "name": "names"}
_ROLE_AS = {"recipient": "email", "payee": "iban", "url": "url", "amount": "amount",
            "person": "name"}
_KEYS = ("in", "as", "find")
_MAX_SHOWN = 80


def entities_module() -> ModuleType:
    """callwarden.analysis.entities, imported when a policy first uses ``roles:`` or
    provenance (its patterns and the public suffix list cost ~20 ms to load, which no other
    policy pays)."""
    global _ENTITIES
    if _ENTITIES is None:
        from callwarden.analysis import entities

        _ENTITIES = entities
    return _ENTITIES


_ENTITIES: ModuleType | None = None


class _Check:
    __slots__ = ("e", "find", "kind", "known", "request", "role", "seen", "sources")

    def __init__(self, role: str, spec: Any, env: CompileEnv) -> None:
        self.e = entities = entities_module()
        hint = "e.g. roles: {recipient: {in: [contacts, request]}}"
        if not isinstance(spec, Mapping):
            raise ConfigError("must be a mapping with in: [...]", key=role, hint=hint)
        for key in spec:
            if key not in _KEYS:
                raise ConfigError(f"unknown key {key!r}", key=f"{role}.{key}",
                                  hint="a role accepts in, as, find")
        as_ = spec.get("as", _ROLE_AS.get(role, "text"))
        if as_ not in _AS:
            raise ConfigError(f"as: {as_!r} is not a kind of value", key=f"{role}.as",
                              hint="as: " + ", ".join(_AS))
        find = spec.get("find")
        if find == "names":
            raise ConfigError("find: names is not possible: no list of the names in a text "
                              "can be made", key=f"{role}.find",
                              hint="give the name's own argument a role, with as: name")
        if find is not None and find not in entities.KINDS:
            raise ConfigError(f"find: {find!r} is not a kind of entity", key=f"{role}.find",
                              hint="find: " + ", ".join(entities.KINDS))
        sources = spec.get("in")
        if isinstance(sources, str):
            sources = [sources]
        if not isinstance(sources, list) or not sources or not all(
                isinstance(s, str) for s in sources):
            raise ConfigError("in: must list named lists and/or request", key=f"{role}.in",
                              hint=hint)
        self.role = role
        self.kind = _AS[as_]
        self.find = find
        self.request = "request" in sources
        self.seen = "seen" in sources
        known: set[str] = set()
        for name in sources:
            if name in ("request", "seen"):
                continue
            listed = name.removeprefix("lists.")
            if listed not in env.lists:
                raise ConfigError(f"no list named {listed!r}", key=f"{role}.in",
                                  hint="define it under lists:, or use request")
            for item in _items(env.lists[listed]):
                known.update(self._normalized(str(item))[0])
        # a value that could not be read safely is never known, whatever the list says
        self.known = frozenset(k for k in known if not entities.is_rejected(k))
        self.sources = " or ".join(_SOURCE_NAMES.get(s, f"lists.{s.removeprefix('lists.')}")
                                   for s in sources)

    def _normalized(self, text: str) -> tuple[frozenset[str], bool]:
        """(the values of this check's kind in ``text``, whether ``text`` held none)."""
        entities = self.e
        if self.find is not None:
            found = entities.values_of(self.find, text)
            if self.find != self.kind:
                found = _as_kind(self.kind, found)
            return found, False
        values = entities.values_of(self.kind, text)
        return values, not values

    def unknown(self, subject: Subject) -> str | None:
        """The first value not covered, described; None when every value is."""
        values = subject.role_values(self.role)
        if not values:
            return None
        entities = self.e
        for value in values:
            text = value if isinstance(value, str) else str(value)
            found, none = self._normalized(text)
            if none:
                return (f"{self.role} {_shown(text)} is not {_A[self.kind]}, so it cannot be "
                        f"found in {self.sources}")
            rest = found - self.known  # a rejected value is never in a list
            if not rest:
                continue
            for item in sorted(rest):
                if entities.is_rejected(item):
                    raw = item[len(entities.REJECTED_PREFIX):]
                    return (f"{self.role} {_shown(raw)} cannot be read safely (hidden or "
                            "look-alike characters, or not well formed), so it is not taken "
                            f"for one in {self.sources}")
            for more in self._more(subject):
                rest = frozenset(item for item in rest if item not in more)
            if rest:
                return f"{self.role} {_shown(min(rest))} is not in {self.sources}"
        return None

    def _more(self, subject: Subject) -> Iterator[Container[str]]:
        """The values known besides the lists: the request's, the session's seen parties."""
        if self.request:
            context = subject.call.context
            request = context.get("request") if context else None
            if isinstance(request, str) and request:
                yield self.e.extract(request).of(self.kind)
        if self.seen:
            facts = subject.memo.get("facts") or {}
            yield (facts.get("seen") or {}).get(self.kind, frozenset())


@lru_cache(maxsize=4096)
def _as_kind(kind: str, found: frozenset[str]) -> frozenset[str]:
    """Values found as one kind (the links of a text), read as another (their domains); one
    that is not of that kind stays a rejected marker. Kept: a text's links repeat."""
    entities = entities_module()
    return frozenset(f if entities.is_rejected(f) else
                     (entities.normalize(kind, f) or entities.REJECTED_PREFIX + f)
                     for f in found)


_SOURCE_NAMES = {"request": "the user's request",
                 "seen": "the parties of this session's earlier calls"}
_A = {"emails": "an e-mail address", "domains": "a domain", "urls": "a URL",
      "ibans": "a valid IBAN", "cards": "a valid card number", "phones": "a phone number",
      "amounts": "an amount", "dates": "a date", "quoted": "a text", "names": "a name"}


def _items(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return list(value)  # a map list: its keys
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return [value]


def _shown(value: str) -> str:
    return repr(value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN - 3] + "...")


@register_condition("roles")
class RolesMatcher:
    """``roles: {ROLE: {in: [...], as: KIND, find: KIND}}``: holds when a value of a role is
    known to none of the sources (see the module docstring)."""

    __slots__ = ("_checks", "needs_roles", "seen_roles", "uses_facts")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        env = env or CompileEnv()
        if not isinstance(config, Mapping) or not config:
            raise ConfigError("roles: maps roles to where their values may come from",
                              hint="e.g. roles: {recipient: {in: [contacts, request]}}")
        self._checks = tuple(_Check(str(role), spec, env) for role, spec in config.items())
        #: (role, kind) whose values the engine remembers from calls that ran (``in: seen``).
        self.seen_roles = tuple((c.role, c.kind) for c in self._checks if c.seen)
        self.uses_facts = bool(self.seen_roles)
        #: it holds only for a call with a value of one of these roles (the engine skips it
        #: for calls that have none of their arguments)
        self.needs_roles = tuple(c.role for c in self._checks)

    def __call__(self, subject: Subject) -> Hit | None:
        for check in self._checks:
            reason = check.unknown(subject)
            if reason is not None:
                return Hit(reason, "roles.unknown")
        return None


def seen_values(subject: Subject, pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The normalized values of the call's roles, per kind (``emails``, ``ibans`` ...), that
    the engine remembers as seen once the call runs; unreadable values are left out."""
    entities = entities_module()
    out: dict[str, list[str]] = {}
    for role, kind in pairs:
        for value in subject.role_values(role):
            text = value if isinstance(value, str) else str(value)
            out.setdefault(kind, []).extend(
                v for v in sorted(entities.values_of(kind, text)) if not entities.is_rejected(v))
    return {kind: values for kind, values in out.items() if values}
