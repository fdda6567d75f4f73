"""Where a value came from: ``untrusted:`` and ``after_untrusted:``.

Tools whose output is untrusted content — web fetch and search, tools reading inbound mail or
chat, any tool whose profile says ``output: untrusted`` — have the entities of their results
(URLs, e-mail addresses, domains, IBANs, phone numbers) remembered for the session when they
run through the enforcement path (``guard.run``, every adapter, the service's ``/v1/outcome``)
or are passed to ``guard.record_output``; they are kept in the state store, so every process
of the session knows them (state/_facts.py)::

    rules:
      - id: links-from-pages-need-approval
        untrusted: [url, recipient]      # a value of these roles came from untrusted content
        effect: ask
      - id: after-reading-the-web-new-parties-ask
        after_untrusted: true            # the session read untrusted content (or: 1h)
        roles: {recipient: {in: [contacts, request, seen]}}
        effect: ask

``untrusted:`` holds when a value of one of the roles appeared in untrusted output of this
session and is not among the user's request's entities (what the user asked for is the user's,
wherever else it also appeared). ``after_untrusted:`` holds once the session has read untrusted
content, or within the given time since it last did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from callwarden._profiles import ToolProfile
from callwarden._units import parse_duration
from callwarden.conditions.base import CompileEnv, ConfigError, Hit, Subject, register_condition
from callwarden.conditions.roles import entities_module

__all__ = ["AfterUntrusted", "Untrusted", "seen_in_output"]

# The role -> the kind of entity its values are compared as, as in ``roles:``.
_ROLE_KIND = {"recipient": "emails", "payee": "ibans", "url": "urls"}
_KINDS = ("urls", "emails", "domains", "ibans", "phones")


@register_condition("untrusted")
class Untrusted:
    """``untrusted: [ROLE, ...]`` (or ``{ROLE: KIND}``): holds when a value of those roles
    came from untrusted tool output in this session and not from the user's request."""

    __slots__ = ("_by_profile", "_found", "_roles", "_values_of", "needs_roles",
                 "reads_untrusted", "uses_facts")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        hint = "e.g. untrusted: [url, recipient] (or {text: urls} for the links in a text)"
        if isinstance(config, str):
            config = [config]
        if isinstance(config, list) and config and all(isinstance(r, str) for r in config):
            pairs = [(r, _ROLE_KIND.get(r)) for r in config]
            missing = [r for r, k in pairs if k is None]
            if missing:
                raise ConfigError(f"say which kind of value {missing[0]!r} holds", hint=hint)
            roles = [(r, str(k)) for r, k in pairs]
        elif isinstance(config, Mapping) and config:
            roles = [(str(r), str(k)) for r, k in config.items()]
        else:
            raise ConfigError("untrusted: names roles", hint=hint)
        for role, kind in roles:
            if kind not in _KINDS:
                raise ConfigError(f"{role}: {kind!r} is not a kind remembered from output",
                                  key=role, hint="kinds: " + ", ".join(_KINDS))
        self._roles = tuple(roles)
        # id(profile) -> how its arguments are read (see _profile_roles)
        self._by_profile: dict[int, _ProfileRoles] = {}
        self._values_of = entities_module().values_of
        # kind -> {an argument's text: the values of that kind in it}: a call's URL or address
        # is read once, not through values_of's own cache on every call.
        self._found: dict[str, dict[str, frozenset[str]]] = {kind: {} for _, kind in roles}
        self.needs_roles = tuple(role for role, _ in roles)  # as RolesMatcher's
        self.uses_facts = self.reads_untrusted = True

    def __call__(self, subject: Subject) -> Hit | None:
        facts = subject.memo.get("facts")
        untrusted = facts.get("untrusted") if facts else None
        if not untrusted:
            return None
        profile = subject.profile
        known = self._by_profile.get(id(profile))
        if known is None or known[0] is not profile:
            known = self._profile_roles(profile)
        # The call's arguments are walked once, each read as the roles it plays: most calls
        # have a few arguments, none of whose values came from outside. A value that did is
        # looked at again role by role, in the policy's order, for the hit to name.
        by_name = known[1]
        for name, value in subject.call.args.items():
            plays = by_name.get(name)
            if plays is None:
                continue
            for kind, texts in plays:
                tainted = untrusted.get(kind)
                if not tainted:
                    continue
                for item in value if isinstance(value, _SEQUENCES) else (value,):
                    if item is None:
                        continue
                    text = item if type(item) is str else str(item)
                    found = texts.get(text)
                    if found is None:
                        found = self._read(texts, kind, text)
                    if not tainted.isdisjoint(found):
                        return self._hit(subject, untrusted, self._roles)
        return self._hit(subject, untrusted, known[2]) if known[2] else None

    def _hit(self, subject: Subject, untrusted: Mapping[str, Any],
             roles: tuple[tuple[str, str], ...]) -> Hit | None:
        """The first value of ``roles`` (role, kind) that came from untrusted output and not
        from the user's request, as a hit."""
        for role, kind in roles:
            tainted = untrusted.get(kind)
            if not tainted:
                continue
            for value in subject.role_values(role):
                text = value if type(value) is str else str(value)
                found = self._found[kind].get(text) or self._read(self._found[kind], kind, text)
                for item in sorted(found & tainted):
                    if not _requested(subject, kind, item):
                        return Hit(f"{role} {item!r} came from untrusted content read in this "
                                   "session, not from the user's request", "untrusted.value")
        return None

    def _read(self, known: dict[str, frozenset[str]], kind: str, text: str) -> frozenset[str]:
        found: frozenset[str] = self._values_of(kind, text)
        if len(text) <= _TEXT_KEPT:
            if len(known) >= _TEXTS_KEPT:
                known.clear()
            known[text] = found
        return found

    def _profile_roles(self, profile: ToolProfile) -> _ProfileRoles:
        """How ``profile``'s arguments are read: argument name -> the kinds (and their kept
        texts) of the roles it plays; the roles one of whose names is dotted (a value inside a
        nested argument, read role by role)."""
        if len(self._by_profile) >= _PROFILES_KEPT:
            self._by_profile.clear()
        by_name: dict[str, list[tuple[str, dict[str, frozenset[str]]]]] = {}
        dotted_roles = []
        for role, kind in self._roles:
            names, _, dotted = profile.role_names(role)
            if dotted:
                dotted_roles.append((role, kind))
                continue
            for name in names:
                plays = by_name.setdefault(name, [])
                if all(k != kind for k, _ in plays):
                    plays.append((kind, self._found[kind]))
        known = self._by_profile[id(profile)] = (
            profile, {name: tuple(plays) for name, plays in by_name.items()}, tuple(dotted_roles))
        return known


