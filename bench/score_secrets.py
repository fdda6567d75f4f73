"""Scores callwarden's secret detectors and the detect-secrets library on the same samples.

Reads tests/data/secrets.jsonl (a copy of the shared corpus) and prints, per provider and per
template, how many positive samples each tool flags (recall) and how many negatives it flags
(false positives). A second, hand-written set of look-alikes (hashes, UUIDs, public keys,
placeholders, prose) is scored the same way, because the corpus holds only six negatives.

    python bench/score_secrets.py [--misses]
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from callwarden.analysis.detectors import SECRETS, scan_text  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "secrets.jsonl"

# Text that must not be flagged as a secret: what agents really pass around.
LOOKALIKES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "integrity: sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdB"
    "eoGlODJ6+SfaPg==",
    "request_id = 123e4567-e89b-12d3-a456-426614174000",
    '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}',
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop",
    "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAKHHIG...\n-----END CERTIFICATE-----",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    'GITHUB_TOKEN="<your-token>"',
    "export API_KEY=${API_KEY}",
    "password: changeme",
    'token: "****************"',
    "api_key = os.environ['API_KEY']",
    'password = request.form["password"]',
    'secret: "{{ vault_secret }}"',
    "SLACK_TOKEN=xoxb-xxxxxxxxxxxx-xxxxxxxxxxxx",
    "max_tokens: 4096",
    '{"token_count": 123456789012, "prompt_tokens": 2048}',
    "tokenizer: cl100k_base",
    "author: Jane Doe <jane@example.com>",
    "The password reset link expires in 24 hours.",
    "Pass the auth token in the Authorization header.",
    "version 1.2.3-rc.4, released 2024-05-01",
    "curl https://api.github.com/repos/acme/app/pulls?state=open&per_page=100",
    "https://example.com/search?q=token&page=2",
    "git clone git@github.com:acme/app.git",
    "postgres://app@localhost:5432/app_dev",
    "redis://localhost:6379/0",
    "postgres://user:password@localhost/db",
    "mongodb+srv://<user>:<password>@cluster0.mongodb.net/test",
    "background: #1f77b4; color: #ff7f0e",
    "key: user-profile-settings",
    '"cache_key": "user:1234:profile:v2"',
    "id_token_signing_alg_values_supported: [RS256]",
    "file: src/app/keys/public_key_loader.py",
    "uuid4(): 9f1c2d7e-3b4a-4c5d-8e6f-7a8b9c0d1e2f",
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9 is just a header",
    "base64: aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGEgc2VjcmV0",
    "images/logo@2x.png",
    "npm install lodash@4.17.21",
    "def get_api_key(self): return self.api_key",
    "if (token === undefined) throw new Error('no token');",
    "pk_live_51H8rNQKZ6bXyZ0 is a publishable key",
    "AKIA followed by nothing special",
    "passenger_count=4 pattern=abc123 path=/tmp/x",
]


def load() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def ours(sample: str) -> bool:
    return bool(scan_text(sample, SECRETS))


def detect_secrets_flags() -> Callable[[str], bool]:
    """detect-secrets as its users run it: a file scan with its default plugins and filters.

    (This reproduces the corpus's ``detect_secrets_types`` column exactly; the ad-hoc
    ``scan_line`` API turns on eager search and flags nearly everything.)
    """
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    folder = Path(tempfile.mkdtemp(prefix="cw-ds-"))
    path = folder / "sample.txt"

    def flags(sample: str) -> bool:
        path.write_text(sample + "\n")
        with default_settings():
            found = SecretsCollection()
            found.scan_file(str(path))
            return any(True for _ in found)

    return flags


def table(title: str, groups: dict[str, list[tuple[bool, bool]]], positive: bool) -> None:
    print(f"\n{title}")
    print(f"  {'group':<34} {'n':>4} {'callwarden':>11} {'detect-secrets':>15}")
    for name in sorted(groups):
        rows = groups[name]
        a = sum(r[0] for r in rows)
        b = sum(r[1] for r in rows)
        mark = "" if (a == len(rows)) == positive else "  <"
        print(f"  {name:<34} {len(rows):>4} {a:>11} {b:>15}{mark if positive else ''}")


def main() -> None:
    show_misses = "--misses" in sys.argv
    ds = detect_secrets_flags()
    rows = load()
    by_provider: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_template: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    neg: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    tp = tp_ds = fp = fp_ds = npos = nneg = 0
    for r in rows:
        a, b = ours(r["sample"]), ds(r["sample"])
        if r["kind"] == "positive":
            npos += 1
            tp += a
            tp_ds += b
            by_provider[r["provider"]].append((a, b))
            by_template[r.get("template") or "-"].append((a, b))
            if show_misses and not a:
                print("MISS", r["provider"], r["sample"][:100].replace("\n", "\\n"))
        else:
            nneg += 1
            fp += a
            fp_ds += b
            neg[r["provider"]].append((a, b))
            if show_misses and a:
                print("FP  ", r["provider"], r["sample"][:100])
    la = [(ours(s), ds(s)) for s in LOOKALIKES]
    # The bare secret without its variable name: what the provider-specific detectors find alone.
    bare = [r["secret"] for r in rows if r["kind"] == "positive" and r.get("secret")]
    bare_hits = [(ours(s), ds(s)) for s in bare]
    if show_misses:
        for s, (a, _) in zip(LOOKALIKES, la, strict=True):
            if a:
                print("FP  lookalike", s[:100])
    table("Positives by provider (detected)", by_provider, True)
    table("Positives by template (detected)", by_template, True)
    table("Corpus negatives by provider (flagged)", neg, False)
    lfp, lfp_ds = sum(x[0] for x in la), sum(x[1] for x in la)
    print("\nSummary                          callwarden   detect-secrets")
    print(f"  recall ({npos} positives)        {tp / npos:>9.1%} {tp_ds / npos:>15.1%}")
    print(f"  recall, bare values ({len(bare)})     {sum(x[0] for x in bare_hits) / len(bare):>9.1%}"
          f" {sum(x[1] for x in bare_hits) / len(bare):>15.1%}")
    print(f"  FP rate ({nneg} corpus negatives) {fp / nneg:>9.1%} {fp_ds / nneg:>15.1%}")
    print(f"  FP rate ({len(la)} look-alikes)     {lfp / len(la):>9.1%} {lfp_ds / len(la):>15.1%}")


if __name__ == "__main__":
    main()
