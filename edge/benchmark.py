"""Latency at batch 1 (p50/p99, LiteRT with XNNPACK) and size of a TFLite model.

Example:
    result = benchmark(TfliteModel.load(Path("model.tflite"), threads=2), runs=200)
    result.latency.p50_ms, result.size_bytes
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from edge.errors import EdgeError
from edge.runtime import TfliteModel


@dataclass(frozen=True)
class LatencyStats:
    """Wall-clock latency of single invocations.

    Attributes:
        p50_ms: Median, milliseconds.
        p99_ms: 99th percentile, milliseconds.
        mean_ms: Mean, milliseconds.
        runs: Timed invocations.
    """

    p50_ms: float
    p99_ms: float
    mean_ms: float
    runs: int

    @classmethod
    def of(cls, seconds: list[float] | np.ndarray) -> LatencyStats:
        """Summarises per-invocation durations in seconds.

        Raises:
            EdgeError: no samples.
        """
        samples = np.asarray(seconds, dtype=np.float64) * 1000.0
        if samples.size == 0:
            raise EdgeError("no latency samples to summarise; run at least one timed invocation (runs ≥ 1)")
        return cls(
            p50_ms=float(np.percentile(samples, 50)),
            p99_ms=float(np.percentile(samples, 99)),
            mean_ms=float(samples.mean()),
            runs=int(samples.size),
        )


@dataclass(frozen=True)
class BenchmarkResult:
    """Size and batch-1 latency of one model.

    Attributes:
        size_bytes: Size of the .tflite flatbuffer.
        threads: Interpreter threads.
        latency: Batch-1 latency statistics.
    """

    size_bytes: int
    threads: int
    latency: LatencyStats

    def to_json(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "threads": self.threads, "batch": 1, **asdict(self.latency)}


def batch_one_input(model: TfliteModel, seed: int = 0) -> np.ndarray:
    """One random frame [1, H, W, C], pixels 0..255, already in the model's input type."""
    image = np.random.default_rng(seed).integers(0, 256, (1, *model.image_shape)).astype(np.float32)
    return model.quantize_input(image)


def time_invocations(model: TfliteModel, model_input: np.ndarray, runs: int) -> list[float]:
    """Durations in seconds of `runs` consecutive invocations on the same input."""
    durations = []
    for _ in range(runs):
        start = time.perf_counter()
        model.invoke(model_input)
        durations.append(time.perf_counter() - start)
    return durations


def benchmark(model: TfliteModel, runs: int = 100, warmup: int = 10) -> BenchmarkResult:
    """Batch-1 latency after warm-up, and the model size.

    Args:
        model: The loaded model; its `threads` setting applies.
        runs: Timed invocations. Defaults to 100.
        warmup: Untimed invocations first (XNNPACK packs weights on the first run). Defaults to 10.

    Raises:
        EdgeError: runs < 1 or warmup < 0.
    """
    if runs < 1 or warmup < 0:
        raise EdgeError(f"benchmark needs runs ≥ 1 and warmup ≥ 0, got runs={runs}, warmup={warmup}")
    model_input = batch_one_input(model)
    time_invocations(model, model_input, warmup)
    return BenchmarkResult(
        size_bytes=model.size_bytes,
        threads=model.threads,
        latency=LatencyStats.of(time_invocations(model, model_input, runs)),
    )