_ProfileRoles = tuple[ToolProfile, dict[str, tuple[tuple[str, dict[str, frozenset[str]]], ...]],
                      tuple[tuple[str, str], ...]]
_SEQUENCES = (list, tuple)  # as ToolProfile.values: a list's items are read one by one
_PROFILES_KEPT = 1024
_TEXTS_KEPT, _TEXT_KEPT = 4096, 2048  # per kind: how many texts are kept, and how long


def _requested(subject: Subject, kind: str, value: str) -> bool:
    """Whether the user's request (``context.request``) holds ``value`` as a ``kind``."""
    context = subject.call.context
    request = context.get("request") if context else None
    return isinstance(request, str) and bool(request) \
        and value in entities_module().extract(request).of(kind)


_AFTER = Hit("the session read untrusted content", "untrusted.after")


@register_condition("after_untrusted")
class AfterUntrusted:
    """``after_untrusted: true`` (or a duration such as ``1h``): holds once the session has
    read untrusted content (within that time since it last did)."""

    __slots__ = ("_within", "reads_untrusted", "uses_facts")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        if config is True:
            self._within: float | None = None
        elif isinstance(config, str | int | float) and not isinstance(config, bool):
            try:
                self._within = parse_duration(config)
            except ValueError as e:
                raise ConfigError(str(e), hint="e.g. after_untrusted: 1h") from e
        else:
            raise ConfigError("after_untrusted: is true or a duration",
                              hint="e.g. after_untrusted: true, or after_untrusted: 30m")
        self.uses_facts = self.reads_untrusted = True

    def __call__(self, subject: Subject) -> Hit | None:
        facts = subject.memo.get("facts") or {}
        read_at = facts.get("untrusted_at")
        if not isinstance(read_at, int | float):
            return None
        if self._within is not None and subject.call.timestamp - read_at > self._within:
            return None
        return _AFTER


_MAX_OUTPUT_CHARS = 200_000


def seen_in_output(output: Any) -> dict[str, list[str]]:
    """The entities of an untrusted output to remember, per kind (unreadable ones left out:
    they never match a value anyway)."""
    entities = entities_module()
    if isinstance(output, str):
        text = output
    else:
        try:
            text = json.dumps(output, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(output)
    text = text[:_MAX_OUTPUT_CHARS]
    return {kind: sorted(v for v in entities.values_of(kind, text)
                         if not entities.is_rejected(v)) for kind in _KINDS}
