"""Properties of entity normalization: spellings of one value normalize equal, a disguised or
altered value never does, and a value written in a text is extracted as its normal form."""

from __future__ import annotations

import datetime
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callwarden.analysis.entities import extract, is_rejected, normalize, registrable_domain, values_of

PROPERTY = settings(max_examples=200, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Latin letters and the Cyrillic or Greek letters drawn the same.
HOMOGLYPHS = {
    "a": "\u0430", "c": "\u0441", "e": "\u0435", "o": "\u043e", "p": "\u0440", "x": "\u0445",
    "y": "\u0443", "i": "\u0456", "j": "\u0458", "s": "\u0455", "k": "\u03ba", "v": "\u03bd",
    "t": "\u03c4", "n": "\u03b7", "u": "\u03c5", "b": "\u042c", "h": "\u04bb", "d": "\u0501",
    "m": "\u043c", "g": "\u0261", "l": "\u04cf", "q": "\u051b", "w": "\u0461", "r": "\u0433",
    "f": "\u0192", "z": "\u1d22",
}

INVISIBLES = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066",
              "\u180e", "\ufe0f", "\u034f", "\u3164", "\U000e0041", "\u061c", "\u115f"]

TLDS = ["com", "org", "net", "de", "fr", "ch", "co.uk", "com.au"]

WORDS = ["please", "send", "the", "report", "to", "and", "then", "call", "me", "today"]

label = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
local = st.from_regex(r"[a-z0-9](?:[a-z0-9._+-]{0,12}[a-z0-9])?", fullmatch=True).filter(
    lambda s: ".." not in s)
# Names on the public suffix list (x0.com is one, in its private section) are not domains.
domain = st.builds(lambda name, tld: f"{name}.{tld}", label.filter(lambda s: not s.isdigit()),
                   st.sampled_from(TLDS)).filter(lambda d: registrable_domain(d) == d)
host = st.builds(lambda subs, d: ".".join([*subs, d]), st.lists(label, max_size=2), domain)
email = st.builds(lambda lp, h: f"{lp}@{h}", local, host)
words = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)


def fullwidth(text: str, picks: list[bool]) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if pick and "!" <= ch <= "~" else ch
                   for ch, pick in zip(text, picks + [False] * len(text), strict=False))


def recase(text: str, picks: list[bool]) -> str:
    return "".join(ch.upper() if pick else ch
                   for ch, pick in zip(text, picks + [False] * len(text), strict=False))


def substitute(text: str, index: int) -> str | None:
    """text with the first homoglyph-able letter at or after index replaced, or None."""
    for i in [*range(index, len(text)), *range(index)]:
        if text[i] in HOMOGLYPHS:
            return text[:i] + HOMOGLYPHS[text[i]] + text[i + 1:]
    return None


def unequal(kind: str, altered: str, original: str) -> bool:
    known = normalize(kind, original)
    return known is not None and normalize(kind, altered) != known and known not in values_of(
        kind, altered)


# -- e-mail addresses -------------------------------------------------------------------------


@PROPERTY
@given(email, st.lists(st.booleans()), st.lists(st.booleans()), st.sampled_from(["", " ", "\t", "\n "]),
       st.sampled_from(["", "mailto:", "MailTo:"]), st.booleans())
def test_spellings_of_an_email_normalize_equal(address: str, cases: list[bool], wide: list[bool],
                                               space: str, mailto: str, angle: bool) -> None:
    spelled = mailto + fullwidth(recase(address, cases), wide)
    if angle:
        spelled = f"<{spelled}>"
    spelled = space + spelled + space
    assert normalize("emails", spelled) == normalize("emails", address) == address.lower()
    assert values_of("emails", spelled) == {address}


@PROPERTY
@given(email, st.integers(min_value=0, max_value=40))
def test_a_homoglyph_makes_another_email(address: str, index: int) -> None:
    altered = substitute(address, index)
    if altered is not None:
        assert unequal("emails", altered, address)


@PROPERTY
@given(email, st.integers(min_value=0, max_value=40), st.sampled_from(INVISIBLES))
def test_an_invisible_character_makes_no_email(address: str, index: int, invisible: str) -> None:
    i = index % (len(address) + 1)
    altered = address[:i] + invisible + address[i:]
    assert normalize("emails", altered) is None
    assert unequal("emails", altered, address)
    assert all(is_rejected(v) for v in values_of("emails", altered))


@PROPERTY
@given(email, st.integers(min_value=0, max_value=40))
def test_a_dropped_character_makes_another_email(address: str, index: int) -> None:
    i = index % len(address)
    assert unequal("emails", address[:i] + address[i + 1:], address)


@PROPERTY
@given(words, email, words, st.sampled_from(["", ".", ",", "!"]))
def test_an_email_in_a_text_is_extracted(before: str, address: str, after: str, punct: str) -> None:
    text = f"{before} {address}{punct} {after}"
    assert normalize("emails", address) in extract(text).emails
    assert normalize("emails", address) in values_of("emails", text)


# -- domains ----------------------------------------------------------------------------------


