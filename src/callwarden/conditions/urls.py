"""The ``urls:`` rule condition (egress control): allowed and denied domains, schemes, private
and internal addresses, for the tool's URL argument and the links inside free text.

URLs are read by :mod:`callwarden.analysis.urls` (WHATWG parsing, IDNA, every IPv4 spelling).
Domain entries are names (``example.com``), subdomain wildcards (``*.example.com``), IPs or
CIDRs; they are domain patterns, not globs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from callwarden.analysis.urls import (
    MAX_SCAN_CHARS,
    MAX_SCAN_DEPTH,
    MAX_URLS_PER_CALL,
    UrlInfo,
    analyze_url,
    find_urls,
)
from callwarden.conditions.base import (
    CompileEnv,
    Hit,
    Subject,
    config_bool,
    config_str_list,
    register_condition,
)
from callwarden.exceptions import ConfigError, InvalidUrl

__all__ = ["UrlMatcher"]

_CACHE_SIZE = 4096


_EXTRA_URL_ARGS = ("urls", "base_url", "webhook_url", "callback_url", "redirect_uri",
                   "redirect_url", "image_url", "links")
_EXTRA_URL_SET = frozenset(_EXTRA_URL_ARGS)
_UNSEEN: Any = object()


class _DomainSet:
    """Domain entries, matched against a URL's host. ``*`` alone matches every host: in an
    allow list it allows any, in a deny list it denies any."""

    __slots__ = ("_apex", "_exact", "_networks", "_wild", "every")

    def __init__(self, entries: list[str], key: str, *, wildcard_matches_apex: bool) -> None:
        self._exact: dict[str, str] = {}
        self._wild: dict[str, str] = {}
        self._networks: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]] = []
        self._apex = wildcard_matches_apex
        self.every: str | None = None  # the "*" entry, when there is one
        for i, entry in enumerate(entries):
            text = entry.strip()
            if text == "*":
                self.every = entry
                continue
            try:
                self._networks.append((ipaddress.ip_network(text.strip("[]"), strict=False),
                                       entry))
                continue
            except ValueError:
                pass
            wild = text.startswith(("*.", "."))
            name = text[2:] if text.startswith("*.") else text.lstrip(".")
            try:
                info = analyze_url(name if "//" in name else "//" + name)
            except InvalidUrl as e:
                raise ConfigError(f"{entry!r} is not a domain: {e}", key=f"{key}[{i}]",
                                  hint="write example.com, *.example.com or 10.0.0.0/8") from e
            if info.ip is not None:
                self._networks.append((ipaddress.ip_network(info.ip), entry))
            elif wild or wildcard_matches_apex:
                # In a deny list a name covers its subdomains: the same owner controls them.
                self._wild[info.host] = entry
            else:
                self._exact[info.host] = entry

    def match(self, info: UrlInfo) -> str | None:
        """The entry that matches the URL's host, or None."""
        if self.every is not None:
            return self.every
        if info.ip is not None:
            for net, text in self._networks:
                if info.ip in net or (info.embedded_ip is not None and info.embedded_ip in net):
                    return text
            return None
        host = info.host
        found = self._exact.get(host)
        if found is not None:
            return found
        wild = self._wild
        if wild:
            if self._apex and host in wild:
                return wild[host]
            i = host.find(".")
            while i != -1:
                found = wild.get(host[i + 1:])
                if found is not None:
                    return found
                i = host.find(".", i + 1)
        return None


