"""Hot swap under load, and version labels moved in models.config, on the local server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from serving_fixtures import labelled_server_options, random_png, tiny_classifier, write_model_version

from serving.batching import BatchingOptions
from serving.errors import NotFoundError
from serving.grpc_client import GrpcClient
from serving.loadtest import LoadTestResult, run_load_test
from serving.model_config import ModelConfig
from serving.rest_client import RestClient
from serving.server import ModelServer
from serving.server_options import ServerOptions

# Model servers under load, each test waiting out several polls of models.config: out of `make unit`.
pytestmark = pytest.mark.slow

SIZE, CHANNELS, CLASSES = 8, 1, 3
POLL_SECONDS = 1.5
IMAGES = [random_png(SIZE, CHANNELS, seed) for seed in range(4)]


def push(base: Path, version: int, seed: int) -> Path:
    return write_model_version(
        base, version, tiny_classifier(SIZE, CHANNELS, CLASSES, seed=seed), warmup_images=IMAGES[:1]
    )


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Seconds until `condition()` held; fails the test after `seconds`."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(0.05)
    pytest.fail(f"{what} did not happen within {seconds}s")


def test_new_version_swaps_in_under_load_without_failing_a_request(tmp_path: Path) -> None:
    base = tmp_path / "hot"
    push(base, 1, seed=1)
    options = ServerOptions(
        grpc_port=0,
        rest_port=0,
        poll_interval_seconds=POLL_SECONDS,
        batching=BatchingOptions(max_batch_size=8, batch_timeout_micros=1000),
    )
    with ModelServer([ModelConfig("hot", base)], options) as server:
        results: list[LoadTestResult] = []
        # The load runs until both sides of the swap have answered (`stop`), not for a fixed time: on a loaded
        # CI machine pushing and warming version 2 can take longer than any fixed window.
        stop = threading.Event()
        load = threading.Thread(
            target=lambda: results.append(
                run_load_test(
                    lambda: GrpcClient(server.grpc_target, "hot"), IMAGES, concurrency=4, seconds=120.0, stop=stop
                )
            )
        )
        load.start()
        time.sleep(1.5)
        push(base, 2, seed=2)
        pushed = time.monotonic()
        probe = GrpcClient(server.grpc_target, "hot")
        answered_after = wait_for(
            lambda: probe.predict_images(IMAGES[:1]).model_version == 2, 8 * POLL_SECONDS, "version 2 answering"
        )
        wait_for(
            lambda: [(s.version, s.state) for s in probe.status()] == [(2, "AVAILABLE"), (1, "END")],
            8 * POLL_SECONDS,
            "version 1 unloading",
        )
        time.sleep(0.5)  # the load's workers send a few requests to version 2 alone
        stop.set()
        load.join()
        with pytest.raises(NotFoundError, match=r"Specific\(hot, 1\)"):
            probe.predict_images(IMAGES[:1], version=1)
        probe.close()
    (result,) = results
    assert result.errors == 0, result.error_kinds
    assert result.requests > 50
    assert set(result.versions) == {"1", "2"}  # traffic was served by both sides of the swap
    # The push lands between two polls; the next poll loads (and warms up) version 2 and routes to it.
    assert time.monotonic() - pushed >= answered_after
    # How soon after the push is a timing, not a rule: the waits above give up after 8 polls (12 s); on the 2-core
    # CI machine, with four load workers and other tests beside it, version 2 answered 3.14 s, 4.6 s and 4.81 s
    # after the push, so a bound of 2 or 3 polls failed runs that lost no request.


def models_config(base: Path, stable: int, canary: int | None = None, versions: tuple[int, ...] = (1, 2)) -> str:
    specific = " ".join(f"versions: {version}" for version in versions)
    canary_label = "" if canary is None else f'version_labels {{ key: "canary" value: {canary} }}'
    return f"""model_config_list {{
  config {{
    name: "labelled"
    base_path: "{base}"
    model_platform: "tensorflow"
    model_version_policy {{ specific {{ {specific} }} }}
    version_labels {{ key: "stable" value: {stable} }}
    {canary_label}
  }}
}}
"""


# A labelled models.config at start-up needs the flag the deploy assets set (serving/deploy.py:144-147). This server
# used to defer labels to the first poll instead and started without it.
LABELLED_OPTIONS = labelled_server_options(poll_seconds=0.5)


def test_version_label_moved_in_models_config_is_honoured(tmp_path: Path) -> None:
    base = tmp_path / "labelled"
    push(base, 1, seed=1)
    push(base, 2, seed=2)
    config_file = tmp_path / "models.config"
    config_file.write_text(models_config(base, stable=1, canary=2))
    with ModelServer(options=LABELLED_OPTIONS, model_config_file=config_file) as server:
        grpc_client = GrpcClient(server.grpc_target, "labelled")
        rest_client = RestClient(server.rest_url, "labelled")
        wait_for(lambda: grpc_client.predict_images(IMAGES[:1], label="stable").model_version == 1, 5, "labels applied")
        assert grpc_client.predict_images(IMAGES[:1], label="canary").model_version == 2
        by_label = rest_client.predict_images(IMAGES[:1], label="canary").probabilities
        by_version = rest_client.predict_images(IMAGES[:1], version=2).probabilities
        assert (by_label == by_version).all()

        config_file.write_text(models_config(base, stable=2, canary=2))  # promote the canary
        wait_for(lambda: grpc_client.predict_images(IMAGES[:1], label="stable").model_version == 2, 5, "stable → 2")

        # `stable` is in use: it may not move to a version that is not loaded (server_core.cc:563-584); the
        # previous labels stay in force.
        config_file.write_text(models_config(base, stable=7, canary=2))
        time.sleep(1.5)
        assert grpc_client.predict_images(IMAGES[:1], label="stable").model_version == 2
        grpc_client.close()
        rest_client.close()


def test_a_promotion_in_one_models_config_write_is_refused_at_every_poll_and_succeeds_in_two(tmp_path: Path) -> None:
    base = tmp_path / "labelled"
    push(base, 1, seed=1)
    push(base, 2, seed=2)
    config_file = tmp_path / "models.config"
    config_file.write_text(models_config(base, stable=1, versions=(1,)))
    with ModelServer(options=LABELLED_OPTIONS, model_config_file=config_file) as server:
        client = GrpcClient(server.grpc_target, "labelled")
        assert client.predict_images(IMAGES[:1], label="stable").model_version == 1

        # One write adds version 2 and moves the in-use `stable` onto it: its label check fails before its
        # policy reaches the model (server_core.cc:514, :563-584, before :524), at every poll (server.cc:175-179).
        config_file.write_text(models_config(base, stable=2, versions=(1, 2)))
        time.sleep(2.5)  # five config polls
        assert [(s.version, s.state) for s in client.status()] == [(1, "AVAILABLE")]  # 2 never even started
        assert client.predict_images(IMAGES[:1], label="stable").model_version == 1
        assert client.predict_images(IMAGES[:1]).model_version == 1

        # Two phases: add version 2 with `stable` kept on 1; once 2 is AVAILABLE, move the label.
        config_file.write_text(models_config(base, stable=1, versions=(1, 2)))
        wait_for(lambda: (2, "AVAILABLE") in [(s.version, s.state) for s in client.status()], 10, "version 2 loaded")
        assert client.predict_images(IMAGES[:1], label="stable").model_version == 1
        config_file.write_text(models_config(base, stable=2, versions=(1, 2)))
        wait_for(lambda: client.predict_images(IMAGES[:1], label="stable").model_version == 2, 5, "stable → 2")
        client.close()
