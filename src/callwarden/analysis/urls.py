"""URL analysis: what host a URL really names, and the links inside free text.

``analyze_url`` reads a URL the way a browser (WHATWG) would, and refuses the ones that
browsers and HTTP libraries read differently (a ``\\`` in the authority, several ``@``, one or
three slashes after ``http:``): an ambiguous URL is one where the policy could check one host
and the tool connect to another. Hosts are IDNA-normalized (fullwidth letters and dots fold to
ASCII, ``bücher.de`` is ``xn--bcher-kva.de``); every IPv4 spelling (``2130706433``,
``0x7f000001``, ``0177.0.0.1``, ``127.1``) becomes one address, and IPv6 forms that embed an
IPv4 address (``::ffff:127.0.0.1``, 6to4, NAT64) are judged by that address too.

No DNS lookup is made: a public name that resolves to a private address (DNS rebinding) must
be stopped by the HTTP client pinning the address it checked.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from encodings import idna as _idna
from functools import lru_cache
from urllib.parse import unquote

from callwarden.exceptions import InvalidUrl

__all__ = ["MAX_SCAN_CHARS", "MAX_SCAN_DEPTH", "MAX_URLS_PER_CALL", "InvalidUrl", "UrlInfo",
           "analyze_url", "find_urls"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


MAX_URL_CHARS = 16384


MAX_URLS_PER_CALL = 256


MAX_SCAN_CHARS = 1_000_000


MAX_SCAN_DEPTH = 16


_CACHE_SIZE = 4096


_SPECIAL = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21, "file": None}


_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


_STRIP_CHARS = "".join(chr(c) for c in range(0x21))


_REMOVE_TAB_NL = str.maketrans("", "", "\t\n\r")


_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


_IPV4ISH_RE = re.compile(r"(?:0[xX][0-9A-Fa-f]*|[0-9]+)")


_EMBEDDED_IP_RE = re.compile(
    r"(?:^|[.-])(\d{1,3})[.-](\d{1,3})[.-](\d{1,3})[.-](\d{1,3})(?:[.-]|$)")


# Names that reach the local machine, the local network or a cloud metadata service.
_INTERNAL_NAMES = frozenset({
    "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "metadata",
    "metadata.google.internal", "instance-data", "instance-data.ec2.internal",
    "metadata.azure.com", "kubernetes", "kubernetes.default",
})


_INTERNAL_SUFFIXES = ("localhost", "internal", "local", "lan", "home.arpa", "intranet",
                      "corp", "private", "localdomain", "cluster.local")


# Wildcard-DNS services: the name resolves to the address spelled inside it (rebinding).
_LOOPBACK_SERVICES = ("localtest.me", "lvh.me", "vcap.me", "lacolhost.com", "localhost.run")


_IP_IN_NAME_SERVICES = ("nip.io", "sslip.io", "xip.io", "traefik.me", "nip.direct")


_INTERNAL_ENDINGS = tuple("." + s for s in _INTERNAL_SUFFIXES)


_LOOPBACK_ENDINGS = tuple("." + s for s in _LOOPBACK_SERVICES)


_IP_IN_NAME_ENDINGS = tuple("." + s for s in _IP_IN_NAME_SERVICES)


# Cloud metadata addresses outside the link-local range.
_METADATA_IPS = frozenset({ipaddress.ip_address("100.100.100.200"),
                           ipaddress.ip_address("fd00:ec2::254")})


@dataclass(frozen=True, slots=True)
class UrlInfo:
    """One analysed URL.

    Attributes:
        raw: the URL as given.
        scheme: lower-case scheme; ``""`` when the text had none (``www.example.com``).
        host: ASCII host (punycode, lower case, no trailing dot); IPs in canonical form.
        port: explicit port, or None.
        userinfo: the ``user:password`` part before ``@``, or None.
        rest: path, query and fragment.
        ip: the address when the host is an IP literal (any spelling), else None.
        embedded_ip: the IPv4 address inside an IPv6 one (mapped, 6to4, NAT64), else None.
        internal: the host is not a public Internet destination: loopback, private,
            link-local (cloud metadata), multicast, reserved, unspecified, ``localhost``,
            a single-label name, an internal suffix, or a wildcard-DNS name for such an address.
        reason: why ``internal`` is set (for messages).
    """

    raw: str
    scheme: str
    host: str
    port: int | None = None
    userinfo: str | None = None
    rest: str = ""
    ip: IPAddress | None = None
    embedded_ip: ipaddress.IPv4Address | None = None
    internal: bool = False
    reason: str = ""

    @property
    def is_loopback(self) -> bool:
        """The host is a loopback address (or the name ``localhost``)."""
        if self.ip is None:
            return self.host == "localhost" or self.host.endswith(".localhost")
        return self.ip.is_loopback or bool(self.embedded_ip and self.embedded_ip.is_loopback)

    @property
    def is_private(self) -> bool:
        """The host is an address in a private range (RFC 1918, ULA ...)."""
        return _flag(self, "is_private")

    @property
    def is_link_local(self) -> bool:
        """The host is link-local (``169.254.0.0/16``: where cloud metadata lives)."""
        return _flag(self, "is_link_local")

    @property
    def is_multicast(self) -> bool:
        """The host is a multicast address."""
        return _flag(self, "is_multicast")

    @property
    def is_reserved(self) -> bool:
        """The host is a reserved address."""
        return _flag(self, "is_reserved")


def _flag(info: UrlInfo, name: str) -> bool:
    if info.ip is None:
        return False
    return bool(getattr(info.ip, name)) or bool(
        info.embedded_ip is not None and getattr(info.embedded_ip, name))


def analyze_url(raw: str) -> UrlInfo:
    """Parses and normalizes one URL (cached).

    Raises:
        InvalidUrl: when the URL is malformed or ambiguous between parsers.
    """
    if not isinstance(raw, str):
        raise InvalidUrl(f"URL is a {type(raw).__name__}, not a string")
    return _analyze(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _analyze(raw: str) -> UrlInfo:
    if len(raw) > MAX_URL_CHARS:
        raise InvalidUrl(f"URL is longer than {MAX_URL_CHARS} characters")
    text = raw.strip(_STRIP_CHARS)
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.translate(_REMOVE_TAB_NL)
    if not text:
        raise InvalidUrl("URL is empty")
    scheme = ""
    m = _SCHEME_RE.match(text)
    rest = text
    if m and not _looks_like_host_port(m.group(1), text[m.end():]):
        scheme = m.group(1).lower()
        rest = text[m.end():]
        if scheme not in _SPECIAL and not rest.startswith("//"):
            return UrlInfo(raw, scheme, "", rest=rest)  # mailto:, data:, javascript: ...
    elif not text.startswith(("//", "\\\\", "/\\", "\\/")):
        rest = "//" + text
    slashes = len(rest) - len(rest.lstrip("/\\"))
    if "\\" in rest[:slashes]:
        raise InvalidUrl("a backslash after the scheme is read as '/' by browsers only")
    if scheme == "file":
        return _file_url(raw, rest)
    if slashes != 2:
        raise InvalidUrl(f"{slashes} slashes after '{scheme or 'the scheme'}:' "
                         "are read differently by browsers and HTTP libraries")
    rest = rest[2:]
    end = len(rest)
    for ch in "/?#\\":
        i = rest.find(ch)
        if i != -1 and i < end:
            end = i
    if end < len(rest) and rest[end] == "\\":
        raise InvalidUrl("a backslash in the authority is read as '/' by browsers only")
    authority, tail = rest[:end], rest[end:]
    userinfo = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
        if "@" in userinfo:
            raise InvalidUrl("several '@' in the authority: parsers disagree on the host")
    host, port = _split_port(authority)
    host, ip, embedded = _normalize_host(host)
    if not host:
        raise InvalidUrl("URL has no host")
    internal, reason = _internal(host, ip, embedded)
    return UrlInfo(raw, scheme, host, port, userinfo, tail, ip, embedded, internal, reason)


def _looks_like_host_port(candidate: str, after: str) -> bool:
    # "localhost:8080/x" and "example.com:443" are host:port, not a scheme.
    return "." in candidate or (after[:1].isdigit() and not after.startswith("//"))


def _file_url(raw: str, rest: str) -> UrlInfo:
    rest = rest.replace("\\", "/")
    if rest.startswith("//"):
        host, _, tail = rest[2:].partition("/")
        host = host.lower()
        if host in ("", "localhost"):
            return UrlInfo(raw, "file", "", rest="/" + tail)
        host, ip, embedded = _normalize_host(host)
        internal, reason = _internal(host, ip, embedded)
        return UrlInfo(raw, "file", host, None, None, "/" + tail, ip, embedded, internal, reason)
    return UrlInfo(raw, "file", "", rest=rest)


def _split_port(authority: str) -> tuple[str, int | None]:
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise InvalidUrl("unterminated IPv6 literal")
        host, after = authority[: close + 1], authority[close + 1:]
        if not after:
            return host, None
        if not after.startswith(":"):
            raise InvalidUrl("junk after the IPv6 literal")
        port_text = after[1:]
    elif ":" in authority:
        host, _, port_text = authority.partition(":")
    else:
        return authority, None
    if port_text == "":
        return host, None
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidUrl(f"invalid port {port_text[:20]!r}")
    return host, int(port_text)


def _normalize_host(host: str) -> tuple[str, IPAddress | None, ipaddress.IPv4Address | None]:
    if host.startswith("["):
        inner = unquote(host[1:-1]).partition("%")[0]  # drop an IPv6 zone id
        try:
            v6 = ipaddress.IPv6Address(inner)
        except ValueError as e:
            raise InvalidUrl(f"invalid IPv6 address {inner[:60]!r}") from e
        embedded = v6.ipv4_mapped or v6.sixtofour
        if embedded is None and (v6 in _NAT64 or (v6 in _V4_COMPAT and int(v6) > 1)):
            embedded = ipaddress.IPv4Address(int(v6) & 0xFFFFFFFF)
        return str(v6), v6, embedded
    if "%" in host:
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError as e:
            raise InvalidUrl("the host is percent-encoded bytes that are not UTF-8") from e
    if not host.isascii():
        host = unicodedata.normalize("NFKC", host.translate(_DOTS)).translate(_DOTS)
    host = host.lower().rstrip(".")
    if not host:
        return "", None, None
    last = host.rsplit(".", 1)[-1]
    if _IPV4ISH_RE.fullmatch(last):
        v4 = _parse_ipv4(host)
        return str(v4), v4, None
    if not host.isascii():
        host = _to_ascii(host)
    for label in host.split("."):
        if not _LABEL_RE.fullmatch(label):
            raise InvalidUrl(f"invalid host name {host[:80]!r}")
    if len(host) > 253:
        raise InvalidUrl("host name is longer than 253 characters")
    return host, None, None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


_V4_COMPAT = ipaddress.IPv6Network("::/96")


def _to_ascii(host: str) -> str:
    labels = []
    for label in host.split("."):
        if label.isascii():
            labels.append(label)
            continue
        try:
            labels.append(_idna.ToASCII(label).decode("ascii").lower())
        except (UnicodeError, ValueError) as e:
            raise InvalidUrl(f"host {host[:80]!r} is not a valid international name") from e
    return ".".join(labels)


def _parse_ipv4(host: str) -> ipaddress.IPv4Address:
    """WHATWG IPv4 parsing: 1-4 parts, each decimal, 0x-hex or 0-octal; the last fills the rest."""
    parts = host.split(".")
    if len(parts) > 4:
        raise InvalidUrl(f"{host[:80]!r} is neither a host name nor an IPv4 address")
    nums = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                nums.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part[0] == "0":
                nums.append(int(part[1:], 8))
            else:
                nums.append(int(part, 10))
        except ValueError as e:
            raise InvalidUrl(f"{host[:80]!r} is not a valid IPv4 address") from e
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        raise InvalidUrl(f"{host[:80]!r} is out of the IPv4 range")
    value = nums[-1]
    for i, n in enumerate(nums[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _internal(host: str, ip: IPAddress | None,
              embedded: ipaddress.IPv4Address | None) -> tuple[bool, str]:
    if ip is not None:
        for addr in (embedded, ip):
            if addr is None:
                continue
            if addr in _METADATA_IPS:
                return True, f"{addr} is a cloud metadata address"
            if addr.is_link_local:
                return True, f"{addr} is link-local (where cloud metadata services live)"
            if addr.is_loopback:
                return True, f"{addr} is a loopback address"
            if addr.is_multicast or not addr.is_global:
                return True, f"{addr} is not a public address"
        return False, ""
    if host in _INTERNAL_NAMES:
        return True, f"{host!r} is a local or metadata host name"
    if "." not in host:
        return True, f"{host!r} is a single-label (local network) name"
    if host.endswith(_INTERNAL_ENDINGS):
        return True, f"{host!r} is under an internal-only domain"
    dotted = "." + host
    if dotted.endswith(_LOOPBACK_ENDINGS):
        return True, f"{host!r} resolves to the loopback address"
    if not dotted.endswith(_IP_IN_NAME_ENDINGS):
        return False, ""
    for service in _IP_IN_NAME_SERVICES:
        if dotted.endswith("." + service):
            m = _EMBEDDED_IP_RE.search(host[: -len(service)])
            if m is None:
                return True, f"{host!r} is a wildcard-DNS name with no readable address"
            try:
                addr = ipaddress.IPv4Address(".".join(m.groups()))
            except ValueError:
                return True, f"{host!r} is a wildcard-DNS name with no readable address"
            if not addr.is_global:
                return True, f"{host!r} resolves to {addr}, not a public address"
    return False, ""


_URL_BODY = re.compile(r"[^\s<>\"'`]+")


_MD_TARGET = re.compile(r"\s*<?([^)\s>]+)")


_ATTR_VALUE = re.compile(r"\s*=\s*[\"']?([^\"'\s>]+)")


_REF_DEF = re.compile(r"^[ ]{0,3}\[[^\]\n]+\]:[ \t]*<?([^\s>]+)", re.MULTILINE)


_BARE_DOMAIN_RE = re.compile(r"[\w\-]+(?:\.[\w\-]+)+(?::\d+)?", re.UNICODE)


_TRAILING_PUNCT = ".,;:!?'\")]}>*_"


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


_HOST_CHARS = _WORD_CHARS | frozenset(".@/-")


_SCHEME_CHARS = (_WORD_CHARS - {"_"}) | frozenset("+.-")


_LINK_ATTRS = ("href", "src", "action")


# A markdown link target "README.md" is a file, not the Moldovan domain readme.md.
_FILE_EXTENSIONS = frozenset({
    "md", "py", "js", "ts", "txt", "json", "yaml", "yml", "html", "htm", "sh", "rs", "go", "rb",
    "css", "png", "jpg", "jpeg", "gif", "svg", "pdf", "toml", "cfg", "ini", "lock", "log", "csv",
    "xml", "zip", "gz", "tar", "java", "kt", "c", "h", "cpp", "hpp", "cs", "php", "pl", "ipynb",
    "rst", "tsx", "jsx", "vue", "sql", "env", "conf", "mdx", "webp", "ico",
})


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Top-level domains a bare ``name.tld`` in free text is read as a link for: the common gTLDs
# (old and the cheap ones phishing favours) and every two-letter country code.
_GTLDS = _words("""
    com net org edu gov mil int info biz name pro mobi asia tel travel jobs aero coop museum
    app dev page xyz online site top shop store tech live club icu vip work link click win bid
    loan space fun today world life email cloud blog news host website zone tools one best
    guru ninja social media studio design photo video games team tips city wiki kim wang red
    blue pink black gold market money finance capital fund cash pay bank insurance credit loans
    tax legal law health care clinic academy education school events tickets hotel cafe bio
    energy auto car taxi fit golf cool fyi how new now here day foo zip mov support help
    services solutions agency company center network systems digital global group ltd gmbh
    inc llc sbs cfd cyou quest lol run buzz monster rest bar party review stream download
    racing date faith science trade webcam men xin gdn lat style show rocks art eco
