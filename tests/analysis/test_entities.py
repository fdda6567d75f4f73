"""Request entities: what each kind normalizes to, the look-alikes that must stay strangers,
and the bounds on hostile text."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import unicodedata

import pytest

from callwarden.analysis.entities import (
    KINDS,
    MAX_PER_KIND,
    MAX_TEXT_CHARS,
    REJECTED_PREFIX,
    Entities,
    extract,
    is_rejected,
    normalize,
    registrable_domain,
    values_of,
)
from callwarden.analysis.entities._text import _INVISIBLE_RE

ZWSP = "\u200b"


def rejected(raw: str) -> str:
    return REJECTED_PREFIX + raw


# -- the API ----------------------------------------------------------------------------------


def test_entities_fields_are_the_kinds() -> None:
    assert tuple(f.name for f in dataclasses.fields(Entities)) == KINDS


@pytest.mark.parametrize("call", [
    lambda: Entities().of("email"),
    lambda: normalize("mails", "a@b.com"),
    lambda: values_of("ip", "1.2.3.4"),
])
def test_an_unknown_kind_is_an_error(call: object) -> None:
    with pytest.raises(ValueError, match="unknown entity kind"):
        call()  # type: ignore[operator]


def test_entities_are_frozen_hashable_and_serializable() -> None:
    found = extract("Mail b@x.com and a@x.com on 2026-03-12.")
    assert found.of("emails") == frozenset({"a@x.com", "b@x.com"})
    assert found.as_dict()["emails"] == ["a@x.com", "b@x.com"]
    assert list(found.as_dict()) == [k for k in KINDS if k != "names"]  # runs of words: no list
    assert json.loads(json.dumps(found.as_dict()))["dates"] == ["2026-03-12"]
    assert hash(found) == hash(extract("Mail b@x.com and a@x.com on 2026-03-12."))
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.emails = frozenset()  # type: ignore[misc]


def test_extract_of_nothing_is_empty() -> None:
    assert extract(None) == extract("") == Entities()
    plain = extract("nothing to see here")
    assert dataclasses.replace(plain, names=Entities().names) == Entities()
    assert "see here" in plain.names and "here nothing" not in plain.names  # only its words


def test_extract_reads_a_text_once() -> None:
    from callwarden.analysis.entities import _extract
    text = "Send the report to ann@acme.com (request 7f3a)."
    first = extract(text)
    hits = _extract.cache_info().hits
    assert extract(text) is first
    assert _extract.cache_info().hits == hits + 1
    assert _extract.cache_info().maxsize == 256


def test_values_of_accepts_numbers() -> None:
    assert values_of("amounts", 120.5) == {"120.5"}
    assert values_of("amounts", 1200) == {"1200"}
    assert normalize("amounts", 120.50) == "120.5"
    assert normalize("amounts", float("nan")) is None
    assert values_of("emails", True) == frozenset()  # type: ignore[arg-type]


# -- e-mail addresses -------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("John.Doe@Example.COM", "john.doe@example.com"),
    ("  john@x.com\n", "john@x.com"),
    ("mailto:John@X.com", "john@x.com"),
    ("MAILTO:john@x.com?subject=hi", "john@x.com"),
    ("<john@x.com>", "john@x.com"),
    ("<mailto:john@x.com>", "john@x.com"),
    ("\uff4a\uff4f\uff48\uff4e\uff20\uff58\uff0e\uff43\uff4f\uff4d", "john@x.com"),  # fullwidth
    ("a+tag@b.com", "a+tag@b.com"),
    ("john@x.com.", "john@x.com"),
    ("o'brien@x.com", "o'brien@x.com"),
    ("ann@b\u00fccher.de", "ann@xn--bcher-kva.de"),
    ("ann@B\u00dcCHER.de", "ann@xn--bcher-kva.de"),
])
def test_email_normal_forms(raw: str, expected: str) -> None:
    assert normalize("emails", raw) == expected


@pytest.mark.parametrize("raw", [
    "john", "john@", "@x.com", "john@localhost", "john@1.2.3.4", "john@[1.2.3.4]",
    "jo hn@x.com", ".john@x.com", "john.@x.com", "jo..hn@x.com", "a@b@x.com",
    "jo\u200bhn@x.com", "john@x\u00ad.com", "\u202ejohn@x.com", "john@x.com\ufeff",
    "ann@fa\u00df.de",  # IDNA 2003 would fold it to fass.de, another domain
    "evil{john@x.com", "x" * 65 + "@x.com",
])
def test_not_an_email(raw: str) -> None:
    assert normalize("emails", raw) is None


@pytest.mark.parametrize("lookalike", [
    "j\u043ehn@x.com",  # Cyrillic o
    "j\u03bfhn@x.com",  # Greek omicron
    "john@\u0445.com",  # Cyrillic x in the domain
    "john@x.co",
    "john+x@x.com",
    "johnn@x.com",
])
def test_email_lookalikes_stay_different(lookalike: str) -> None:
    assert normalize("emails", lookalike) != "john@x.com"
    assert "john@x.com" not in values_of("emails", lookalike)


def test_a_substring_is_never_the_address() -> None:
    assert normalize("emails", "n.doe@x.com") != normalize("emails", "john.doe@x.com")
    for text in ("evil{john.doe@x.com", "jo\u200bhn.doe@x.com", "a" * 400 + "john.doe@x.com",
                 'x"john.doe@x.com', "x\\john.doe@x.com", 'say "x"john.doe@x.com'):
        found = values_of("emails", text)
        assert "john.doe@x.com" not in found, text
        assert found and all(is_rejected(v) for v in found), text
    # An apostrophe or a non-Latin letter may be part of an address: the whole is another one.
    assert values_of("emails", "evil'john.doe@x.com") == {"evil'john.doe@x.com"}
    assert values_of("emails", "x\u0439john.doe@x.com") == {"x\u0439john.doe@x.com"}


def test_email_lists_in_an_argument() -> None:
    assert values_of("emails", "Ann <ANN@acme.com>, bob@x.com; mailto:c@d.org") == {
        "ann@acme.com", "bob@x.com", "c@d.org"}
    assert values_of("emails", '"Doe, John" <j@x.com>') == {"j@x.com"}
    assert values_of("emails", '["a@b.com", "C@d.com"]') == {"a@b.com", "c@d.com"}
    assert values_of("emails", "ann@acme.com") == {"ann@acme.com"}


def test_an_unreadable_address_in_a_list_is_a_rejected_marker() -> None:
    found = values_of("emails", f"ann@acme.com, jo{ZWSP}hn@x.com, bob@localhost")
    assert "ann@acme.com" in found
    assert rejected(f"jo{ZWSP}hn@x.com") in found
    assert rejected("john@x.com") in found  # what it says once the invisible is dropped
    assert rejected("bob@localhost") in found
    assert "john@x.com" not in found


def test_emails_in_prose() -> None:
    text = ("Write to **Ann.Lee@Acme.com**, 'bob@x.org' and (carl@y.net). Ask jane@z.io. "
            "Not @handles, not logo@2x, not user@host.")
    assert extract(text).emails == {"ann.lee@acme.com", "bob@x.org", "carl@y.net", "jane@z.io"}


# -- domains -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "expected"), [
    ("acme.com", "acme.com"),
    ("Mail.Acme.COM.", "acme.com"),
    ("a.b.c.acme.co.uk", "acme.co.uk"),
    ("alice.github.io", "alice.github.io"),  # the private section: a site of its own
    ("b\u00fccher.de", "xn--bcher-kva.de"),
    ("\uff41\uff43\uff4d\uff45\uff0e\uff43\uff4f\uff4d", "acme.com"),
    ("co.uk", None),
    ("com", None),
    ("localhost", None),
    ("10.0.0.1", None),
    ("ac\u200bme.com", None),
    ("fa\u00df.de", None),
    ("https://acme.com", None),  # a host name, not a URL
])
def test_registrable_domain(host: str, expected: str | None) -> None:
    assert registrable_domain(host) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("acme.com", "acme.com"),
    ("www.Acme.com:8080", "acme.com"),
    ("https://docs.acme.co.uk/x?y#z", "acme.co.uk"),
    ("ann@mail.acme.com", "acme.com"),
    ("mailto:ann@acme.com", "acme.com"),
    ("http://127.0.0.1/", None),
    ("readme", None),
])
def test_domain_of_a_value(raw: str, expected: str | None) -> None:
    assert normalize("domains", raw) == expected


def test_domains_of_a_request() -> None:
    found = extract("Mail ann@mail.acme.com, read https://docs.python.org/3/ and evil-login.com; "
                    "see README.md and main.py")
    assert found.domains == {"acme.com", "python.org", "evil-login.com"}


def test_domains_glued_to_their_neighbours_are_not_the_domain() -> None:
    for text in (f"evil{ZWSP}acme.com", f"acme.com{ZWSP}.evil.io",
                 f"see evil{ZWSP}acme.com today"):
        found = values_of("domains", text)
        assert "acme.com" not in found, text
        assert any(is_rejected(v) for v in found), text
    assert values_of("domains", "xacme.com") == {"xacme.com"}
    assert values_of("domains", "evil\u0430acme.com") == {"xn--evilacme-46g.com"}
    assert "acme.com" not in extract(f"visit evil{ZWSP}acme.com").domains


def test_domains_of_an_argument_err_toward_more() -> None:
    assert values_of("domains", "acme.io, b.example.com and main.py") == {
        "acme.io", "example.com", "main.py"}
    assert values_of("domains", "version 1.2.3, e.g. this") == frozenset()


# -- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("HTTPS://Example.COM", "https://example.com/"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("http://example.com:8080/a?b=1#frag", "http://example.com:8080/a?b=1"),
    ("http://example.com?q", "http://example.com/?q"),
    ("www.acme.com/x", "https://www.acme.com/x"),
    ("https://user@acme.com/", "https://user@acme.com/"),
    ("https://b\u00fccher.de/Stra\u00dfe", "https://xn--bcher-kva.de/Stra\u00dfe"),
    ("http://0x7f000001/", "http://127.0.0.1/"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
])
def test_url_normal_forms(raw: str, expected: str) -> None:
    assert normalize("urls", raw) == expected


@pytest.mark.parametrize("raw", [
    "mailto:a@b.com", "javascript:alert(1)", "file:///etc/passwd", "hello",
    "http:\\\\evil.com", "http://a@b@evil.com/", "https://exa\u200bmple.com/",
    "https://exa%E2%80%8Bmple.com/", "https://fa\u00df.de/",
])
def test_not_a_url(raw: str) -> None:
    assert normalize("urls", raw) is None


def test_urls_in_text() -> None:
    found = extract("Docs at [the guide](https://Docs.Acme.com/guide#intro), <http://b.com>. "
                    "Also www.c.org.")
    assert found.urls == {"https://docs.acme.com/guide", "http://b.com/", "https://www.c.org/"}
    assert values_of("urls", f"x https://a.com/ and evil{ZWSP}https://b.com/") == {
        "https://a.com/", rejected("https://b.com/")}


# -- IBANs, cards, phones --------------------------------------------------------------------

IBAN = "DE89370400440532013000"


@pytest.mark.parametrize("raw", [IBAN, "DE89 3704 0044 0532 0130 00", "de89370400440532013000",
                                 " DE89 3704 0044 0532 0130 00 "])
def test_iban_normal_form(raw: str) -> None:
    assert normalize("ibans", raw) == IBAN


@pytest.mark.parametrize("raw", ["DE89370400440532013001", "DE8937040044053201300",
                                 "XX89370400440532013000", f"DE89 3704 0044{ZWSP}0532 0130 00"])
def test_not_an_iban(raw: str) -> None:
    assert normalize("ibans", raw) is None


def test_ibans_in_text_and_arguments() -> None:
    assert extract("Pay DE89 3704 0044 0532 0130 00 today.").ibans == {IBAN}
    assert values_of("ibans", "DE89 3704 0044 0532 0130 01") == {
        rejected("DE89 3704 0044 0532 0130 01")}


@pytest.mark.parametrize(("raw", "expected"), [
    ("4111 1111 1111 1111", "4111111111111111"),
    ("4111-1111-1111-1111", "4111111111111111"),
    ("4111111111111111", "4111111111111111"),
    ("4111111111111112", None),  # Luhn
    ("1111111111111117", None),  # no issuer starts with 1
    ("4111 1111", None),
])
def test_card_normal_form(raw: str, expected: str | None) -> None:
    assert normalize("cards", raw) == expected


def test_cards_in_text() -> None:
    assert extract("card 4111 1111 1111 1111, exp 12/29").cards == {"4111111111111111"}
    assert values_of("cards", "4111 1111 1111 1112") == {rejected("4111 1111 1111 1112")}


@pytest.mark.parametrize(("raw", "expected"), [
    ("+1 (415) 555-0134", "+14155550134"),
    ("+44 20 7946 0958", "+442079460958"),
    ("0044 20 7946 0958", "+442079460958"),
    ("tel:+4930123456", "+4930123456"),
    ("(415) 555-0134", "4155550134"),  # national: no country to add
    ("555-01", None),
    ("+0 123 456 789", None),
    ("+1 415 555 0134 5678 9999", None),
    ("2026-03-12", "20260312"),  # a whole argument is read as given; text finders skip dates
])
def test_phone_normal_form(raw: str, expected: str | None) -> None:
    assert normalize("phones", raw) == expected


def test_phones_in_text() -> None:
    found = extract("Call +1 (415) 555-0134 or phone: 020 7946 0958 on 2026-03-12, v1.2.3.")
    assert found.phones == {"+14155550134", "02079460958"}


# -- amounts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("\u20ac120.50", "120.50 EUR"),
    ("\u20ac 120.5", "120.50 EUR"),
    ("120,50 EUR", "120.50 EUR"),
    ("120,50\u20ac", "120.50 EUR"),
    ("USD 1,200", "1200 USD"),
    ("$1,200.00", "1200 USD"),
    ("1.200,50 eur", "1200.50 EUR"),
    ("US$ 5", "5 USD"),
    ("\u00a30.125", "0.125 GBP"),
    ("-\u20ac50", "-50 EUR"),
    ("CHF -50", "-50 CHF"),
    ("120.50", "120.5"),
    ("1,200", "1200"),
    ("0,5", "0.5"),
    ("1200", "1200"),
    ("1.200", None),  # 1.2 in English, 1200 in German
    ("KWD 1.250", None),
    ("\u20ac120 USD", None),
    ("12 apples", None),
    ("5k", None),
    ("1,2,3", None),
])
def test_amount_normal_form(raw: str, expected: str | None) -> None:
    assert normalize("amounts", raw) == expected


def test_amounts_in_text() -> None:
    found = extract("Pay \u20ac120.50 now, USD 1,200 later and 3.5 more; 12% off, 5k users, "
                    "3 items, -\u00a320 refund, 2026-03-12, 1.200 EUR.")
    assert found.amounts == {"120.50 EUR", "120.5", "1200 USD", "1200", "3.5", "-20 GBP", "-20"}


def test_an_ambiguous_amount_in_an_argument_is_rejected() -> None:
    found = values_of("amounts", "pay 1.200 EUR")
    assert rejected("1.200 EUR") in found and all(is_rejected(v) for v in found)
    assert values_of("amounts", "1.200") == {rejected("1.200")}


# -- dates ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-03-12", "2026-03-12"),
    ("2026/03/12", "2026-03-12"),
    ("2026-03-12T09:30:00Z", "2026-03-12"),
    ("12 March 2026", "2026-03-12"),
    ("12th of Mar. 2026", "2026-03-12"),
    ("March 12, 2026", "2026-03-12"),
    ("sept 1st 2026", "2026-09-01"),
    ("12/03/2026", None),
    ("03/12/2026", None),
    ("2026-02-30", None),
    ("12 Marchx 2026", None),
    ("2026-03-12 and more", None),
])
def test_date_normal_form(raw: str, expected: str | None) -> None:
    assert normalize("dates", raw) == expected


def test_dates_in_text() -> None:
    found = extract("Book 12 March 2026 or April 2nd, 2026, not 04/05/2026 nor 2026-13-01; "
                    "build 20260312-1.")
    assert found.dates == {"2026-03-12", "2026-04-02"}
    assert values_of("dates", "12/03/2026") == {rejected("12/03/2026")}


# -- quoted text --------------------------------------------------------------------------------


def test_quoted_text() -> None:
    text = ('Subject "Quarterly   Report", file \u201cQ3 Plan.xlsx\u201d, \u00abNote\u00bb, '
            "\u201eDas Ziel\u201c, say 'yes' but don't say it's done; \u2018don\u2019t\u2019.")
    assert extract(text).quoted == {"quarterly report", "q3 plan.xlsx", "note", "das ziel", "yes",
                                    "don\u2019t"}
    assert extract('a "' + "x" * 201 + '" b').quoted == frozenset()


def test_quoted_value_of_an_argument_is_the_whole_text() -> None:
    assert values_of("quoted", "  Quarterly REPORT ") == {"quarterly report"}
    assert values_of("quoted", '"Quarterly report"') == {"quarterly report"}
    assert values_of("quoted", "x" * 201) == {rejected("x" * 200)}
    found = values_of("quoted", f"Quarterly{ZWSP} report")
    assert rejected(f"Quarterly{ZWSP} report") in found and all(is_rejected(v) for v in found)


# -- security across kinds -------------------------------------------------------------------


def test_the_invisible_class_covers_every_format_and_control_character() -> None:
    missing = [hex(c) for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) == "Cf" and not _INVISIBLE_RE.match(chr(c))]
    assert missing == []
    assert [hex(c) for c in range(0x100) if unicodedata.category(chr(c)) == "Cc"
            and chr(c) not in "\t\n\v\f\r\x1c\x1d\x1e\x1f\x85"
            and not _INVISIBLE_RE.match(chr(c))] == []


SAMPLES = {
    "emails": "john.doe@acme.com",
    "domains": "acme.com",
    "urls": "https://acme.com/pay",
    "ibans": "DE89 3704 0044 0532 0130 00",
    "cards": "4111 1111 1111 1111",
    "phones": "+44 20 7946 0958",
    "amounts": "\u20ac120.50",
    "dates": "12 March 2026",
    "quoted": "Quarterly report",
    "names": "Anne-Marie O'Neil",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("invisible", [ZWSP, "\u200d", "\u00ad", "\u2066", "\ufeff", "\u180e",
                                       "\ufe0f", "\u3164", "\U000e0041", "\x07"])
def test_an_invisible_character_never_leaves_the_value_known(kind: str, invisible: str) -> None:
    clean = SAMPLES[kind]
    known = normalize(kind, clean)
    assert known is not None
    for i in (0, 3, len(clean) // 2, len(clean) - 1, len(clean)):
        disguised = clean[:i] + invisible + clean[i:]
        assert normalize(kind, disguised) is None, (kind, disguised)
        found = values_of(kind, disguised)
        assert known not in found, (kind, disguised)
        assert found and all(is_rejected(v) for v in found), (kind, disguised, found)
        assert known not in extract(f"text {disguised} text").of(kind), (kind, disguised)


@pytest.mark.parametrize("kind", KINDS)
def test_normalized_values_never_look_like_markers(kind: str) -> None:
    value = normalize(kind, SAMPLES[kind])
    assert value is not None and not is_rejected(value)
    assert not any(unicodedata.category(ch) == "Cc" for ch in value)


# -- bounds ------------------------------------------------------------------------------------


def test_text_past_the_cap_is_not_read_and_nothing_is_cut_into_a_value() -> None:
    filler = "word " * ((MAX_TEXT_CHARS - 10) // 5)
    text = filler + "abcdefgh@acme.com " + "later@x.com"
    assert len(filler) < MAX_TEXT_CHARS < len(filler) + len("abcdefgh@acme.com")
    assert extract(text).emails == frozenset()  # neither the cut address nor the later one
    found = values_of("emails", text)
    assert found == {rejected("text too long to read whole")}


@pytest.mark.parametrize("value", ["+44 20 7946 0958 1234", "4111 1111 1111 1111",
                                   "12 March 2026", "\u20ac 1,200.50"])
def test_the_cap_never_cuts_a_spaced_number_into_a_shorter_one(value: str) -> None:
    for offset in range(1, len(value)):
        filler = "word " * (MAX_TEXT_CHARS // 5)
        filler = filler[:MAX_TEXT_CHARS - offset - 1] + " "
        found = extract(filler + value + " end")
        assert found.phones == found.cards == found.dates == found.amounts == frozenset(), offset


def test_values_per_kind_are_capped() -> None:
    text = " ".join(f"u{i}@acme.com" for i in range(MAX_PER_KIND + 50))
    assert len(extract(text).emails) == MAX_PER_KIND
    found = values_of("emails", text)
    assert len([v for v in found if not is_rejected(v)]) == MAX_PER_KIND
    assert rejected("text too long to read whole") in found


HOSTILE = [
    "@" * 100_000,
    "a" * 50_000 + "@" + "b" * 49_999,
    "a@" * 50_000,
    "1," * 50_000,
    "1." * 50_000,
    '"' + "x" * 99_999,
    "\"x" * 50_000,
    "\u2018\u2019a" * 33_000,
    "a." * 50_000,
    "www." * 25_000,
    "12 " * 33_000,
    "DE89 " * 20_000,
    "+1 " * 33_000,
    ZWSP * 100_000,
]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_text_is_read_in_bounded_time(index: int) -> None:
    """Linear-time scanning: a generous deadline that backtracking would blow through."""
    text = HOSTILE[index]
    started = time.monotonic()
    found = extract(text)
    for kind in KINDS:
        assert len(values_of(kind, text)) <= 2 * MAX_PER_KIND
    assert all(len(found.of(kind)) <= MAX_PER_KIND for kind in KINDS)
    assert time.monotonic() - started < 30


def test_names_are_words_compared_as_words() -> None:
    request = extract("Please book the Lisbon flight for Ann Lee and Bob O\u2019Neil\u2019s wife.")
    assert values_of("names", "  ann   LEE ") == {"ann lee"}
    assert "ann lee" in request.names and "bob o'neil" in request.names
    assert "lee ann" not in request.names and "n lee" not in request.names
    assert "ann smith" not in request.names
    # not names: digits, a comma that changes the order, too many words
    for value in ("Ann Lee 2", "Lee, Ann", " ".join(["word"] * 9)):
        assert all(is_rejected(v) for v in values_of("names", value)), value
    assert normalize("names", "Dr. Ann Lee") == "dr ann lee"
    assert Entities().names == extract("").names and "ann" not in Entities().names


def test_a_word_of_mixed_scripts_names_nobody() -> None:
    lookalike = "J\u043ehn Smith"  # a Cyrillic o inside a Latin name
    assert normalize("names", lookalike) is None
    assert "john smith" not in extract(f"book {lookalike} in").names
    assert "smith" in extract(f"book {lookalike} in").names  # the other word is the user's
    assert normalize("names", "Владимир Путин") == "владимир путин"
