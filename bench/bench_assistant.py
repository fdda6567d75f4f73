"""A 50-rule assistant policy using the policy language of issue 19 — roles (names too), the
user's request, named conditions and unless, seen parties, provenance, limits per payee, the CEL
string and validation functions — deciding warm calls in a session with a 100-call history and
1,000 remembered untrusted values.

Run: .venv/bin/python bench/bench_assistant.py

Memory store (the default). The session is a realistic assistant's: 100 calls, most of them
reads (the inbox, the calendar, search, web pages, files), the rest mails, invitations, shares,
a payment and a booking. Prints, for each distinct call, the median µs of a warm decision (7
runs of 500, taken in rounds of every call), then the median and the 90th percentile over the
session's 100 calls (each call weighted by how often the session makes it), and the slowest
call; the goal is a median <= 10 µs.

On a shared machine whose speed varies from second to second, ``--instructions`` counts
instead of timing: it runs the same decisions under valgrind's callgrind (Debian package
``valgrind``) and prints the machine instructions one decision of each call takes — the same
figure on every run, for comparing two versions of the code.
"""

from __future__ import annotations

import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from callwarden import Guard
from callwarden.state._facts import facts_key

SESSION = "bench-session"
REQUEST = ("Please send the Q3 notes to carol@example.org and book the review with "
           "alice@corp.example on 2026-12-03; pay the invoice to GB82 WEST 1234 5698 7654 32 "
           "and book Carol Diaz on the Lisbon flight")


def policy() -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"id": "strangers-ask", "when": "stranger", "unless": "internal_only", "effect": "ask"},
        {"id": "new-party-after-content", "after_untrusted": True, "effect": "ask",
         "roles": {"recipient": {"in": ["contacts", "request", "seen"]}}},
        {"id": "new-payees", "roles": {"payee": {"in": ["payees", "request"]}}, "effect": "ask"},
        {"id": "links-home", "match": {"kind": ["email", "message"]}, "effect": "ask",
         "roles": {"text": {"find": "urls", "as": "domain", "in": ["company", "request"]}}},
        {"id": "urls-from-content", "untrusted": ["url", "recipient"], "effect": "ask"},
        {"id": "codes-stay", "match": {"kind": ["email", "message"]}, "effect": "deny",
         "if": "roles.text.exists(t, t.containsIgnoreCase('verification code'))"},
        {"id": "big-payments", "match": {"kind": "payment"}, "effect": "ask",
         "if": "has(args.amount) && args.amount > 1000"},
        {"id": "bad-iban", "match": {"kind": "payment"}, "effect": "deny",
         "if": "has(args.iban) && !iban_valid(args.iban)"},
        {"id": "external-domains", "match": {"kind": "email"}, "effect": "ask",
         "if": "has(args.to) && !(registrable_domain(args.to) in lists.company)"
               " && !(args.to.lowerAscii() in request.emails)"},
        {"id": "no-ssh-keys", "match": {"kind": "file.read"}, "paths": {"sensitive": True},
         "effect": "deny"},
        {"id": "fetch-private", "match": {"kind": "http"}, "urls": {"block_private": True},
         "effect": "deny"},
        {"id": "bookings-named", "roles": {"person": {"in": ["request"]}}, "effect": "ask"},
        {"id": "payee-twice", "match": {"kind": "payment"}, "effect": "ask",
         "limit": {"calls": 1_000_000, "window": "1d", "per": ["session", "payee"]}},
    ]
    # Filler rules of the kinds a real policy has: argument values per tool.
    for i in range(50 - len(rules)):
        rules.append({"id": f"tool-{i}-prod", "match": {"tool": f"internal_tool_{i}"},
                      "args": {"env": "prod"}, "effect": "deny"})
    return {
        "version": 1,
        "lists": {"contacts": ["alice@corp.example", "bob.smith@partner.example"],
                  "payees": ["DE89 3704 0044 0532 0130 00"],
                  "company": ["corp.example", "partner.example"]},
        "tools": {
            "send_email": {"kind": "email", "roles": {"recipient": ["to", "cc", "bcc"],
                                                      "text": ["subject", "body"]}},
            "create_event": {"roles": {"recipient": "attendees", "text": "title"}},
            "transfer": {"kind": "payment", "roles": {"payee": "iban"}},
            "book_flight": {"roles": {"person": "passenger"}},
            "read_inbox": {"output": "untrusted"},
        },
        "conditions": {
            "stranger": {"roles": {"recipient": {"in": ["contacts", "request", "seen"]}}},
            "internal_only": {"roles": {"recipient": {"in": ["company"], "as": "domain"}}},
        },
        "rules": rules,
    }


