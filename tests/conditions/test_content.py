"""The ``secrets:`` and ``content:`` rule conditions."""

from __future__ import annotations

import datetime
import decimal
import fractions
import pathlib
import uuid
from typing import Any

import pytest

from callwarden._call import FrozenDict, ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import _REGISTRY, CompileEnv, ConfigError, Subject
from callwarden.conditions.content import ContentMatcher, SecretsMatcher

ENV = CompileEnv()
AWS_KEY = "AKIAZ7VRSQ5TJN2XOHNB"
GH_TOKEN = "ghp_R4nd0mT0k3nV4lu3Xy9Zw8Qp7Lm6Kj5Hg4Fd"


def subject(args: dict[str, Any], tool: str = "fetch") -> Subject:
    return Subject(ToolCall.create(tool, args), default_profile(tool))


def test_conditions_are_registered_under_their_keys() -> None:
    assert _REGISTRY["secrets"] is SecretsMatcher
    assert _REGISTRY["content"] is ContentMatcher


def test_secrets_true_matches_a_secret_in_any_argument() -> None:
    hit = SecretsMatcher(True, ENV)(subject({"url": "https://x.io", "body": f"id {AWS_KEY}"}))
    assert hit is not None
    assert hit.code == "secrets.found"
    assert hit.detail == "aws_access_key_id in args.body"


def test_secrets_returns_none_for_clean_arguments() -> None:
    assert SecretsMatcher(True, ENV)(subject({"url": "https://x.io", "body": "hello"})) is None


def test_secrets_hit_carries_redacted_frozen_args() -> None:
    hit = SecretsMatcher(True, ENV)(subject({"url": "https://x.io", "body": [f"t={GH_TOKEN}"]}))
    assert hit is not None and isinstance(hit.args, FrozenDict)
    assert hit.args == {"url": "https://x.io", "body": ("t=[REDACTED:github_token]",)}


def test_secrets_hit_detail_and_repr_never_hold_the_value() -> None:
    hit = SecretsMatcher(True, ENV)(subject({"body": f"{GH_TOKEN} {AWS_KEY}"}))
    assert hit is not None
    assert GH_TOKEN not in hit.detail and AWS_KEY not in hit.detail
    assert GH_TOKEN not in repr(hit) and AWS_KEY not in repr(hit)


def test_secrets_in_limits_the_scan_to_named_arguments() -> None:
    matcher = SecretsMatcher({"in": ["url"]}, ENV)
    assert matcher(subject({"url": "https://x.io", "body": AWS_KEY})) is None
    hit = matcher(subject({"url": f"https://x.io/?k={AWS_KEY}", "body": AWS_KEY}))
    assert hit is not None and hit.args is not None
    assert hit.args["body"] == AWS_KEY  # outside `in:` is neither judged nor rewritten


def test_secrets_detectors_select_families() -> None:
    matcher = SecretsMatcher({"detectors": ["github"]}, ENV)
    assert matcher(subject({"body": AWS_KEY})) is None
    assert matcher(subject({"body": GH_TOKEN})) is not None


def test_secrets_exclude_drops_detectors() -> None:
    matcher = SecretsMatcher({"exclude": ["aws"]}, ENV)
    assert matcher(subject({"body": AWS_KEY})) is None


def test_secrets_custom_replacement() -> None:
    hit = SecretsMatcher({"replacement": "***"}, ENV)(subject({"body": AWS_KEY}))
    assert hit is not None and hit.args == {"body": "***"}


def test_secrets_unscanned_text_matches_by_default() -> None:
    hit = SecretsMatcher({"max_bytes": 100}, ENV)(subject({"body": "a" * 500, "n": 1}))
    assert hit is not None and hit.code == "secrets.incomplete"
    assert hit.args == {"body": "[REDACTED:unscanned]", "n": 1}


def test_secrets_unscanned_text_can_be_ignored() -> None:
    matcher = SecretsMatcher({"max_bytes": 100, "on_incomplete": "ignore"}, ENV)
    assert matcher(subject({"body": "a" * 500})) is None


def test_secrets_partial_scan_rewrite_drops_the_unscanned_value() -> None:
    hit = SecretsMatcher({"max_bytes": 100}, ENV)(subject({"a": AWS_KEY, "b": "x" * 500}))
    assert hit is not None and hit.code == "secrets.incomplete"
    assert "aws_access_key_id in args.a" in hit.detail
    assert hit.args == {"a": "[REDACTED:aws_access_key_id]", "b": "[REDACTED:unscanned]"}


def test_secrets_scan_is_shared_through_the_memo() -> None:
    s = subject({"body": AWS_KEY})
    first, second = SecretsMatcher(True, ENV), SecretsMatcher(True, ENV)
    first(s)
    (entry,) = s.memo.values()
    second(s)
    assert list(s.memo.values()) == [entry]