""")


_CCTLDS = _words("""
    ac ad ae af ag ai al am ao aq ar as at au aw ax az ba bb bd be bf bg bh bi bj bm bn bo bq
    br bs bt bw by bz ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz de dj dk dm do
    dz ec ee eg er es et eu fi fj fk fm fo fr ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs gt
    gu gw gy hk hm hn hr ht hu id ie il im in io iq ir is it je jm jo jp ke kg kh ki km kn kp
    kr kw ky kz la lb lc li lk lr ls lt lu lv ly ma mc md me mg mh mk ml mm mn mo mp mq mr ms
    mt mu mv mw mx my mz na nc ne nf ng ni nl no np nr nu nz om pa pe pf pg ph pk pl pm pn pr
    ps pt pw py qa re ro rs ru rw sa sb sc sd se sg sh si sk sl sm sn so sr ss st su sv sx sy
    sz tc td tf tg th tj tk tl tm tn to tr tt tv tw tz ua ug uk us uy uz va vc ve vg vi vn vu
    wf ws ye yt za zm zw
""")


_TLDS = _GTLDS | _CCTLDS


# TLDs that are also file extensions (README.md, main.py, run.sh, Makefile.am), short words
# (it, is, in, to, do) or common attribute names in code (user.id, logger.info, self.name,
# google.cloud): a bare word ending in one is a link only with a path (evil.sh/x) or www.
_AMBIGUOUS_TLDS = _FILE_EXTENSIONS | _words("""
    ac am as be by cc cv do id in io is it md mk ml mo no pl pm ps py re rs sh so st tf to
    zip mov app page name email info link site date live style show host new now one run
    cloud day here how fun art red blue black pink gold bar rest men lol win bid work tools
    zone tips team media design photo video games city wiki market money cash pay tax law care
    center network systems group events stream review download science trade party rocks
    today world life news space bio eco fit cool best foo tech help support services
