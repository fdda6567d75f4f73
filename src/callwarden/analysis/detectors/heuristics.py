"""Value heuristics: placeholders, example values, entropy and character mix.

What tells a real credential from ``changeme``, ``${API_KEY}`` or ``AKIAIOSFODNN7EXAMPLE``;
shared by the provider, structural and assignment detectors.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_PLACEHOLDER = re.compile(
    r"(?i)x{4,}|\*{3,}|•{3,}|\.{3}|…|#{4,}|0{8,}|<[^>]*>|\$\{|\{\{|\$\(|%\(|\#\{|\[\[|"
    r"^\$[a-z_]|^%[a-z_]\w*%$|^!(?:vault|ref|sub|secret)|^enc\[|\$ansible_vault|"
    r"your|example|placeholder|changeme|change_me|change-me|redacted|dummy|insert[_\- ]|"
    r"replace[_\- ]?(?:me|with|this)|sample|fixme|^todo|^tbd$|^n/?a$|not[_\- ]?a[_\- ]?real|"
    r"^(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-|sk-ssh-|sk-ecdsa-)|-----BEGIN (?!.*PRIVATE)"
)
def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_COMMON_VALUES = _wordset("""
    password passwd pass pwd secret secrets token apikey api_key api-key key changeme null none
    nil undefined true false empty default admin root test testing guest demo user username
    string str value values hidden masked required optional mysecret mypassword secretkey
    letmein qwerty abc123 foobar foo bar baz 1234 12345 123456 1234567 12345678 123456789
    1234567890 password1 password123 p@ssw0rd private public bearer basic token123
    """)
_KNOWN_EXAMPLES = frozenset({
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_BQokikJOvBiI2HlWgH4olfQ2",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
    "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
})
_SEQUENCES = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _is_placeholder(value: str) -> bool:
    if value in _KNOWN_EXAMPLES or "EXAMPLE" in value:
        return True
    low = value.lower()
    if low in _COMMON_VALUES or len(set(low)) <= 3:
        return True
    if len(low) >= 6 and any(low in seq for seq in _SEQUENCES):
        return True
    return _PLACEHOLDER.search(value) is not None


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def _has_digit_and_letter(s: str) -> bool:
    return _DIGIT.search(s) is not None and _LETTER.search(s) is not None
