"""serving.loadtest: both drivers against the local server, and errors counted by code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serving_fixtures import random_png, tiny_classifier, write_model_version

from serving import load_limits
from serving.grpc_client import GrpcClient
from serving.load_limits import MAX_CONCURRENCY, MAX_IMAGES_PER_REQUEST, LoadTestError, check_load
from serving.loadtest import run_async_load_test, run_load_test
from serving.model_config import ModelConfig
from serving.server import ModelServer
from serving.server_options import ServerOptions

IMAGES = [random_png(8, 1, seed) for seed in range(3)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    base = tmp_path_factory.mktemp("load") / "digits"
    write_model_version(base, 3, tiny_classifier(8, 1, 4, seed=1), ["a", "b", "c", "d"])
    with ModelServer([ModelConfig("digits", Path(base))], ServerOptions(grpc_port=0, rest_port=0)) as running:
        with GrpcClient(running.grpc_target, "digits", timeout=60) as client:
            client.predict_images(IMAGES[:2])  # the first call traces the model: seconds on a busy machine
        yield running


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_async_driver_keeps_requests_flowing_without_errors(server: ModelServer, transport: str) -> None:
    target = server.grpc_target if transport == "grpc" else server.rest_url
    result = run_async_load_test(
        target, "digits", IMAGES, transport, concurrency=4, seconds=1.5, images_per_request=2, warmup_seconds=1.0
    )  # a warmup long enough for the first calls with another test process beside it (pytest-xdist)

    assert result.errors == 0 and result.requests > 20
    assert result.images_per_second == pytest.approx(2 * result.qps)
    assert 0 < result.p50_ms <= result.p95_ms <= result.p99_ms
    assert result.versions == ({"3": result.requests} if transport == "grpc" else {})


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_async_driver_counts_failures_by_code(server: ModelServer, transport: str) -> None:
    target = server.grpc_target if transport == "grpc" else server.rest_url
    result = run_async_load_test(target, "no-such-model", IMAGES, transport, concurrency=2, seconds=0.5)

    assert result.requests > 0 and result.errors == result.requests
    assert result.error_kinds == {"NOT_FOUND": result.requests}
    assert result.qps == 0


def test_async_driver_counts_an_unreachable_server_as_unavailable() -> None:
    result = run_async_load_test("http://127.0.0.1:9", "digits", IMAGES, "rest", concurrency=1, seconds=0.3)
    assert result.requests > 0 and set(result.error_kinds) == {"UNAVAILABLE"}


def test_threaded_driver_goes_through_the_client(server: ModelServer) -> None:
    result = run_load_test(lambda: GrpcClient(server.grpc_target, "digits"), IMAGES, concurrency=2, seconds=0.5)
    assert result.errors == 0 and result.versions == {"3": result.requests}


def test_a_run_that_finished_no_request_is_a_failure_not_zero_errors(server: ModelServer) -> None:
    with pytest.raises(LoadTestError, match=r"the load test made no request in its .* so nothing was measured"):
        run_async_load_test(server.grpc_target, "digits", IMAGES, "grpc", concurrency=2, seconds=1e-6)


def test_an_absurd_concurrency_is_refused_before_any_worker_starts() -> None:
    with pytest.raises(
        LoadTestError, match=f"concurrency 1000000 is more than one load generator runs \\({MAX_CONCURRENCY}\\)"
    ):
        run_async_load_test("localhost:1", "digits", IMAGES, "grpc", concurrency=1_000_000)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one image"):
        run_async_load_test("localhost:1", "digits", [], "grpc")
    with pytest.raises(ValueError, match="must be positive"):
        run_async_load_test("localhost:1", "digits", IMAGES, "grpc", concurrency=0)
    with pytest.raises(ValueError, match="unknown transport"):
        run_async_load_test("localhost:1", "digits", IMAGES, "http2")  # type: ignore[arg-type]


def test_an_absurd_batch_is_refused_before_any_request_is_built() -> None:
    # found by the second adversarial pass over issue 35: `tfxp loadtest --batch 100000000` took 14.6 GB and sent
    # nothing (the check is the one the CLI runs before TensorFlow starts, and `run_async_load_test` runs too)
    with pytest.raises(
        LoadTestError, match=rf"100000000 images per request is more than .* \({MAX_IMAGES_PER_REQUEST};"
    ):
        check_load(concurrency=1, seconds=1.0, images_per_request=100_000_000)
    check_load(concurrency=1, seconds=1.0, images_per_request=MAX_IMAGES_PER_REQUEST)


def test_a_load_test_that_would_prepare_too_many_bytes_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # each image is in `images_per_request` prepared requests: 300 images of 1 MiB at --batch 4096 would be 1.2 TB
    monkeypatch.setattr(load_limits, "MAX_PREPARED_BYTES", 1000)
    with pytest.raises(LoadTestError, match=r"would prepare 2000 bytes of requests .* limit of 1000"):
        run_async_load_test("localhost:1", "digits", [b"x" * 100] * 5, "grpc", images_per_request=4)
