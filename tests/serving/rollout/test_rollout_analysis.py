"""The analysis' verdict (`serving.rollout.analysis.judge`), rule by rule, on signals given directly: each check's
bound, the minimum of requests, and hold as the answer to too little evidence."""

from __future__ import annotations

import pytest

from serving.canary_options import CanarySettings
from serving.rollout.analysis import Agreement, judge
from serving.rollout.evidence import TrackSignals

SETTINGS = CanarySettings(min_requests=100)
CLASSES = {"cat": 600.0, "dog": 400.0}


def _stable(**changes: object) -> TrackSignals:
    fields: dict[str, object] = {"version": 1, "requests": 1000.0, "errors": 10.0, "p99_ms": 100.0, "classes": CLASSES}
    return TrackSignals(**{**fields, **changes})  # type: ignore[arg-type]


def _canary(**changes: object) -> TrackSignals:
    return _stable(version=2, **changes)


def test_a_canary_like_stable_is_promoted() -> None:
    verdict = judge(_canary(p99_ms=140.0), _stable(), Agreement(64, 64), SETTINGS)
    assert verdict.action == "promote", verdict.reason
    assert verdict.evidence["p99_ratio"] == 1.4 and verdict.evidence["agreement"]["share"] == 1.0
    assert verdict.thresholds["max_latency_ratio"] == 1.5


@pytest.mark.parametrize(
    ("canary", "agreement", "reason"),
    [
        ({"errors": 25.0}, None, "error rate 0.025 against stable's 0.010 (+0.015, above 0.01)"),
        ({"p99_ms": 151.0}, None, "p99 latency 151.0 ms, 1.51× stable's 100.0 ms (above 1.5×)"),
        ({"classes": {"cat": 800.0, "dog": 200.0}}, None, "L-infinity 0.200 (class 'cat'; above 0.1)"),
        ({}, Agreement(64, 58), "agreement with stable 0.91 below 0.95 on 64 replayed inputs"),
    ],
    ids=["error-rate", "p99-latency", "predicted-classes", "agreement"],
)
def test_each_check_past_its_bound_rolls_back_naming_it(
    canary: dict[str, object], agreement: Agreement | None, reason: str
) -> None:
    verdict = judge(_canary(**canary), _stable(), agreement, SETTINGS)
    assert verdict.action == "rollback" and reason in verdict.reason, verdict.reason


def test_too_few_requests_is_a_hold_not_a_verdict_on_the_live_checks() -> None:
    # Twice stable's latency on 50 requests: too little traffic to count.
    verdict = judge(_canary(requests=50.0, p99_ms=200.0), _stable(), None, SETTINGS)
    assert verdict.action == "hold"
    assert "canary answered 50 and stable 1000 requests" in verdict.reason and "each needs 100" in verdict.reason


def test_a_replayed_disagreement_rolls_back_even_without_traffic() -> None:
    verdict = judge(_canary(requests=0.0, errors=0.0), _stable(), Agreement(64, 10), SETTINGS)
    assert verdict.action == "rollback" and "agreement with stable 0.16" in verdict.reason
