"""What each track answered over a window: requests, errors, the p99 latency, the predicted classes; read from the
servers' `/metrics` or from a Prometheus.

Two sources, one result (`TrackSignals`):
- `signals_from_metrics(text, ...)`: the Prometheus text a server exposes (parsed with prometheus_client's own
  parser). Counters there count since the server started, so the window is "since start".
- `PrometheusSignals`: PromQL over a Prometheus's HTTP API (`/api/v1/query`), `increase(...[window])` for the
  counts and `histogram_quantile(0.99, ...)` for the latency, selecting the track's version.

The series are tfxp's per-version ones (`tfxp_serving_requests_total{model_name,version,status}`,
`tfxp_serving_request_latency_microseconds_bucket{model_name,version,le}`,
`tfxp_serving_predicted_class_total{model_name,version,class}`, `serving.metrics`). TF Serving's own
(`:tensorflow:serving:request_count{model_name,status}`) carry no version; on a cluster each track's pods serve
one version, so a Prometheus selects them by the pods' `track` label instead (`track_selector`).

`linf` is the drift checks' distance (TFDV's `LInftyDistance`, `tensorflow_data_validation/anomalies/metrics.cc:
320-325` at 710b32f: each side normalised by its own total, then the largest absolute difference, `kSeparateTotal`
at :307-309), so "the canary predicts other classes" and "the data drifted" are judged by one rule.

Example:
    canary = signals_from_metrics(text, model_name="digits", version=7)
    canary.error_rate, canary.p99_ms, canary.classes
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from foundation.bounded import parse_json, read_capped, size_text
from foundation.deadline import with_deadline
from foundation.errors import TfxpError
from foundation.redirects import RedirectRefusedError, open_url

REQUESTS = "tfxp_serving_requests"
LATENCY = "tfxp_serving_request_latency_microseconds"
CLASSES = "tfxp_serving_predicted_class"
# Most of a Prometheus answer read (a class vector of 1,000 classes is well under it).
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class EvidenceError(TfxpError, RuntimeError):
    """A source of evidence could not be read; the message names it and what to check."""


@dataclass(frozen=True)
class TrackSignals:
    """One track's answers over the window.

    Attributes:
        version: The version the numbers are for.
        requests: Requests answered (any status).
        errors: Requests answered with a status other than OK.
        p99_ms: 99th percentile of request latency in milliseconds; None without latency samples.
        classes: Predicted class name → count.
        window: What the counts cover, in words.
    """

    version: int
    requests: float
    errors: float
    p99_ms: float | None
    classes: dict[str, float] = field(default_factory=dict)
    window: str = ""

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


def linf(counts_a: Mapping[str, float], counts_b: Mapping[str, float]) -> tuple[str, float]:
    """TFDV's L-infinity distance of two categorical distributions (see the module docstring): the class with
    the largest difference of shares, and that difference; ("", 0.0) when either side is empty."""
    total_a, total_b = sum(counts_a.values()), sum(counts_b.values())
    if not total_a or not total_b:
        return "", 0.0
    keys = sorted(set(counts_a) | set(counts_b))
    differences = {key: abs(counts_a.get(key, 0.0) / total_a - counts_b.get(key, 0.0) / total_b) for key in keys}
    worst = max(keys, key=lambda key: differences[key])
    return worst, differences[worst]


def histogram_quantile(quantile: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The quantile of a cumulative histogram, `(upper bound, count)` pairs, as PromQL's `histogram_quantile`
    computes it (`BucketQuantile`, prometheus/promql/quantile.go:105-172 at d15adb9, without its repair of
    non-monotonic buckets): None without a `+Inf` bucket or observations; the last finite bound when the rank
    falls in `+Inf`; else linear inside the bucket it falls in, the first bucket starting at 0."""
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]) or ordered[-1][1] <= 0:
        return None
    rank = quantile * ordered[-1][1]
    index = next((i for i, (_, count) in enumerate(ordered[:-1]) if count >= rank), len(ordered) - 1)
    if index == len(ordered) - 1:
        return ordered[-2][0]
    end, count = ordered[index]
    if index == 0 and end <= 0:
        return end
    start, below = ordered[index - 1] if index > 0 else (0.0, 0.0)
    return start + (end - start) * ((rank - below) / (count - below))


