"""A few Prometheus metrics, in the text exposition format, named like TF Serving's.

TF Serving exports its TensorFlow monitoring metrics at `/monitoring/prometheus/metrics` when monitoring.config
enables Prometheus; a metric `/tensorflow/serving/request_count` appears as `:tensorflow:serving:request_count`.
This server exports the request count and latencies under those names, plus its own batching and version
gauges under `tfxp_serving_`. (prometheus_client is not a dependency; the format is a few lines.)

Example:
    metrics = ServingMetrics()
    metrics.request_count.inc(model_name="digits", status="OK")
    text = metrics.render()
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence


def _labels_text(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{name}="{_escape(value)}"' for name, value in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Counter:
    """A monotonically increasing count per label combination."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str]) -> None:
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(map(labels.__getitem__, self.labels))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(labels[name] for name in self.labels), 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            for key, value in sorted(self._values.items()):
                lines.append(f"{self.name}{_labels_text(self.labels, key)} {value:g}")
        return lines


class Histogram:
    """Observations in cumulative buckets, with sum and count, per label combination."""

    def __init__(self, name: str, help_text: str, labels: Sequence[str], buckets: Sequence[float]) -> None:
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self.buckets = tuple(buckets)
        self._series: dict[tuple[str, ...], list[float]] = {}  # per-bucket counts, overflow, sum, count
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(map(labels.__getitem__, self.labels))
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = [0.0] * (len(self.buckets) + 3)
            series[bisect.bisect_left(self.buckets, value)] += 1  # index len(buckets) is the overflow slot
            series[-2] += value
            series[-1] += 1

    def count(self, **labels: str) -> float:
        series = self._series.get(tuple(labels[name] for name in self.labels))
        return series[-1] if series else 0.0

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            for key, series in sorted(self._series.items()):
                cumulative = 0.0
                for bound, count in zip(self.buckets, series, strict=False):
                    cumulative += count
                    le = f'le="{bound:g}"'
                    lines.append(f"{self.name}_bucket{_labels_text(self.labels, key, le)} {cumulative:g}")
                le = 'le="+Inf"'
                lines.append(f"{self.name}_bucket{_labels_text(self.labels, key, le)} {series[-1]:g}")
                lines.append(f"{self.name}_sum{_labels_text(self.labels, key)} {series[-2]:g}")
                lines.append(f"{self.name}_count{_labels_text(self.labels, key)} {series[-1]:g}")
        return lines


class Gauge:
    """Values computed when scraped."""

    def __init__(
        self, name: str, help_text: str, labels: Sequence[str], collect: Callable[[], dict[tuple[str, ...], float]]
    ) -> None:
        self.name, self.help, self.labels, self._collect = name, help_text, tuple(labels), collect

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge"]
        for key, value in sorted(self._collect().items()):
            lines.append(f"{self.name}{_labels_text(self.labels, key)} {value:g}")
        return lines


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """`start * factor**i` for i < count (TF's monitoring::Buckets::Exponential)."""
    return [start * factor**index for index in range(count)]


class ServingMetrics:
    """The metrics this server exports."""

    def __init__(self) -> None:
        self.request_count = Counter(
            ":tensorflow:serving:request_count", "The total number of requests.", ["model_name", "status"]
        )
        # Microseconds, scale 10, power 1.8, 33 buckets: TF Serving's request_latency and runtime_latency.
        latency_buckets = exponential_buckets(10, 1.8, 33)
        self.request_latency = Histogram(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ["model_name", "API", "entrypoint"],
            latency_buckets,
        )
        self.runtime_latency = Histogram(
            ":tensorflow:serving:runtime_latency",
            "Distribution of wall time (in microseconds) for Tensorflow runtime.",
            ["model_name", "API", "runtime"],
            latency_buckets,
        )
        self.batch_size = Histogram(
            "tfxp_serving_batch_size",
            "Rows per batch processed by server-side batching.",
            ["model_name"],
            exponential_buckets(1, 2, 12),
        )
        self.gauges: list[Gauge] = []

    def render(self) -> str:
        lines: list[str] = []
        metrics: list[Counter | Histogram | Gauge] = [
            self.request_count,
            self.request_latency,
            self.runtime_latency,
            self.batch_size,
            *self.gauges,
        ]
        for metric in metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"
