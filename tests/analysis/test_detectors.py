"""Secret and personal-data detectors, scanning of nested values, and redaction."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from callwarden._call import FrozenDict, freeze
from callwarden.analysis.detectors import (
    DETECTORS,
    FAMILIES,
    PII,
    SECRETS,
    Detector,
    DetectorSet,
    Finding,
    UnknownDetector,
    redact,
    scan_text,
    scan_value,
    select_detectors,
)

DATA = Path(__file__).parents[1] / "data"

# Fake credentials in each provider's real format (never issued).
SECRET_POSITIVES = [
    ("aws_access_key_id", "aws_access_key_id = AKIAZ7VRSQ5TJN2XOHNB"),
    ("aws_access_key_id", '{"AccessKeyId": "ASIAY3FQ7ZLMNB4KD2XW"}'),
    ("aws_secret_key", "aws_secret_access_key = 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"),
    ("gcp_api_key", "https://maps.googleapis.com/api?key=AIzaSyD3f9Qk2LmN8vB4xZ7tR1pW6cY0hJ5sE2u"),
    ("gcp_service_account", '{"type": "service_account", "private_key_id": '
                            '"0f3c5a7e9b1d2f4a6c8e0b2d4f6a8c0e2b4d6f8a"}'),
    ("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
                          "k2Vb9Qx4Lm7Nc1Zt8Rw3Yp6Hs0Jd5Fg2Ka9Ub4Xe7Tq1Wn6Mv3Lc8Pz5Ry0Sd2Hf4Gj6Kb8Ne1Vq3Xw"
                          "5Ya7Tc9Zm==;EndpointSuffix=core.windows.net"),
    ("azure_client_secret", "client secret: b1c8Q~Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0F_d"),
    ("github_token", "git push https://ghp_R4nd0mT0k3nV4lu3Xy9Zw8Qp7Lm6Kj5Hg4Fd@github.com/a/b"),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX12"),
    ("gitlab_token", "PRIVATE-TOKEN: glpat-9xKq2LmZ7vB4nR1tW8yP"),
    ("slack_token", "token xoxb-2468013579-1357924680-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1"),
    ("slack_webhook", "https://hooks.slack.com/services/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"),
    ("stripe_key", "Stripe.api_key = 'sk_live_51Hq8ZxLm7Nc1Zt8Rw3Yp6Hs0Jd5Fg2Ka'"),
    ("twilio_api_key", "SKa1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6 is the key sid"),
    ("sendgrid_api_key", "SG.aB3dE5fG7hI9jK1lM3nO5p.qR7sT9uV1wX3yZ5aB7cD9eF1gH3iJ5kL7mN9oP1qR3"),
    ("openai_api_key", "Authorization header uses sk-proj-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7Ba6"),
    ("anthropic_api_key", "x-api-key sk-ant-api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7Ba6Zq8Xw7Vu6Ts5Rq4Po3"
                          "Nm2Lk1Ji0Hg9Fe8Dc7Ba6Zq8Xw7Vu6Ts5Rq4Po3Nm2-AA"),
    ("huggingface_token", "login with 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"),
    ("npm_token", "//registry.npmjs.org/:_authToken=npm_Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7"),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmcCJDk3ZjM1YjE0LTk0ZDEtNGQ3Zi1iZmRjLTFkNWE2YzM0ZWQ1NwACKlsz"),
    ("jwt", "Bearer-less jwt: eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZ2VudC03IiwiZXhwIjo"
            "xOTAwMDAwMDAwfQ.c2lnbmF0dXJlLWJ5dGVzLWdvLWhlcmUtMTIzNDU2Nzg5MA"),
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1x2y3z4w5v6u7t8s9r0q\n"
                    "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7Ba6==\n-----END RSA PRIVATE KEY-----"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\\n"),
    ("connection_string", "DATABASE_URL=postgres://app:Zq8Xw7Vu6Ts5@db.internal:5432/prod"),
    ("connection_string", "mongodb+srv://svc:k9Lm2Nb7Vc4X@cluster0.ab1cd.mongodb.net/app"),
    ("connection_string", "REDIS_URL=redis://:s3cr3tPa55w0rd@cache:6379/0"),
    ("basic_auth_url", "curl https://deploy:Qp7Lm6Kj5Hg4@ci.example.org/hooks"),
    ("auth_header", "curl -H 'Authorization: Bearer 8f2Kq9Lm3Nz7Xw1Vb5Ct4Rd6' https://api.acme.io"),
    ("secret_assignment", 'API_KEY="z8Kq2Lm9Nx4Vb7Ct1"'),
    ("secret_assignment", '{"client_secret": "d83jf8s0-2kd8s9-2kdk3"}'),
    ("secret_assignment", "db:\n  password: hunter2!"),
    ("secret_assignment", "mysql --password=Tr0ub4dor3 -u root"),
    ("secret_assignment", "const authToken = 'f9e8d7c6b5a4f3e2d1c0';"),
]

# Text that looks like a secret and is not one.
SECRET_NEGATIVES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixes the build",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "request_id = 123e4567-e89b-12d3-a456-426614174000",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host",
    "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgU\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    'GITHUB_TOKEN="<your-token>"',
    "export API_KEY=${API_KEY}",
    "password: changeme",
    'token: "****************"',
    "SLACK_TOKEN=xoxb-xxxxxxxxxxxx-xxxxxxxxxxxx",
    'STRIPE_SECRET_KEY="sk_test_xxxxxxxxxxxxxxxxxxxxxxxx"',
    "api_key = os.environ['API_KEY']",
    'password = request.form["password"]',
    'secret: "{{ vault_secret }}"',
    "max_tokens: 4096",
    '{"token_count": 123456789012, "prompt_tokens": 2048}',
    "tokenizer: cl100k_base",
    "The password reset link expires in 24 hours.",
    "postgres://app@localhost:5432/app_dev",
    "postgres://user:password@localhost/db",
    "mongodb+srv://<user>:<password>@cluster0.mongodb.net/test",
    '"cache_key": "user:1234:profile:v2"',
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9 is only a header; eyJub3QiOiJqd3QifQ.YWJjZA.Yg is not",
    "def get_api_key(self): return self.api_key",
    "greeting = aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGEgc2VjcmV0",
]


@pytest.mark.parametrize(("detector", "text"), SECRET_POSITIVES)
def test_secret_detector_finds_its_format(detector: str, text: str) -> None:
    assert detector in {f.detector for f in scan_text(text)}


@pytest.mark.parametrize("text", SECRET_NEGATIVES)
def test_lookalike_is_not_a_secret(text: str) -> None:
    assert scan_text(text) == []


def test_jwt_needs_a_json_header() -> None:
    header = "eyJub3RhIjoiand0In0"  # {"nota":"jwt"}: JSON but no alg/typ
    assert scan_text(f"{header}.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", [DETECTORS["jwt"]]) == []


def test_secret_assignment_redacts_only_the_value() -> None:
    text = 'API_KEY="z8Kq2Lm9Nx4Vb7Ct1"'
    assert redact(text, SECRETS) == 'API_KEY="[REDACTED:secret_assignment]"'


def test_auth_header_redacts_the_credential_not_the_scheme() -> None:
    text = "Authorization: Bearer 8f2Kq9Lm3Nz7Xw1Vb5Ct4Rd6"
    assert redact(text, SECRETS) == "Authorization: Bearer [REDACTED:auth_header]"


def test_connection_string_redacts_the_password_only() -> None:
    text = "postgres://app:Zq8Xw7Vu6Ts5@db:5432/prod"
    assert redact(text, SECRETS) == "postgres://app:[REDACTED:connection_string]@db:5432/prod"


def test_private_key_redaction_covers_the_whole_block() -> None:
    text = dict(SECRET_POSITIVES)["private_key"]
    assert redact(text, SECRETS) == "[REDACTED:private_key]"


def test_overlapping_matches_merge_into_the_more_specific_detector() -> None:
    text = "GITHUB_TOKEN=ghp_R4nd0mT0k3nV4lu3Xy9Zw8Qp7Lm6Kj5Hg4Fd"
    assert [f.detector for f in scan_text(text)] == ["github_token"]


PII_POSITIVES = [
    ("card_number", "card 4111 1111 1111 1111 exp 12/29"),
    ("card_number", "amex 3782-822463-10005"),
    ("card_number", "pan=5555555555554444"),
    ("iban", "IBAN DE89 3704 0044 0532 0130 00"),
    ("iban", "send to GB82WEST12345698765432 today"),
    ("email", "mail jane.doe+tag@mail.acme.io please"),
    ("phone", "call +44 20 7946 0958"),
    ("phone", "E.164: +14155550134"),
    ("phone", "office (415) 555-0134"),
    ("phone", "mobile 06 12 34 56 78"),
    ("phone", "Phone: 020 7946 0958"),
]

PII_NEGATIVES = [
    "card 4111 1111 1111 1112 fails Luhn",
    "order 1234567890123456 is not a card",
    "IBAN DE89 3704 0044 0532 0130 01 has a bad check digit",
    "version 10.2.3.4 of the tool",
    "released 2024-05-01, build 2024.05.01.1234",
    "server 192.168.100.200 port 8080",
    "images/logo@2x.png and npm i lodash@4.17.21",
    "git clone git@github.com:acme/app.git",
    "write to user@example.com",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "timestamp 1714557600123",
]


@pytest.mark.parametrize(("detector", "text"), PII_POSITIVES)
def test_pii_detector_finds_its_format(detector: str, text: str) -> None:
    assert detector in {f.detector for f in scan_text(text, PII)}


@pytest.mark.parametrize("text", PII_NEGATIVES)
def test_lookalike_is_not_pii(text: str) -> None:
    assert scan_text(text, PII) == []


def test_card_number_span_covers_separators() -> None:
    text = "card 4111-1111-1111-1111."
    assert redact(text, PII) == "card [REDACTED:card_number]."


def test_custom_pattern_detector() -> None:
    dset = select_detectors([], patterns={"ticket": r"TCK-\d{6}"})
    found = scan_text("see TCK-123456 and TCK-12", dset)
    assert [(f.detector, f.category, f.span) for f in found] == [("ticket", "custom", (4, 14))]


def test_custom_pattern_with_nested_quantifiers_is_refused() -> None:
    with pytest.raises(ValueError, match="nests quantifiers"):
        Detector.custom("bad", r"(a+)+$")


def test_custom_pattern_that_does_not_compile_is_refused() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        Detector.custom("bad", r"(unclosed")


def test_families_select_their_detectors() -> None:
    dset = select_detectors(["aws", "jwt"], exclude=["aws_bedrock_key"])
    assert set(dset.names) == {"aws_access_key_id", "aws_secret_key", "jwt"}


def test_unknown_detector_suggests_the_closest_name() -> None:
    with pytest.raises(UnknownDetector, match="did you mean 'github'"):
        select_detectors(["githbu"])


def test_every_detector_belongs_to_its_category_family() -> None:
    for d in DETECTORS.values():
        assert d.name in FAMILIES[d.category]


# ----------------------------------------------------------------------- values and paths

AWS_KEY = "AKIAZ7VRSQ5TJN2XOHNB"


def test_scan_value_reports_nested_paths() -> None:
    args = {"body": {"items": [{"note": "x"}, {"note": f"key {AWS_KEY}"}]}, "my-header": AWS_KEY}
    paths = [f.path for f in scan_value(args)]
    assert paths == ["args.body.items[1].note", 'args["my-header"]']


def test_scan_value_scans_mapping_keys() -> None:
    found = scan_value({AWS_KEY: 1})
    assert [(f.detector, f.in_key) for f in found] == [("aws_access_key_id", True)]


def test_scan_value_reads_bytes() -> None:
    assert scan_value({"blob": f"id={AWS_KEY}".encode()})[0].path == "args.blob"


def test_scan_value_scans_long_integers_for_card_numbers() -> None:
    assert [f.detector for f in scan_value({"pan": 4111111111111111}, PII)] == ["card_number"]


def test_scan_value_caps_each_string_and_says_so() -> None:
    text = "a" * 2000 + AWS_KEY
    found = scan_value({"body": text}, max_chars=1000)
    assert found == [] and found.truncated and "args.body" in found.notes[0]


def test_scan_value_caps_the_total_and_says_so() -> None:
    found = scan_value({"a": "x" * 600, "b": AWS_KEY * 2}, max_total_chars=600)
    assert found.truncated


def test_scan_value_caps_depth_and_says_so() -> None:
    value: object = AWS_KEY
    for _ in range(10):
        value = [value]
    found = scan_value(value, max_depth=5)
    assert found == [] and found.truncated


def test_scan_value_notes_opaque_objects() -> None:
    found = scan_value({"obj": object()})
    assert found.truncated and "object" in found.notes[0]


def test_ten_megabyte_adversarial_strings_return_promptly() -> None:
    both = select_detectors(["secret", "pii"])
    for text in ("a" * 10_000_000, "key=" * 2_500_000, "AKIA" * 2_500_000, "4111 " * 2_000_000):
        start = time.perf_counter()
        found = scan_value({"x": text}, both)
        assert found.truncated
        # Generous bound: this guards against exponential backtracking, not a benchmark.
        assert time.perf_counter() - start < 30


def test_uncapped_scan_text_is_linear_on_hostile_input() -> None:
    text = "password=" + "a" * 5_000_000 + "\n" + "x@" * 1_000_000
    start = time.perf_counter()
    scan_text(text, select_detectors(["secret", "pii"]))
    assert time.perf_counter() - start < 30


# ----------------------------------------------------------------------- redaction

def test_redact_never_leaves_the_value() -> None:
    for _, text in SECRET_POSITIVES:
        for secret in (f for f in scan_text(text)):
            value = text[secret.start:secret.end]
            assert value not in redact(text, SECRETS)


def test_redact_nested_returns_a_new_structure() -> None:
    args = {"body": {"note": f"k={AWS_KEY}", "n": 1}, "other": ["a"]}
    out = redact(args, scan_value(args))
    assert out == {"body": {"note": "k=[REDACTED:aws_access_key_id]", "n": 1}, "other": ["a"]}
    assert args["body"]["note"] == f"k={AWS_KEY}"
    assert out["other"] is args["other"]


def test_redact_keeps_frozen_containers_frozen() -> None:
    args = freeze({"body": [f"k={AWS_KEY}"]})
    out = redact(args, SECRETS)
    assert type(out) is FrozenDict and out["body"] == ("k=[REDACTED:aws_access_key_id]",)


def test_redact_replaces_unscanned_values_whole() -> None:
    args = {"big": "a" * 2000, "small": "ok"}
    assert redact(args, scan_value(args, max_chars=1000)) == {
        "big": "[REDACTED:unscanned]", "small": "ok"}


def test_redact_rewrites_a_secret_mapping_key() -> None:
    assert redact({AWS_KEY: 1}, SECRETS) == {"[REDACTED:aws_access_key_id]": 1}


def test_redact_accepts_a_custom_replacement() -> None:
    assert redact(AWS_KEY, SECRETS, replacement="<{category}>") == "<secret>"


def test_redact_without_findings_returns_the_same_object() -> None:
    args = {"body": "nothing here"}
    assert redact(args, SECRETS) is args


def test_finding_repr_and_dict_hold_no_value() -> None:
    (finding,) = scan_text(f"key {AWS_KEY}")
    assert AWS_KEY not in repr(finding)
    assert AWS_KEY not in json.dumps(finding.to_dict())
    assert AWS_KEY not in repr(scan_value({"a": AWS_KEY}))


def test_finding_describe_names_detector_and_path() -> None:
    f = Finding("jwt", "secret", 0, 5, "args.body")
    assert f.describe() == "jwt in args.body"


def test_detector_set_accepts_a_plain_list() -> None:
    assert scan_text(f"x {AWS_KEY}", [DETECTORS["aws_access_key_id"]])[0].span == (2, 22)


def test_detector_without_keywords_always_runs() -> None:
    d = Detector("digits", r"\d{4}")
    assert [f.span for f in DetectorSet([d]).scan("ab 1234")] == [(3, 7)]


# ----------------------------------------------------------------------- corpus

def _corpus() -> list[dict[str, object]]:
    lines = (DATA / "secrets.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_corpus_recall_is_at_least_95_percent() -> None:
    positives = [r for r in _corpus() if r["kind"] == "positive"]
    found = sum(bool(scan_text(str(r["sample"]))) for r in positives)
    assert found / len(positives) >= 0.95


def test_corpus_false_positive_rate_is_at_most_5_percent() -> None:
    negatives = [r for r in _corpus() if r["kind"] == "negative"]
    flagged = sum(bool(scan_text(str(r["sample"]))) for r in negatives)
    assert flagged / len(negatives) <= 0.05


def test_lookalike_false_positive_rate_is_at_most_5_percent() -> None:
    flagged = sum(bool(scan_text(t)) for t in SECRET_NEGATIVES)
    assert flagged / len(SECRET_NEGATIVES) <= 0.05


# ------------------------------------------------------------------ obfuscated secrets

_GH = "ghp_4N8xQ2rT6vY9bK3mZ7pL1sD5fH0jW2cE8gA4"


def test_token_with_a_zero_width_character_inside_is_detected() -> None:
    text = "use " + _GH[:12] + "\u200b" + _GH[12:]
    found = select_detectors(None).scan(text)
    assert [f.detector for f in found] == ["github_token"] and found[0].start == 4


def test_token_with_a_fullwidth_prefix_is_detected() -> None:
    text = "\uff47\uff48\uff50_" + _GH[4:]
    assert [f.span for f in select_detectors(None).scan(text)] == [(0, len(text))]


def test_base64_encoded_access_key_is_detected_over_the_whole_blob() -> None:
    blob = base64.b64encode(b"AKIAQYLPMN5HHHFPZAM2").decode()
    found = select_detectors(None).scan(f"data: {blob} end")
    assert found and found[0].span == (6, 6 + len(blob))


def test_base64_of_plain_text_is_not_a_finding() -> None:
    blob = base64.b64encode(b"some plain text here, nothing to see").decode()
    assert not select_detectors(None).scan(blob)


def test_fullwidth_prose_without_secrets_is_not_a_finding() -> None:
    assert not select_detectors(None).scan("\uff28\uff45\uff4c\uff4c\uff4f world \u200b ok")


# ------------------------------------------------------------------ secrets as keys, odd values


def _caught_secrets() -> list[str]:
    """Corpus secrets a detector finds when they stand alone."""
    found = []
    for row in _corpus():
        secret = str(row.get("secret") or row["sample"])
        if row["kind"] == "positive" and len(secret) >= 8 and scan_text(secret):
            found.append(secret)
    return found


@pytest.mark.parametrize("secret", _caught_secrets())
def test_a_corpus_secret_used_as_a_key_is_never_named_in_a_finding(secret: str) -> None:
    value = {secret: {"note": f"again {secret}"}, "list": [{secret: 1}]}
    found = scan_value(value)
    assert any(f.in_key for f in found)
    shown = [f.path for f in found] + [f.describe() for f in found] + [found.summary(9)]
    shown += [json.dumps(f.to_dict()) for f in found] + found.notes
    assert [s for s in shown if secret in s] == []
    assert secret not in repr(redact(value, found))


def test_a_long_key_is_shortened_in_paths() -> None:
    found = scan_value({"k" * 100_000: f"key {AWS_KEY}"})
    assert len(found[0].path) < 100


@pytest.mark.parametrize("text", [
    'PASSWORD=""s3cr3tP4ss99""',
    "password=''s3cr3tP4ss99''",
    'API_TOKEN=""a8f3k2m9x7q1w5e3r8t6""',
    'db_password="""s3cr3tP4ss99"""',
])
def test_doubled_quotes_hold_an_assigned_value(text: str) -> None:
    found = scan_text(text)
    assert [f.detector for f in found] == ["secret_assignment"]
    assert redact(text, found).strip("\"'").endswith("[REDACTED:secret_assignment]")


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85",
                                  "\x00", "\x7f"])
def test_a_control_character_inside_an_assigned_value_does_not_cut_it(char: str) -> None:
    text = f"API_TOKEN=a8f3k2m9{char}x7q1w5e3r8t6zz and more"
    found = scan_text(text)
    assert [f.detector for f in found] == ["secret_assignment"]
    assert redact(text, found) == "API_TOKEN=[REDACTED:secret_assignment] and more"


def test_a_unicode_space_still_ends_an_assigned_value() -> None:
    text = "API_TOKEN=a8f3k2m9x7q1w5e3r8t6\u00a0and more"
    assert redact(text, scan_text(text)) == "API_TOKEN=[REDACTED:secret_assignment]\u00a0and more"
