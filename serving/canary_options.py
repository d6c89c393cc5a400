"""The `serving.canary` config section: how much traffic a canary takes and what it must show to be promoted.

Plain pydantic data. `serving.rollout: canary` turns the rollout on (`serving.options.ServingOptions`); these
settings are read by the analysis (`serving.rollout.analysis`), the deploy assets' traffic split and the
retention of old versions (`serving.rollout.state`).

The thresholds follow what canary controllers check (Argo Rollouts' and Flagger's analysis: a success rate and a
latency against a bound, over a minimum of samples), plus two checks only a model has: the canary's predicted
classes against the stable model's (the drift checks' L-infinity distance, `serving.rollout.evidence.linf`), and
its agreement with the stable model on the same inputs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from foundation.config_section import ConfigSection
from serving.address import parse_rest_url


def _server_url(text: str) -> str:
    return parse_rest_url(text, what="") if text else ""


# A REST base URL `http(s)://HOST[:PORT]` (serving.address, as `tfxp predict --rest` takes it), or "".
ServerUrl = Annotated[str, AfterValidator(_server_url)]


class CanarySettings(ConfigSection):
    """`serving.canary`: the canary's share of traffic and the evidence that promotes or rolls it back.

    Attributes:
        traffic_percent: Share of requests the canary serves (the HTTPRoute's weights, KServe's
            `canaryTrafficPercent`, the Argo/Flagger step weight).
        window_seconds: The analysis window, `tfxp rollout analyze --window`'s default.
        min_requests: Fewest requests each of canary and stable must have answered in the window before a
            decision other than `hold`.
        max_error_rate_increase: Most the canary's error rate (non-OK answers / requests) may exceed stable's.
        max_latency_ratio: Most the canary's p99 request latency may be, as a multiple of stable's.
        max_class_linf: Most L-infinity distance between the canary's and stable's predicted-class shares.
        min_agreement: Least share of a replayed sample on which canary and stable predict the same class.
        replay_samples: Eval-split images replayed to both to measure agreement (0 = no replay).
        keep_versions: Versions kept under the serving base besides stable and canary (older ones and rolled-back
            ones beyond this are removed after a promotion).
        stable_url: REST address of the stable servers, e.g. `http://digits-stable.tfxp-serving:8501` (their
            version status, `/metrics` and the replay); empty = not reachable from where tfxp runs.
        canary_url: The same for the canary servers.
        metrics_path: Where the servers expose Prometheus metrics (TF Serving's monitoring.config path).
        prometheus_url: A Prometheus that scrapes both tracks, e.g. `http://prometheus-operated.monitoring.svc:9090`:
            the RolloutJudge and `tfxp rollout analyze` read the signals from it (`--prometheus` overrides), and
            the Argo/Flagger analysis objects query it. Empty = the servers' `/metrics` are read directly, and the
            controllers' objects name prometheus-operator's Service in namespace `monitoring`.
        controller: `none` (tfxp rewrites the servers' models.config), or the controller that owns the
            Deployments and routes on the cluster: `argo` (Argo Rollouts) or `flagger`.
    """

    traffic_percent: int = Field(10, ge=1, le=99)
    window_seconds: int = Field(900, ge=10)
    min_requests: int = Field(200, ge=1)
    max_error_rate_increase: float = Field(0.01, ge=0, le=1)
    max_latency_ratio: float = Field(1.5, ge=1)
    max_class_linf: float = Field(0.1, gt=0, le=1)
    min_agreement: float = Field(0.95, ge=0, le=1)
    replay_samples: int = Field(64, ge=0)
    keep_versions: int = Field(2, ge=0)
    stable_url: ServerUrl = ""
    canary_url: ServerUrl = ""
    metrics_path: str = Field("/monitoring/prometheus/metrics", pattern=r"^/")
    prometheus_url: ServerUrl = ""
    controller: Literal["none", "argo", "flagger"] = "none"