@PROPERTY
@given(domain, st.lists(label, max_size=2), st.lists(st.booleans()), st.lists(st.booleans()),
       st.sampled_from(["", "."]), st.sampled_from(["", " ", "\n"]))
def test_spellings_of_a_domain_normalize_equal(name: str, subs: list[str], cases: list[bool],
                                               wide: list[bool], dot: str, space: str) -> None:
    spelled = space + fullwidth(recase(".".join([*subs, name]), cases), wide) + dot + space
    assert normalize("domains", spelled) == normalize("domains", name) == name


@PROPERTY
@given(domain, st.integers(min_value=0, max_value=30))
def test_a_homoglyph_makes_another_domain(name: str, index: int) -> None:
    altered = substitute(name, index)
    if altered is not None:
        assert unequal("domains", altered, name)


@PROPERTY
@given(domain, st.integers(min_value=0, max_value=30), st.sampled_from(INVISIBLES))
def test_an_invisible_character_makes_no_domain(name: str, index: int, invisible: str) -> None:
    i = index % (len(name) + 1)
    altered = name[:i] + invisible + name[i:]
    assert normalize("domains", altered) is None
    assert unequal("domains", altered, name)


@PROPERTY
@given(domain, st.integers(min_value=0, max_value=30))
def test_a_dropped_character_makes_another_domain(name: str, index: int) -> None:
    i = index % len(name)
    assert unequal("domains", name[:i] + name[i + 1:], name)


@PROPERTY
@given(words, domain, words, st.sampled_from(["https://", "http://www.", ""]),
       st.sampled_from(["", "/", "/a/b?c=1"]))
def test_a_domain_in_a_text_is_extracted(before: str, name: str, after: str, scheme: str,
                                         path: str) -> None:
    text = f"{before} {scheme}{name}{path} {after}"
    assert name in extract(text).domains
    assert name in values_of("domains", text)


# -- URLs -------------------------------------------------------------------------------------


@PROPERTY
@given(host, st.sampled_from(["", "/", "/a/B", "/a?x=1"]), st.sampled_from(["http", "https"]),
       st.booleans(), st.booleans(), st.lists(st.booleans()))
def test_spellings_of_a_url_normalize_equal(name: str, path: str, scheme: str, port: bool,
                                            fragment: bool, cases: list[bool]) -> None:
    canonical = f"{scheme}://{name}{path or '/'}"
    spelled = (f"{recase(scheme, cases)}://{recase(name, cases[len(scheme):])}"
               f"{':443' if port and scheme == 'https' else ':80' if port else ''}"
               f"{path}{'#top' if fragment else ''}")
    assert normalize("urls", spelled) == canonical
    assert canonical in extract(f"see {spelled} now").urls


# -- IBANs and cards ----------------------------------------------------------------------------

BBAN = {"DE": (18, "0123456789"), "GB": (18, "0123456789"), "FR": (23, "0123456789"),
        "NL": (14, "0123456789"), "CH": (17, "0123456789"), "BE": (12, "0123456789")}


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country = draw(st.sampled_from(sorted(BBAN)))
    length, alphabet = BBAN[country]
    bban = draw(st.text(alphabet, min_size=length, max_size=length))
    if country == "GB":
        bban = draw(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=4, max_size=4)) + bban[4:]
    digits = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def grouped(compact: str) -> str:
    return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))


@PROPERTY
@given(ibans(), st.booleans(), st.booleans())
def test_spellings_of_an_iban_normalize_equal(iban: str, spaced: bool, lower: bool) -> None:
    spelled = grouped(iban) if spaced else iban
    spelled = spelled.lower() if lower else spelled
    assert normalize("ibans", spelled) == iban
    assert iban in extract(f"pay {grouped(iban)} today").ibans


@PROPERTY
@given(ibans(), st.integers(min_value=2), st.integers(min_value=1, max_value=9))
def test_one_changed_digit_makes_an_iban_invalid(iban: str, index: int, shift: int) -> None:
    digits = [i for i, ch in enumerate(iban) if ch.isdigit() and i >= 2]
    i = digits[index % len(digits)]
    altered = iban[:i] + str((int(iban[i]) + shift) % 10) + iban[i + 1:]
    assert normalize("ibans", altered) is None
    assert values_of("ibans", grouped(altered)) == {f"\x00rejected:{grouped(altered)}"}


def luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str(-total % 10)


cards = st.text("0123456789", min_size=14, max_size=14).map(lambda s: luhn_complete("4" + s)).filter(
    lambda s: len(set(s)) > 1)


@PROPERTY
@given(cards, st.sampled_from([" ", "-", ""]), st.integers(min_value=1), st.integers(1, 9))
def test_cards_normalize_and_one_changed_digit_is_invalid(card: str, sep: str, index: int,
                                                         shift: int) -> None:
    spelled = sep.join(card[i:i + 4] for i in range(0, 16, 4))
    assert normalize("cards", spelled) == card
    assert card in extract(f"card {spelled}, thanks").cards
    i = 1 + index % 15
    altered = card[:i] + str((int(card[i]) + shift) % 10) + card[i + 1:]
    assert normalize("cards", altered) is None