""")


_HOST_TOKEN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


_ALNUM = _WORD_CHARS - {"_"}


_PORT_RE = re.compile(r":[0-9]{1,5}(?![0-9A-Za-z])")


_DOT_RE = re.compile(r"\.[A-Za-z0-9]")


def _bare_links(text: str, found: list[str], seen: list[tuple[int, int]]) -> None:
    """Appends ``name.tld`` links written without a scheme: with a path (``bit.ly/3xYz``)
    for any known TLD, standing alone as a word for an unambiguous one. ``seen`` holds the
    spans of links already found, which are not looked at again."""
    n = len(text)
    seen.sort()
    k = 0
    # Only a dot followed by a letter or digit can start a name: prose's "done. Next" never
    # reaches Python code (the regex starts with a literal, so it is a fast C scan).
    m = _DOT_RE.search(text)
    while m is not None:
        i = m.start()
        end = i + 1
        while k < len(seen) and seen[k][1] <= i:
            k += 1
        if k < len(seen) and seen[k][0] <= i:
            end = seen[k][1]
        elif i > 0 and text[i - 1] in _ALNUM:
            start = i - 1
            while start > 0 and text[start - 1] in _HOST_TOKEN:
                start -= 1
            while end < n and text[end] in _HOST_TOKEN:
                end += 1
            url = _bare_link(text, start, end)
            if url is not None and url not in found:
                found.append(url)
        m = _DOT_RE.search(text, end)


def _bare_link(text: str, start: int, end: int) -> str | None:
    # After '/', '@' or '\\' the name is part of a URL, path or e-mail address found elsewhere.
    if start > 0 and text[start - 1] in "/@\\":
        return None
    host = text[start:end].rstrip(".-")
    end = start + len(host)
    labels = host.split(".")
    tld = labels[-1]
    low = tld.lower()
    # A dotted quad counts only with a path (169.254.169.254/latest): alone it may be a version.
    quad = len(labels) == 4 and all(label.isdigit() and len(label) <= 3 for label in labels)
    if not quad and (len(labels) < 2 or low not in _TLDS or "_" in host or len(host) > 253
                     or any(not label or label[0] == "-" or label[-1] == "-" or len(label) > 63
                            for label in labels)):
        return None
    if host[:4].lower() == "www.":
        return None  # found by the www. scan
    n = len(text)
    port = _PORT_RE.match(text, end) if end < n and text[end] == ":" else None
    if port is not None:
        end = port.end()
    if end < n - 1 and text[end] in "/?#" and not text[end + 1].isspace():
        body = _URL_BODY.match(text, end)
        if body is not None:
            rest = _trim(body.group())
            if rest and rest != "/":
                return text[start:end] + rest
    if quad or low in _AMBIGUOUS_TLDS or (tld[0].isupper() and not tld.isupper()):
        # "done.Next" is a sentence end; "README.md" a file name.
        return None
    if end < n and text[end] in "([=":
        return None  # code: datetime.now(), obj.attr = ...
    return text[start:end]


def find_urls(text: str) -> list[str]:
    """Returns the link targets in free text: ``scheme://`` URLs, ``www.`` names, markdown and
    HTML link targets (relative links and ``mailto:``-style targets are skipped), and names
    without a scheme: ``bit.ly/3xYz`` (a known TLD and a path) or ``evil-login.com`` alone
    (a TLD that is not also a file extension or a common word, e.g. not ``README.md``)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    found: list[str] = []
    seen: list[tuple[int, int]] = []
    # Anchors are found with str.find: a regex trying every position costs ten times more.
    i = text.find("://")
    while i != -1:
        start = i
        while start > 0 and i - start < 32 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < i and not text[start].isalpha():
            start += 1
        body = _URL_BODY.match(text, i + 3)
        if start < i and body is not None:
            found.append(_trim(text[start:body.end()]))
            seen.append((start, body.end()))
            i = body.end() - 3
        i = text.find("://", i + 3)
    lowered = text.lower()
    i = lowered.find("www.")
    while i != -1:
        if i == 0 or lowered[i - 1] not in _HOST_CHARS:
            body = _URL_BODY.match(text, i)
            if body is not None:
                found.append(_trim(body.group()))
                seen.append((i, body.end()))
        i = lowered.find("www.", i + 4)
    targets: list[str] = []
    i = text.find("](")
    while i != -1:
        m = _MD_TARGET.match(text, i + 2)
        if m is not None:
            targets.append(m.group(1))
        i = text.find("](", i + 2)
    if "]:" in text:
        targets.extend(m.group(1) for m in _REF_DEF.finditer(text))
    if "=" in text:
        for attr in _LINK_ATTRS:
            i = lowered.find(attr)
            while i != -1:
                if i == 0 or lowered[i - 1] not in _WORD_CHARS:
                    m = _ATTR_VALUE.match(text, i + len(attr))
                    if m is not None:
                        targets.append(m.group(1))
                i = lowered.find(attr, i + len(attr))
    for target in targets:
        url = _link_target(_trim(target))
        if url is not None:
            found.append(url)
    if "." in text:
        _bare_links(text, found, seen)
    return found


def _link_target(target: str) -> str | None:
    """A markdown / HTML link target that names a network destination, else None."""
    if target.startswith("//"):
        return target
    scheme = _SCHEME_RE.match(target)
    if scheme and not _looks_like_host_port(scheme.group(1), target[scheme.end():]):
        # scheme:// targets were found above; mailto:, data:, javascript: go nowhere.
        return None
    head = re.split(r"[/?#]", target, maxsplit=1)[0]
    if not _BARE_DOMAIN_RE.fullmatch(head):
        return None
    tld = head.rsplit(":", 1)[0].rsplit(".", 1)[-1].lower()
    if tld.isdigit() or (tld.isalpha() and len(tld) >= 2 and (
            tld not in _FILE_EXTENSIONS or len(head) < len(target))):
        return target
    return None


def _trim(url: str) -> str:
    while url and url[-1] in _TRAILING_PUNCT:
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url