def signals_from_metrics(text: str, model_name: str, version: int) -> TrackSignals:
    """The track's signals from a server's Prometheus text, for `version` of `model_name` (since it started)."""
    requests = errors = 0.0
    buckets: dict[float, float] = {}
    classes: dict[str, float] = {}
    wanted = {"model_name": model_name, "version": str(version)}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if any(sample.labels.get(key) != value for key, value in wanted.items()):
                continue
            if sample.name == f"{REQUESTS}_total":
                requests += sample.value
                errors += sample.value if sample.labels.get("status") != "OK" else 0.0
            elif sample.name == f"{LATENCY}_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name == f"{CLASSES}_total":
                name = sample.labels.get("class", "")
                classes[name] = classes.get(name, 0.0) + sample.value
    p99 = histogram_quantile(0.99, list(buckets.items()))
    return TrackSignals(version, requests, errors, p99 / 1000 if p99 is not None else None, classes, "since start")


def read_metrics(url: str, timeout: float = 10.0) -> str:
    """The Prometheus text at `url` (a server's metrics path), read up to `MAX_ANSWER_BYTES`.

    Raises:
        EvidenceError: the server cannot be reached or answers with an error.
    """
    return _get(url, timeout).decode("utf-8", "replace")


class PrometheusSignals:
    """A track's signals from a Prometheus (its HTTP API, `GET /api/v1/query`).

    Args:
        url: The Prometheus, e.g. `http://prometheus:9090`.
        window_seconds: The range of `increase(...)` and `rate(...)`.
    """

    def __init__(self, url: str, window_seconds: int, timeout: float = 10.0) -> None:
        self.url, self.window, self.timeout = url.rstrip("/"), f"{window_seconds}s", timeout

    def signals(self, model_name: str, version: int, track: str = "") -> TrackSignals:
        """`version`'s signals, on the pods of `track` when given (the scrape config's `track` label)."""
        labels = {"model_name": model_name, "version": str(version)}
        selector = _selector({**labels, "track": track} if track else labels)
        by_status = self.query(f"sum by (status) (increase({REQUESTS}_total{selector}[{self.window}]))", "status")
        latency = self.query(
            f"histogram_quantile(0.99, sum by (le) (rate({LATENCY}_bucket{selector}[{self.window}])))", ""
        )
        classes = self.query(f"sum by (class) (increase({CLASSES}_total{selector}[{self.window}]))", "class")
        p99 = latency.get("")
        return TrackSignals(
            version,
            requests=sum(by_status.values()),
            errors=sum(value for status, value in by_status.items() if status != "OK"),
            p99_ms=p99 / 1000 if p99 is not None and math.isfinite(p99) else None,
            classes=classes,
            window=f"last {self.window} (Prometheus {self.url})",
        )

    def query(self, promql: str, label: str) -> dict[str, float]:
        """An instant query's vector as {value of `label`: sample}.

        Raises:
            EvidenceError: Prometheus cannot be reached, or answers an error (its `error` is quoted).
        """
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        try:
            body = parse_json(_get(address, self.timeout))
        except ValueError as error:
            raise EvidenceError(f"Prometheus at {self.url} answered no JSON to {promql!r}: {error}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body.get("error", body) if isinstance(body, dict) else body
            raise EvidenceError(f"Prometheus at {self.url} refused {promql!r}: {said}")
        try:
            result = body.get("data", {}).get("result", [])
            return {str(item["metric"].get(label, "")): float(item["value"][1]) for item in result}
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as error:
            raise EvidenceError(
                f"Prometheus at {self.url} answered {promql!r} with no instant vector of {{metric, [time, value]}} "
                f"samples ({type(error).__name__}: {error}); check that --prometheus is a Prometheus HTTP API"
            ) from None


def _selector(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f"{key}={json.dumps(value)}" for key, value in sorted(labels.items())) + "}"


def _get(url: str, timeout: float) -> bytes:
    too_large = EvidenceError(
        f"{url} answered more than {size_text(MAX_ANSWER_BYTES)}, the most tfxp reads of one answer; is it a "
        "metrics endpoint?"
    )
    no_answer = EvidenceError(
        f"{url} gave no whole answer within {timeout:g} s; check that the server is up and the URL is right"
    )

    def fetch() -> bytes:
        with open_url(url, timeout) as answer:
            return read_capped(answer.read, MAX_ANSWER_BYTES, lambda: too_large)

    try:
        # `timeout` bounds the whole call: a server that trickles its answer byte by byte trips no socket timeout.
        return with_deadline(fetch, timeout, no_answer)
    except RedirectRefusedError as error:
        raise EvidenceError(str(error)) from None
    except OSError as error:
        raise EvidenceError(f"cannot read {url}: {error}; check that the server is up and the URL is right") from None
