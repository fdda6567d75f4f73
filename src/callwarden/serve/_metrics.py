"""``GET /metrics``: what a worker decided, in the Prometheus text format.

Counts are per worker (Prometheus sums them over the workers it scrapes); the pending approvals
are read from the store at each scrape, so every worker reports the same number.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from callwarden._decision import Decision, Effect

__all__ = ["Metrics"]

# Upper bounds (seconds) of the decision latency histogram's buckets.
_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0)
_STORE_CODES = frozenset({"state_unavailable", "state_timeout", "policy_timeout"})


class Metrics:
    """Counters of one worker."""

    def __init__(self) -> None:
        self.decisions: Counter[tuple[Effect, str]] = Counter()
        self.buckets = [0] * (len(_BUCKETS) + 1)
        self.seconds = 0.0
        self.store_errors = 0

    def decided(self, decision: Decision, seconds: float) -> None:
        self.decisions[(decision.effect, decision.rule or "")] += 1
        self.seconds += seconds
        self.buckets[bisect_left(_BUCKETS, seconds)] += 1  # the first bound >= seconds
        for reason in decision.reasons:
            if reason.code in _STORE_CODES:
                self.store_errors += 1
                break

    def render(self, pending: int) -> str:
        lines = ["# HELP callwarden_decisions_total Decisions made, by effect and rule.",
                 "# TYPE callwarden_decisions_total counter"]
        for effect, rule, count in sorted((str(e), r, n) for (e, r), n in
                                          self.decisions.items()):
            lines.append(f'callwarden_decisions_total{{effect="{effect}",rule="{_label(rule)}"}}'
                         f" {count}")
        lines += ["# HELP callwarden_decision_seconds Time to decide a call (in the service).",
                  "# TYPE callwarden_decision_seconds histogram"]
        total = 0
        for bound, count in zip((*_BUCKETS, float("inf")), self.buckets, strict=True):
            total += count
            edge = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'callwarden_decision_seconds_bucket{{le="{edge}"}} {total}')
        lines += [f"callwarden_decision_seconds_sum {self.seconds}",
                  f"callwarden_decision_seconds_count {total}",
                  "# HELP callwarden_store_errors_total Decisions the state store failed.",
                  "# TYPE callwarden_store_errors_total counter",
                  f"callwarden_store_errors_total {self.store_errors}",
                  "# HELP callwarden_approvals_pending Approval requests waiting for a person.",
                  "# TYPE callwarden_approvals_pending gauge",
                  f"callwarden_approvals_pending {pending}"]
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
