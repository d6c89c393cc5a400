"""Closed-loop load test: N workers each send a request, wait for the answer, and send the next.

Throughput (QPS and images/s), latency percentiles and errors by kind are measured over a fixed wall time;
the JSON form is what `bench/serving.py` records.

Example:
    result = run_load_test(lambda: connect("digits", grpc_target="localhost:8500"), [png], concurrency=16, seconds=10)
    print(result.summary())
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from serving.client import ServingClient
from serving.errors import ServingError


@dataclass(frozen=True)
class LoadTestResult:
    """What one load test measured.

    Attributes:
        concurrency: Workers (requests in flight at any time).
        seconds: Measured wall time.
        requests: Requests completed (successful or not).
        errors: Requests that failed.
        images_per_request: Images in each request.
        qps: Successful requests per second.
        images_per_second: Successfully classified images per second.
        p50_ms, p95_ms, p99_ms: Latency percentiles of successful requests, milliseconds.
        error_kinds: Failures by error code (plus `OTHER: <type>` for non-serving exceptions).
        versions: Successful requests by the model version that answered (gRPC only; REST does not say).
    """

    concurrency: int
    seconds: float
    requests: int
    errors: int
    images_per_request: int
    qps: float
    images_per_second: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    error_kinds: dict[str, int] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for humans."""
        text = (
            f"{self.requests} requests in {self.seconds:.1f}s at concurrency {self.concurrency}: "
            f"{self.qps:.1f} QPS ({self.images_per_second:.1f} images/s), latency p50 {self.p50_ms:.2f} ms, "
            f"p95 {self.p95_ms:.2f} ms, p99 {self.p99_ms:.2f} ms, {self.errors} errors"
        )
        if self.error_kinds:
            text += " (" + ", ".join(f"{kind}: {count}" for kind, count in sorted(self.error_kinds.items())) + ")"
        return text


def run_load_test(
    make_client: Callable[[], ServingClient],
    images: Sequence[bytes],
    concurrency: int = 8,
    seconds: float = 10.0,
    images_per_request: int = 1,
    warmup_seconds: float = 0.0,
    stop: threading.Event | None = None,
) -> LoadTestResult:
    """Runs `concurrency` workers, each with its own client, for `seconds` (after `warmup_seconds` unmeasured).

    Args:
        make_client: Builds one client per worker (each gets its own connection).
        images: Encoded images; requests cycle through them.
        concurrency: Workers.
        seconds: Measured duration.
        images_per_request: Images per request.
        warmup_seconds: Unmeasured time first (connections, first batches).
        stop: Set it to end the test early.

    Raises:
        ValueError: no images, or non-positive concurrency, duration or batch.
    """
    if not images:
        raise ValueError("the load test needs at least one image")
    if concurrency < 1 or seconds <= 0 or images_per_request < 1:
        raise ValueError(
            f"concurrency ({concurrency}), seconds ({seconds}) and images_per_request ({images_per_request}) "
            "must be positive"
        )
    stop = stop or threading.Event()
    start_barrier = threading.Barrier(concurrency + 1)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    versions: Counter[str] = Counter()
    window: dict[str, float] = {}

    def worker(index: int) -> None:
        client = make_client()
        batch = [images[(index + offset) % len(images)] for offset in range(images_per_request)]
        local_latencies: list[float] = []
        local_errors: Counter[str] = Counter()
        local_versions: Counter[str] = Counter()
        try:
            start_barrier.wait()
            while not stop.is_set():
                now = time.perf_counter()
                if now >= window["end"]:
                    break
                measured = now >= window["start"]
                try:
                    prediction = client.predict_images(batch)
                except ServingError as error:
                    if measured:
                        local_errors[error.code.name] += 1
                    continue
                except Exception as error:  # count, don't crash: the test reports what clients saw
                    if measured:
                        local_errors[f"OTHER: {type(error).__name__}"] += 1
                    continue
                if measured:
                    local_latencies.append(time.perf_counter() - now)
                    local_versions[str(prediction.model_version)] += 1
        finally:
            client.close()
            with lock:
                latencies.extend(local_latencies)
                errors.update(local_errors)
                versions.update(local_versions)

    threads = [threading.Thread(target=worker, args=(index,), daemon=True) for index in range(concurrency)]
    for thread in threads:
        thread.start()
    begin = time.perf_counter()
    window["start"] = begin + warmup_seconds
    window["end"] = window["start"] + seconds
    start_barrier.wait()
    for thread in threads:
        thread.join()
    elapsed = min(time.perf_counter(), window["end"]) - window["start"]
    elapsed = max(elapsed, 1e-9)
    ok = len(latencies)
    percentiles = np.percentile(np.array(latencies) * 1e3, [50, 95, 99]) if latencies else [float("nan")] * 3
    return LoadTestResult(
        concurrency=concurrency,
        seconds=elapsed,
        requests=ok + sum(errors.values()),
        errors=sum(errors.values()),
        images_per_request=images_per_request,
        qps=ok / elapsed,
        images_per_second=ok * images_per_request / elapsed,
        p50_ms=float(percentiles[0]),
        p95_ms=float(percentiles[1]),
        p99_ms=float(percentiles[2]),
        error_kinds=dict(errors),
        versions={key: value for key, value in versions.items() if key != "None"},
    )