@register_condition("urls")
class UrlMatcher:
    """The ``urls:`` condition: egress by domain allow / deny list, scheme and address class.

    Config keys: ``allow_domains``, ``deny_domains`` (names, ``*.wildcards``, IPs or CIDRs),
    ``schemes`` (default ``[http, https]``), ``block_private`` (default true),
    ``allow_userinfo`` (default false), ``allow_loopback`` (default false: with
    ``block_private``, ``localhost`` is blocked too), ``scan_text`` (default false),
    ``max_scan_chars``.

    ``*.example.com`` matches every subdomain at any depth. In ``allow_domains`` it does not
    match ``example.com`` itself (list it too), and a plain name matches only itself. In
    ``deny_domains`` both spellings cover the name and every subdomain: a wildcard never widens
    what an allow list permits, nor narrows what a deny list blocks.

    Hit codes: ``url.denied_domain``, ``url.not_allowed``, ``url.scheme``,
    ``url.private_address``, ``url.invalid``, ``url.userinfo``.
    """

    __slots__ = ("_allow", "_block_private", "_cache", "_deny", "_deny_entries", "_loopback",
                 "_max_scan", "_scan_text", "_schemes", "_userinfo", "group_key")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise ConfigError("urls: expects a mapping such as {allow_domains: ['*.example.com']}")
        known = {"allow_domains", "deny_domains", "schemes", "block_private", "allow_userinfo",
                 "allow_loopback", "scan_text", "max_scan_chars"}
        for key in config:
            if key not in known:
                raise ConfigError(f"unknown key {key!r}", key=str(key),
                                  hint="urls: accepts " + ", ".join(sorted(known)))
        allow = config_str_list(config, "allow_domains", example="'*.example.com'")
        self._allow = (None if allow is None
                       else _DomainSet(allow, "allow_domains", wildcard_matches_apex=False))
        deny = config_str_list(config, "deny_domains", example="'*.example.com'")
        self._deny = _DomainSet(deny or [], "deny_domains",
                                wildcard_matches_apex=True)
        self._deny_entries = tuple(deny or ())
        schemes = config_str_list(config, "schemes", example="'*.example.com'")
        self._schemes = frozenset(s.lower().rstrip(":/") for s in (schemes or ["http", "https"]))
        self._block_private = config_bool(config, "block_private", True)
        self._userinfo = config_bool(config, "allow_userinfo", False)
        self._loopback = config_bool(config, "allow_loopback", False)
        self._scan_text = config_bool(config, "scan_text", False)
        max_scan = config.get("max_scan_chars", MAX_SCAN_CHARS)
        if not isinstance(max_scan, int) or isinstance(max_scan, bool) or max_scan <= 0:
            raise ConfigError("max_scan_chars must be a positive integer", key="max_scan_chars")
        self._max_scan = max_scan
        self._cache: dict[str, Hit | None] = {}
        #: The settings conditions of deny lists alone share to be checked as one (``union``,
        #: as ``PathMatcher.group_key``): every check but the deny list is the same for all
        #: of them. None with an allow list (what one allows, another may not).
        self.group_key: tuple[Any, ...] | None = None
        if deny and self._allow is None:
            self.group_key = ("urls", self._schemes, self._block_private, self._userinfo,
                              self._loopback, self._scan_text, self._max_scan)

    @classmethod
    def union(cls, matchers: Sequence[UrlMatcher]) -> UrlMatcher:
        """One condition of every denied domain of ``matchers`` (all of one ``group_key``):
        it finds nothing exactly when none of them would, since their other checks (scheme,
        address class, credentials, links in text) are the same and a URL is denied when its
        host matches one of the lists."""
        key = matchers[0].group_key
        if key is None or any(m.group_key != key for m in matchers):
            raise ValueError("only urls conditions of one group_key have a union")
        _, schemes, block_private, userinfo, loopback, scan_text, max_scan = key
        return cls({"deny_domains": [entry for m in matchers for entry in m._deny_entries],
                    "schemes": sorted(schemes), "block_private": block_private,
                    "allow_userinfo": userinfo, "allow_loopback": loopback,
                    "scan_text": scan_text, "max_scan_chars": max_scan})

    def __call__(self, subject: Subject) -> Hit | None:
        """Checks the tool's URL argument(s) and, with ``scan_text``, links in every string."""
        args = subject.call.args
        value = subject.profile.get(args, "url")
        more = not _EXTRA_URL_SET.isdisjoint(args)
        if type(value) is str and not more and not self._scan_text:
            hit = self._cache.get(value, _UNSEEN)  # the usual call: one URL, seen before
            if hit is not _UNSEEN:
                return hit  # type: ignore[no-any-return]
        if value is None and not more and subject.profile.kind == "http":
            return Hit("the http tool call has no URL argument", code="url.invalid")
        if value is not None:
            hit = self._check_value(value, strict=True)
            if hit is not None:
                return hit
        for name in _EXTRA_URL_ARGS if more else ():
            extra = args.get(name)
            if extra is not None and extra is not value:
                hit = self._check_value(extra, strict=False)
                if hit is not None:
                    return hit
        if self._scan_text:
            return self.check_text(args)
        return None

    def check_url(self, raw: Any) -> Hit | None:
        """Checks one URL string; returns the Hit, or None when the URL may be fetched."""
        if not isinstance(raw, str):
            return Hit(f"URL argument is a {type(raw).__name__}, not a string",
                       code="url.invalid")
        cache = self._cache
        hit = cache.get(raw, _UNSEEN)
        if hit is not _UNSEEN:
            return hit  # type: ignore[no-any-return]
        hit = self._verdict(raw)
        if len(cache) >= _CACHE_SIZE:
            del cache[next(iter(cache))]
        cache[raw] = hit
        return hit

    def check_text(self, value: Any) -> Hit | None:
        """Finds links in every string inside ``value`` (nested mappings and sequences too)
        and checks each; too much text or too many links is a ``url.invalid`` hit."""
        budget = [self._max_scan, MAX_URLS_PER_CALL]
        return self._scan(value, 0, budget)

    def _scan(self, value: Any, depth: int, budget: list[int]) -> Hit | None:
        if isinstance(value, str):
            budget[0] -= len(value)
            if budget[0] < 0:
                return Hit(f"more than {self._max_scan} characters of text to scan for links",
                           code="url.invalid")
            for url in find_urls(value):
                budget[1] -= 1
                if budget[1] < 0:
                    return Hit(f"more than {MAX_URLS_PER_CALL} links in one call",
                               code="url.invalid")
                hit = self.check_url(url)
                if hit is not None:
                    return hit
            return None
        if depth >= MAX_SCAN_DEPTH:
            return None
        if isinstance(value, Mapping):
            value = value.values()
        elif not isinstance(value, list | tuple | set | frozenset):
            return None
        for item in value:
            hit = self._scan(item, depth + 1, budget)
            if hit is not None:
                return hit
        return None

    def _check_value(self, value: Any, *, strict: bool) -> Hit | None:
        if isinstance(value, str):
            return self.check_url(value)
        if isinstance(value, list | tuple):
            if len(value) > MAX_URLS_PER_CALL:
                return Hit(f"more than {MAX_URLS_PER_CALL} URLs in one call", code="url.invalid")
            for item in value:
                if strict or isinstance(item, str):
                    hit = self.check_url(item)
                    if hit is not None:
                        return hit
            return None
        if strict:
            return Hit(f"URL argument is a {type(value).__name__}, not a string",
                       code="url.invalid")
        return None

    def _verdict(self, raw: str) -> Hit | None:
        shown = repr(raw if len(raw) <= 120 else raw[:117] + "...")
        try:
            info = analyze_url(raw)
        except InvalidUrl as e:
            return Hit(f"{shown}: {e}", code="url.invalid")
        if info.scheme:
            if info.scheme not in self._schemes:
                allowed = ", ".join(sorted(self._schemes))
                return Hit(f"{shown} uses the scheme {info.scheme!r}; allowed: {allowed}",
                           code="url.scheme")
        elif not self._schemes & {"http", "https"}:
            return Hit(f"{shown} has no scheme; allowed: {', '.join(sorted(self._schemes))}",
                       code="url.scheme")
        if not info.host:
            return None if info.scheme == "file" else Hit(f"{shown} has no host",
                                                          code="url.invalid")
        entry = self._deny.match(info)
        if entry is not None:
            return Hit(f"{shown} goes to {info.host}, which matches the denied domain {entry}",
                       code="url.denied_domain")
        if self._block_private and info.internal and not (self._loopback and info.is_loopback):
            return Hit(f"{shown} goes to an internal destination: {info.reason}",
                       code="url.private_address")
        allow = self._allow
        if allow is not None and allow.match(info) is None:
            note = f" (the part before '@', {info.userinfo!r}, is not the host)" if (
                info.userinfo) else ""
            return Hit(f"{shown} goes to {info.host}, which is not an allowed domain{note}",
                       code="url.not_allowed")
        if info.userinfo is not None and not self._userinfo:
            return Hit(f"{shown} carries credentials or a decoy before '@' "
                       f"({info.userinfo[:40]!r}); the host is {info.host}",
                       code="url.userinfo")
        return None
