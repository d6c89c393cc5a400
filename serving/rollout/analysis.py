"""The canary's verdict: `promote`, `rollback` or `hold`, from its signals against stable's and the thresholds of
`serving.canary`.

The checks, each against its bound (`serving.canary_options.CanarySettings`):
- error rate: the canary's minus stable's, at most `max_error_rate_increase`;
- p99 latency: the canary's over stable's, at most `max_latency_ratio`;
- predicted classes: the L-infinity distance of the two tracks' class shares (`serving.rollout.evidence.linf`,
  the drift checks' rule), at most `max_class_linf`;
- agreement: on a replayed sample, the share of inputs both tracks give the same class, at least
  `min_agreement`.

Live-traffic checks count only when both tracks answered `min_requests` in the window; the replay counts when it
ran. Any check that fails on enough evidence rolls back; with every check passed and enough traffic, promote;
otherwise hold (not enough evidence yet), which changes nothing and is recorded.

Example:
    verdict = judge(canary_signals, stable_signals, agreement, settings)
    verdict.action, verdict.reason  # ("rollback", "agreement with stable 0.41 below 0.95 on 64 replayed images")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from serving.canary_options import CanarySettings
from serving.rollout.evidence import TrackSignals, linf

Action = Literal["promote", "rollback", "hold"]


@dataclass(frozen=True)
class Agreement:
    """Canary and stable on the same replayed inputs: how many, and on how many their top class matched."""

    samples: int
    agreed: int

    @property
    def share(self) -> float:
        return self.agreed / self.samples if self.samples else 0.0


@dataclass(frozen=True)
class Verdict:
    """What the analysis decided, why, and the evidence and thresholds it decided on (recorded as they are)."""

    action: Action
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)


def judge(canary: TrackSignals, stable: TrackSignals, agreement: Agreement | None, settings: CanarySettings) -> Verdict:
    """The verdict on `canary` against `stable` (see the module docstring)."""
    evidence = _evidence(canary, stable, agreement)
    thresholds = {
        key: getattr(settings, key)
        for key in ("min_requests", "max_error_rate_increase", "max_latency_ratio", "max_class_linf", "min_agreement")
    }
    enough_traffic = min(canary.requests, stable.requests) >= settings.min_requests
    failures = []
    if enough_traffic:
        increase = canary.error_rate - stable.error_rate
        if increase > settings.max_error_rate_increase:
            failures.append(
                f"error rate {canary.error_rate:.3f} against stable's {stable.error_rate:.3f} (+{increase:.3f}, "
                f"above {settings.max_error_rate_increase})"
            )
        ratio = evidence.get("p99_ratio")
        if ratio is not None and ratio > settings.max_latency_ratio:
            failures.append(
                f"p99 latency {canary.p99_ms:.1f} ms, {ratio:.2f}× stable's {stable.p99_ms:.1f} ms "
                f"(above {settings.max_latency_ratio}×)"
            )
        worst, distance = linf(canary.classes, stable.classes)
        if distance > settings.max_class_linf:
            failures.append(
                f"predicted classes differ from stable's by L-infinity {distance:.3f} (class {worst!r}; above "
                f"{settings.max_class_linf})"
            )
    if agreement is not None and agreement.samples and agreement.share < settings.min_agreement:
        failures.append(
            f"agreement with stable {agreement.share:.2f} below {settings.min_agreement} on {agreement.samples} "
            "replayed inputs"
        )
    if failures:
        return Verdict("rollback", "; ".join(failures), evidence, thresholds)
    if not enough_traffic:
        return Verdict(
            "hold",
            f"not enough evidence: canary answered {canary.requests:.0f} and stable {stable.requests:.0f} requests "
            f"({canary.window}); each needs {settings.min_requests}",
            evidence,
            thresholds,
        )
    return Verdict(
        "promote",
        f"canary {canary.version} matched stable {stable.version} on {canary.requests:.0f} requests"
        + (f" and {agreement.samples} replayed inputs" if agreement and agreement.samples else ""),
        evidence,
        thresholds,
    )


def _evidence(canary: TrackSignals, stable: TrackSignals, agreement: Agreement | None) -> dict[str, Any]:
    worst, distance = linf(canary.classes, stable.classes)
    ratio = canary.p99_ms / stable.p99_ms if canary.p99_ms is not None and stable.p99_ms else None
    evidence: dict[str, Any] = {
        "window": canary.window,
        "canary": {
            "version": canary.version,
            "requests": canary.requests,
            "error_rate": round(canary.error_rate, 5),
            "p99_ms": canary.p99_ms,
        },
        "stable": {
            "version": stable.version,
            "requests": stable.requests,
            "error_rate": round(stable.error_rate, 5),
            "p99_ms": stable.p99_ms,
        },
        "p99_ratio": round(ratio, 4) if ratio is not None else None,
        "class_linf": round(distance, 5),
        "class_linf_worst": worst,
    }
    if agreement is not None:
        evidence["agreement"] = {
            "samples": agreement.samples,
            "agreed": agreement.agreed,
            "share": round(agreement.share, 5),
        }
    return evidence
