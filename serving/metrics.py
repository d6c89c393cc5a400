"""The server's Prometheus metrics, named like TF Serving's, through `prometheus_client`.

TF Serving exports its TensorFlow monitoring metrics at `/monitoring/prometheus/metrics` when monitoring.config
enables Prometheus; a metric `/tensorflow/serving/request_count` appears as `:tensorflow:serving:request_count`.
This server exports the request count and latencies under those names, plus its own batching and version
gauges under `tfxp_serving_`. Each `ServingMetrics` has its own `CollectorRegistry`, so several servers in one
process (tests) count apart.

`:tensorflow:serving:request_count` keeps TF Serving's name, which dashboards query: prometheus_client writes
every counter as `<name>_total`, so this one is collected as an untyped series (PromQL's `rate` and `increase`
treat it as they treat TF Serving's). Histograms have no `_created` series, as in TF Serving.

Example:
    metrics = ServingMetrics()
    metrics.request_count.inc(model_name="digits", status="OK")
    text = metrics.render()
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence

import prometheus_client
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

# TF Serving writes no `_created` series; the switch is prometheus_client's, process-wide.
prometheus_client.disable_created_metrics()


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
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_count = NamedCounter(
            ":tensorflow:serving:request_count", "The total number of requests.", ["model_name", "status"]
        )
        self.registry.register(self.request_count)
        # Microseconds, scale 10, power 1.8, 33 buckets: TF Serving's request_latency and runtime_latency.
        latency = functools.partial(Histogram, buckets=exponential_buckets(10, 1.8, 33), registry=self.registry)
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

    def add_gauge(
        self, name: str, help_text: str, labels: Sequence[str], collect: Callable[[], dict[tuple[str, ...], float]]
    ) -> None:
        """Registers a gauge whose values `collect` computes at each scrape."""
        self.registry.register(ScrapedGauge(name, help_text, labels, collect))

    def render(self) -> str:
        """The Prometheus text exposition format (0.0.4) of every metric."""
        return prometheus_client.generate_latest(self.registry).decode()
