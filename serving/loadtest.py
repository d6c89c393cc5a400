"""Closed-loop load test: N workers each send a request, wait for the answer, and send the next.

Throughput (QPS and images/s), latency percentiles and errors by kind are measured over a fixed wall time;
the JSON form is what `bench/serving.py` records. Two drivers:

- `run_async_load_test` (`tfxp loadtest`, the benchmark): all workers on one asyncio loop (`grpc.aio` or
  aiohttp), each distinct request built once (`serving.load_senders`). A load generator usually shares the
  machine with the server; this one spends ~0.3 ms of CPU per gRPC request where threads of blocking clients
  spend ~0.5 ms (measured against the digits server on this 2-core VM), which is CPU the server under test keeps.
- `run_load_test`: threads, each with any `ServingClient` — to test through the real client (retries, typed
  errors), e.g. during a hot swap.

Example:
    result = run_async_load_test("localhost:8500", "digits", [png], transport="grpc", concurrency=16, seconds=10)
    print(result.summary())
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import aiohttp
import grpc
import numpy as np

from foundation.contract import SIGNATURE_DEFAULT as DEFAULT_SIGNATURE
from serving import event_loop
from serving.address import parse_grpc_target, parse_rest_url
from serving.base_client import ServingClient
from serving.errors import ServingError
from serving.load_limits import LoadTestError, check_arguments
from serving.load_senders import Sender, grpc_sender, rest_sender

Transport = Literal["grpc", "rest"]


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
    check_arguments(images, concurrency, seconds, images_per_request)
    stop = stop or threading.Event()
    start_barrier = threading.Barrier(concurrency + 1)
    tally = _Tally()
    window: dict[str, float] = {}

    def worker(index: int) -> None:
        client = make_client()
        batch = [images[(index + offset) % len(images)] for offset in range(images_per_request)]
        _run_worker(client, batch, start_barrier, window, stop, tally)

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
    return _result(concurrency, elapsed, images_per_request, tally.latencies, tally.errors, tally.versions)


@dataclass
class _Tally:
    """What the threaded workers measured, each adding its own counts once it ends."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    versions: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, latencies: list[float], errors: Counter[str], versions: Counter[str]) -> None:
        with self.lock:
            self.latencies.extend(latencies)
            self.errors.update(errors)
            self.versions.update(versions)


def _run_worker(
    client: ServingClient,
    batch: list[bytes],
    start_barrier: threading.Barrier,
    window: dict[str, float],
    stop: threading.Event,
    tally: _Tally,
) -> None:
    """One closed-loop worker of `run_load_test`: sends `batch` until the window ends, then adds its counts."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    versions: Counter[str] = Counter()
    try:
        start_barrier.wait()
        while not stop.is_set():
            now = time.perf_counter()
            if now >= window["end"]:
                break
            measured = now >= window["start"]
            try:
                prediction = client.predict_images(batch)
            except Exception as error:  # count, don't crash: the test reports what clients saw
                if measured:
                    errors[error_kind(error)] += 1
                continue
            if measured:
                latencies.append(time.perf_counter() - now)
                versions[str(prediction.model_version)] += 1
    finally:
        client.close()
        tally.add(latencies, errors, versions)


def error_kind(error: Exception) -> str:
    """How a failed request is counted: its TF Serving code, or `OTHER: <type>` for any other exception."""
    return error.code.name if isinstance(error, ServingError) else f"OTHER: {type(error).__name__}"


def _result(
    concurrency: int,
    elapsed: float,
    images_per_request: int,
    latencies: list[float],
    errors: Counter[str],
    versions: Counter[str],
) -> LoadTestResult:
    if not latencies and not errors:
        raise LoadTestError(
            f"the load test made no request in its {elapsed:.1f} s at concurrency {concurrency}: none finished in "
            "the measured time, so nothing was measured; pass a longer --seconds (and a --timeout under it) or a "
            "lower --concurrency"
        )
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


def run_async_load_test(
    target: str,
    model_name: str,
    images: Sequence[bytes],
    transport: Transport = "grpc",
    concurrency: int = 8,
    seconds: float = 10.0,
    images_per_request: int = 1,
    warmup_seconds: float = 0.0,
    timeout: float = 10.0,
    signature_name: str = DEFAULT_SIGNATURE,
) -> LoadTestResult:
    """Runs `concurrency` closed-loop workers on one asyncio loop for `seconds` (after `warmup_seconds`).

    Requests go to `signature_name` of the latest version, each carrying `images_per_request` images; the
    distinct requests (one per starting image) are built once. Failures are counted by TF Serving error code,
    never retried.

    Args:
        target: `host:port` for gRPC, a base URL such as `http://localhost:8501` for REST.
        model_name: The served model.
        images: Encoded images; requests cycle through them.
        transport: `grpc` (PredictionService/Predict) or `rest` (`:predict`, row format, `{"b64": ...}`).
        concurrency, seconds, images_per_request, warmup_seconds: As in `run_load_test`.
        timeout: Deadline of each request, seconds.
        signature_name: Signature to call.

    Raises:
        ValueError: no images, concurrency past `load_limits.MAX_CONCURRENCY`, non-positive concurrency,
            duration or batch, an unknown transport, or a target that is not `host:port` (gRPC) or an http(s) URL
            (REST), checked before any request (`LoadTestError` but for the target and transport).
        LoadTestError: no request finished in the measured time.
    """
    check_arguments(images, concurrency, seconds, images_per_request)
    if transport == "grpc":
        parse_grpc_target(target)
    elif transport == "rest":
        target = parse_rest_url(target)
    else:
        raise ValueError(f"unknown transport {transport!r}; use grpc or rest")
    batches = [
        [images[(start + offset) % len(images)] for offset in range(images_per_request)] for start in range(len(images))
    ]
    return event_loop.run(
        _run_async(
            target, model_name, batches, transport, concurrency, seconds, warmup_seconds, timeout, signature_name
        )
    )


async def _run_async(
    target: str,
    model_name: str,
    batches: list[list[bytes]],
    transport: Transport,
    concurrency: int,
    seconds: float,
    warmup_seconds: float,
    timeout: float,
    signature_name: str,
) -> LoadTestResult:
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    versions: Counter[str] = Counter()
    start = time.perf_counter() + warmup_seconds
    end = start + seconds

    async def worker(send: Sender, index: int) -> None:
        while (now := time.perf_counter()) < end:
            measured = now >= start
            try:
                version = await send(index)
            except Exception as error:  # count, don't crash: the test reports what clients saw
                if measured:
                    errors[error_kind(error)] += 1
                continue
            finally:
                index += concurrency
            if measured:
                latencies.append(time.perf_counter() - now)
                if version is not None:
                    versions[version] += 1

    if transport == "grpc":
        async with grpc.aio.insecure_channel(target) as channel:
            send = grpc_sender(channel, target, model_name, batches, timeout, signature_name)
            await asyncio.gather(*(worker(send, index) for index in range(concurrency)))
    else:
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        # aiohttp's default is 100 connections at most: more workers would only wait in its queue.
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(timeout=client_timeout, connector=connector) as session:
            send = rest_sender(session, target, model_name, batches, signature_name)
            await asyncio.gather(*(worker(send, index) for index in range(concurrency)))
    elapsed = min(time.perf_counter(), end) - start
    return _result(concurrency, elapsed, len(batches[0]), latencies, errors, versions)
