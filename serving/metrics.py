"""The server's Prometheus metrics, named like TF Serving's, through `prometheus_client`.

TF Serving exports its TensorFlow monitoring metrics at `/monitoring/prometheus/metrics` when monitoring.config
enables Prometheus; a metric `/tensorflow/serving/request_count` appears as `:tensorflow:serving:request_count`.
This server exports the request count and latencies under those names, plus its own batching and version
gauges under `tfxp_serving_`. Each `ServingMetrics` has its own `CollectorRegistry`, so several servers in one
process (tests) count apart.

TF Serving's metrics carry no version (its util.cc:66-68 counts by model_name and status); they keep their
names and labels here. Beside them, tfxp's own per-version series tell a canary from the stable model: the
version a request resolved to (by label, number or latest; "" when it failed before resolving one), its status,
its latency, and the class each answer row predicts (`serving.predicted_class`). Every label is bounded:
configured model names (else `__unknown__`), loaded versions, status codes, the version's label map plus `other`.

`:tensorflow:serving:request_count` keeps TF Serving's name, which dashboards query: prometheus_client writes
every counter as `<name>_total`, so this one is collected as an untyped series (PromQL's `rate` and `increase`
treat it as they treat TF Serving's). Histograms have no `_created` series, as in TF Serving.

Example:
    metrics = ServingMetrics()
    metrics.request_count.inc(model_name="digits", status="OK")
    metrics.observe_version("digits", "3", "OK", 1250.0, ["7", "1"])
    text = metrics.render()
"""

from __future__ import annotations

import functools
import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterator, Sequence

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

# TF Serving writes no `_created` series; the switch is prometheus_client's, process-wide.
prometheus_client.disable_created_metrics()

# Microseconds, scale 10, power 1.8, 33 buckets: TF Serving's request_latency and runtime_latency.
LATENCY_BUCKETS_SCALE, LATENCY_BUCKETS_POWER, LATENCY_BUCKETS_COUNT = 10, 1.8, 33


class NamedCounter(Collector):
    """A count per label combination, exposed under exactly `name` (no `_total`; see the module docstring)."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(labels[name] for name in self.labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(labels[name] for name in self.labels), 0.0)

    def collect(self) -> Iterator[Metric]:
        family = UnknownMetricFamily(self.name, self.help, labels=self.labels)
        with self._lock:
            for key, value in sorted(self._values.items()):
                family.add_metric(list(key), value)
        yield family


class ScrapedGauge(Collector):
    """Values computed when scraped: `collect_values()` → label values → value."""

    def __init__(
        self, name: str, help_text: str, labels: Sequence[str], collect: Callable[[], dict[tuple[str, ...], float]]
    ) -> None:
        self.name, self.help, self.labels, self._collect = name, help_text, tuple(labels), collect

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.help, labels=self.labels)
        for key, value in sorted(self._collect().items()):
            family.add_metric(list(key), value)
        yield family


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """`start * factor**i` for i < count (TF's monitoring::Buckets::Exponential)."""
    return [start * factor**index for index in range(count)]


class ServingMetrics:
    """The metrics this server exports, in a registry of their own.

    Attributes:
        registry: What `render` writes; `add_gauge` registers scrape-time gauges in it.
        request_count: `.inc(model_name=..., status=...)`.
        request_latency, runtime_latency, batch_size: prometheus_client Histograms (`.labels(...).observe(v)`).
        version_requests, version_latency, predicted_class: tfxp's per-version series (`observe_version`).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_count = NamedCounter(
            ":tensorflow:serving:request_count", "The total number of requests.", ["model_name", "status"]
        )
        self.registry.register(self.request_count)
        buckets = exponential_buckets(LATENCY_BUCKETS_SCALE, LATENCY_BUCKETS_POWER, LATENCY_BUCKETS_COUNT)
        latency = functools.partial(Histogram, buckets=buckets, registry=self.registry)
        self.request_latency = latency(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ["model_name", "API", "entrypoint"],
        )
        self.runtime_latency = latency(
            ":tensorflow:serving:runtime_latency",
            "Distribution of wall time (in microseconds) for Tensorflow runtime.",
            ["model_name", "API", "runtime"],
        )
        self.batch_size = Histogram(
            "tfxp_serving_batch_size",
            "Rows per batch processed by server-side batching.",
            ["model_name"],
            buckets=exponential_buckets(1, 2, 12),
            registry=self.registry,
        )
        self.version_requests = Counter(
            "tfxp_serving_requests",
            "Requests by the model version they resolved to (by label, number or latest; empty if none).",
            ["model_name", "version", "status"],
            registry=self.registry,
        )
        self.version_latency = latency(
            "tfxp_serving_request_latency_microseconds",
            "Distribution of wall time (in microseconds) of requests, by the model version they resolved to.",
            ["model_name", "version"],
        )
        self.predicted_class = Counter(
            "tfxp_serving_predicted_class",
            "Answer rows by their top class, named from the version's labels.txt (other: outside it).",
            ["model_name", "version", "class"],
            registry=self.registry,
        )

    def observe_version(
        self, model_name: str, version: str, status: str, microseconds: float, classes: Sequence[str] = ()
    ) -> None:
        """Records one request in the per-version series; `classes` are its rows' top classes, already bounded."""
        self.version_requests.labels(model_name, version, status).inc()
        self.version_latency.labels(model_name, version).observe(microseconds)
        for name, rows in Tally(classes).items():
            self.predicted_class.labels(model_name, version, name).inc(rows)

    def add_gauge(
        self, name: str, help_text: str, labels: Sequence[str], collect: Callable[[], dict[tuple[str, ...], float]]
    ) -> None:
        """Registers a gauge whose values `collect` computes at each scrape."""
        self.registry.register(ScrapedGauge(name, help_text, labels, collect))

    def render(self) -> str:
        """The Prometheus text exposition format (0.0.4) of every metric."""
        return prometheus_client.generate_latest(self.registry).decode()