# -- phones, amounts, dates, quoted text ---------------------------------------------------------

phones = st.builds(lambda cc, groups: f"+{cc} " + " ".join(groups), st.sampled_from(["1", "33", "44", "49"]),
                   st.lists(st.from_regex(r"[1-9][0-9]{2,3}", fullmatch=True), min_size=3, max_size=3))


@PROPERTY
@given(words, phones, words)
def test_a_phone_in_a_text_is_extracted(before: str, phone: str, after: str) -> None:
    value = normalize("phones", phone)
    assert value == "+" + "".join(ch for ch in phone if ch.isdigit())
    assert value in extract(f"{before} {phone} {after}").phones
    assert normalize("phones", phone.replace(" ", "-")) == normalize("phones", "00" + phone[1:]) == value


AMOUNT_FORMS = ["\u20ac{n}", "{n} EUR", "EUR {n}", "{n}\u20ac", "{n} \u20ac"]


@PROPERTY
@given(words, st.decimals(min_value=0, max_value=999_999, places=2), st.sampled_from(AMOUNT_FORMS),
       st.booleans(), st.booleans(), words)
def test_an_amount_in_a_text_is_extracted(before: str, number: Decimal, form: str, comma: bool,
                                          grouping: bool, after: str) -> None:
    written = f"{number:,.2f}" if grouping else f"{number:.2f}"
    if comma:  # the European way: 1.234,56
        written = written.replace(",", "_").replace(".", ",").replace("_", ".")
    amount = form.format(n=written)
    value = normalize("amounts", amount)
    whole = number == number.to_integral_value()
    assert value == (f"{int(number)} EUR" if whole else f"{number:.2f} EUR")
    found = extract(f"{before} {amount} {after}").amounts
    assert value in found
    assert (str(int(number)) if whole else format(number.normalize(), "f")) in found


@PROPERTY
@given(words, st.dates(min_value=datetime.date(1900, 1, 1), max_value=datetime.date(2099, 12, 31)),
       st.sampled_from(["{iso}", "{d} {month} {y}", "{month} {d}, {y}", "{d} {mon} {y}"]), words)
def test_a_date_in_a_text_is_extracted(before: str, day: datetime.date, form: str,
                                       after: str) -> None:
    written = form.format(iso=day.isoformat(), d=day.day, y=day.year, month=day.strftime("%B"),
                          mon=day.strftime("%b"))
    assert normalize("dates", written) == day.isoformat()
    assert day.isoformat() in extract(f"{before} {written} {after}").dates


quoted_text = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .-",
                      min_size=1, max_size=60).filter(lambda s: s.strip() != "")


@PROPERTY
@given(words, quoted_text, st.sampled_from(['"{}"', "\u201c{}\u201d", "\u00ab{}\u00bb"]), words)
def test_quoted_text_is_extracted(before: str, content: str, quotes: str, after: str) -> None:
    value = normalize("quoted", content)
    assert value == " ".join(content.split()).casefold()
    assert value in extract(f"{before} {quotes.format(content)} {after}").quoted
    assert values_of("quoted", content.upper()) == {value}


# -- names ------------------------------------------------------------------------------------

given_name = st.sampled_from(["Ann", "Lee", "Zoë", "Łukasz", "Anne-Marie", "O'Neil", "José",
                              "Владимир", "Nguyễn", "Björk", "Siobhán", "Maria"])
person = st.lists(given_name, min_size=1, max_size=3).map(" ".join)


@PROPERTY
@given(person, st.lists(st.booleans()), st.sampled_from([" ", "  ", "\t"]), words, words)
def test_a_name_the_user_wrote_is_in_the_request_however_it_is_cased_or_spaced(
        name: str, cases: list[bool], space: str, before: str, after: str) -> None:
    spelled = space.join(recase(name, cases).split(" "))
    value = normalize("names", spelled)
    assert value == normalize("names", name) == name.casefold()
    assert value in extract(f"{before} {name} {after}").names
    assert value in extract(f"{before} {name.upper()}'s {after}").names  # a possessive too


@PROPERTY
@given(person, st.integers(min_value=0, max_value=40), words)
def test_a_look_alike_letter_never_makes_a_name_known_nor_unknown(name: str, index: int,
                                                                    after: str) -> None:
    altered = substitute(name, index % len(name))
    if altered is None or altered == name:
        return
    known = normalize("names", name)
    request = extract(f"please book {name} {after}")
    assert known in request.names  # the real name stays known ...
    # ... and the imitation is no name the user wrote (refused outright when it mixes scripts)
    assert not any(v in request.names for v in values_of("names", altered))
    assert known not in extract(f"please book {altered} {after}").names


@PROPERTY
@given(person, person, words)
def test_only_the_words_in_a_row_are_a_name_of_the_request(first: str, second: str,
                                                           after: str) -> None:
    request = extract(f"book {first} and {second} {after}")
    joined = normalize("names", f"{first} {second}")
    assert joined is not None and joined not in request.names  # "and" stands between them
    assert normalize("names", first) in request.names