# (tool, arguments, how many of the session's 100 calls are this one)
SESSION_CALLS: list[tuple[str, dict[str, Any], int]] = [
    ("read_inbox", {"folder": "inbox", "limit": 20}, 20),
    ("search_email", {"query": "Q3 notes"}, 12),
    ("list_events", {"day": "2026-12-03"}, 10),
    ("web_fetch", {"url": "https://docs.python.org/3/"}, 15),
    ("read_file", {"path": "notes/q3.md"}, 10),
    ("send_email", {"to": "carol@example.org", "subject": "Q3 notes",
                    "body": "Notes at https://wiki.corp.example/q3"}, 12),
    ("create_event", {"attendees": ["alice@corp.example"], "title": "Q3 review"}, 8),
    ("share_file", {"share_with": "alice@corp.example", "file_id": "f-1"}, 6),
    ("transfer", {"iban": "GB82WEST12345698765432", "amount": 420}, 4),
    ("book_flight", {"passenger": "Carol Diaz", "destination": "LIS"}, 3),
]


def session_guard() -> Guard:
    """The guard, after the session's 100 calls (its history, what they ran and read) and
    with 1,000 remembered untrusted values."""
    guard = Guard.from_dict(policy())
    assert len(guard.engine.rules) == 50
    for tool, args, times in SESSION_CALLS:
        for _ in range(times):
            guard.run(tool, args, lambda **_: "From: carol@example.org\nsee https://x.example/",
                      session=SESSION, request=REQUEST)
    untrusted = {"urls": [f"https://site{i}.example/page" for i in range(600)],
                 "emails": [f"person{i}@mail{i}.example" for i in range(400)]}
    guard.engine.store.put(facts_key(SESSION), {"untrusted": untrusted,  # type: ignore[union-attr]
                                                "untrusted_at": time.time()}, ttl=None)
    return guard


_COUNTED = 200  # decisions per call under callgrind


def marked() -> None:
    """Under callgrind: each call's decisions between two calls of getppid, on which
    callgrind dumps its counts (``--dump-before=getppid``)."""
    guard = session_guard()
    for tool, args, _ in SESSION_CALLS:  # warm
        for _ in range(50):
            guard.check(tool, args, session=SESSION, request=REQUEST)
    os.getppid()
    for tool, args, _ in SESSION_CALLS:
        for _ in range(_COUNTED):
            guard.check(tool, args, session=SESSION, request=REQUEST)
        os.getppid()


def instructions() -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--cache-sim=no", "--dump-before=getppid",
             f"--callgrind-out-file={out}", sys.executable, __file__, "--marked"],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        counts = []
        for name in sorted(glob.glob(out + ".*"), key=lambda n: int(n.rsplit(".", 1)[1])):
            with open(name) as dump:
                counts += [int(line.split()[1]) for line in dump if line.startswith("totals:")]
    per_call = [c / _COUNTED / 1000 for c in counts[1:len(SESSION_CALLS) + 1]]
    print(f"{'call':14} {'of 100':>6} {'k instructions':>15}")
    weighted: list[float] = []
    for (tool, _, times), count in zip(SESSION_CALLS, per_call, strict=True):
        weighted += [count] * times
        print(f"{tool:14} {times:6} {count:15.1f}")
    print(f"session median {statistics.median(sorted(weighted)):.1f}k instructions a decision")


def main() -> None:
    if "--marked" in sys.argv:
        return marked()
    if "--instructions" in sys.argv:
        return instructions()
    guard = session_guard()
    deciders = []
    for tool, args, _ in SESSION_CALLS:
        def decide(tool: str = tool, args: dict[str, Any] = args) -> Any:
            return guard.check(tool, args, session=SESSION, request=REQUEST)

        deciders.append(decide)
    # Rounds of every call, not one call's runs back to back: a machine whose speed changes
    # for a few seconds slows one run of each call rather than every run of one of them.
    runs: list[list[float]] = [[] for _ in deciders]
    for _ in range(7):
        for decide, taken in zip(deciders, runs, strict=True):
            t0 = time.perf_counter()
            for _ in range(500):
                decide()
            taken.append((time.perf_counter() - t0) / 500 * 1e6)
    weighted: list[float] = []
    print(f"{'call':14} {'effect':7} {'of 100':>6} {'median µs':>10}")
    for (tool, _, times), decide, taken in zip(SESSION_CALLS, deciders, runs, strict=True):
        median = statistics.median(taken)
        weighted += [median] * times
        print(f"{tool:14} {decide().effect.value:7} {times:6} {median:10.1f}")
    weighted.sort()
    print(f"session median {statistics.median(weighted):.1f} µs (goal <= 10), "
          f"90th percentile {weighted[89]:.1f} µs, slowest call {weighted[-1]:.1f} µs")


if __name__ == "__main__":
    main()