def test_secrets_scan_error_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import callwarden.conditions.content as content

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("scanner broke")

    monkeypatch.setattr(content, "scan_value", boom)
    hit = SecretsMatcher(True, ENV)(subject({"body": "x"}))
    assert hit is not None and hit.code == "secrets.error"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (False, None),
        ("yes", None),
        ({"detectors": ["githbu"]}, "detectors"),
        ({"exclude": ["nope"]}, "exclude"),
        ({"in": "body", "bogus": 1}, "bogus"),
        ({"in": [1]}, "in"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"on_incomplete": "maybe"}, "on_incomplete"),
        ({"replacement": "{value}"}, "replacement"),
        ({"patterns": {"x": "(a+)+"}}, "patterns"),
        ({"patterns": ["x"]}, "patterns"),
    ],
)
def test_secrets_bad_config_is_a_config_error(config: Any, key: str | None) -> None:
    with pytest.raises(ConfigError) as err:
        SecretsMatcher(config, ENV)
    assert err.value.key == key


def test_unknown_detector_error_suggests_a_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'github'"):
        SecretsMatcher({"detectors": ["githbu"]}, ENV)


def test_content_detects_personal_data_and_custom_patterns() -> None:
    matcher = ContentMatcher(
        {"detect": ["card_number", "iban", "email", "phone"], "patterns": {"ticket": r"TCK-\d{6}"}},
        ENV,
    )
    body = "card 4111 1111 1111 1111 re TCK-123456"
    hit = matcher(subject({"to": "bob@acme.io", "body": body}, tool="send_email"))
    assert hit is not None and hit.code == "content.found"
    assert hit.args == {"to": "[REDACTED:email]",
                        "body": "card [REDACTED:card_number] re [REDACTED:ticket]"}


def test_content_true_means_all_personal_data() -> None:
    hit = ContentMatcher(True, ENV)(subject({"body": "IBAN GB82WEST12345698765432"}))
    assert hit is not None and hit.detail == "iban in args.body"


def test_content_patterns_alone() -> None:
    matcher = ContentMatcher({"patterns": {"ticket": r"TCK-\d{6}"}}, ENV)
    assert matcher(subject({"body": "mail bob@acme.io"})) is None
    assert matcher(subject({"body": "TCK-000001"})) is not None


def test_content_in_limits_the_scan() -> None:
    matcher = ContentMatcher({"detect": ["email"], "in": ["body"]}, ENV)
    assert matcher(subject({"to": "bob@acme.io", "body": "hi"}, tool="send_email")) is None


def test_content_detail_never_holds_the_value() -> None:
    hit = ContentMatcher(True, ENV)(subject({"body": "card 4111 1111 1111 1111"}))
    assert hit is not None and "4111" not in hit.detail


def test_content_with_nothing_selected_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        ContentMatcher({"detect": []}, ENV)
    assert err.value.key == "detect"


# ------------------------------------------------- immutable values that are not text (14 #9)

@pytest.mark.parametrize("value", [
    decimal.Decimal("19.99"), datetime.date(2024, 5, 1), datetime.datetime(2024, 5, 1, 12, 30),
    datetime.time(9, 0), datetime.timedelta(hours=1), uuid.UUID(int=7), fractions.Fraction(1, 3),
    complex(1, 2), pathlib.PurePosixPath("reports/q1.csv"), range(3),
])
def test_an_immutable_non_text_value_is_scanned_not_reported_unscannable(value: Any) -> None:
    assert SecretsMatcher(True, ENV)(subject({"url": "https://x.io", "v": value})) is None


def test_the_text_form_of_a_non_text_value_is_scanned() -> None:
    hit = SecretsMatcher(True, ENV)(subject({"p": pathlib.PurePosixPath(f"/tmp/{GH_TOKEN}")}))
    assert hit is not None and hit.code == "secrets.found"
    assert hit.args == {"p": "/tmp/[REDACTED:github_token]"}


def test_rewritten_args_keep_non_text_values_that_held_no_secret() -> None:
    amount, when = decimal.Decimal("19.99"), datetime.date(2024, 5, 1)
    hit = SecretsMatcher(True, ENV)(subject({"body": GH_TOKEN, "amount": amount,
                                             "items": [when, GH_TOKEN]}))
    assert hit is not None and isinstance(hit.args, FrozenDict)
    assert hit.args == {"body": "[REDACTED:github_token]", "amount": amount,
                        "items": (when, "[REDACTED:github_token]")}
    assert type(hit.args["amount"]) is decimal.Decimal


def test_an_opaque_object_still_cannot_be_scanned() -> None:
    class Thing:
        pass

    hit = SecretsMatcher(True, ENV)(subject({"v": Thing()}))
    assert hit is not None and hit.code == "secrets.incomplete"
