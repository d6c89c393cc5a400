"""Plain modules of the server: batching, version policies and lifecycle, JSON tensors, metrics, config files."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from serving import event_loop
from serving.batching import BatchingOptions, BatchScheduler
from serving.errors import (
    Code,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
    code_from_http,
    error_for,
)
from serving.json_tensor import COLUMNAR, ROW, json_to_ndarray, outputs_to_json, predict_inputs_from_json
from serving.manager import ModelManager, State
from serving.metrics import ServingMetrics
from serving.model_config import ModelConfig, VersionPolicy, read_model_config_file
from serving.server_core import ServerCore
from serving.tensors import dtype_of

STRING, FLOAT = dtype_of(types_pb2.DT_STRING), dtype_of(types_pb2.DT_FLOAT)


# --- batching --------------------------------------------------------------------------------------------------


class RecordingModel:
    """Doubles its input; records batch sizes; optionally blocks until released."""

    def __init__(self, fail_on: float | None = None) -> None:
        self.batches: list[int] = []
        self.release = threading.Event()
        self.release.set()
        self.fail_on = fail_on

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.release.wait()
        self.batches.append(len(inputs["x"]))
        if self.fail_on is not None and self.fail_on in inputs["x"]:
            raise InvalidArgumentError(f"cannot decode {self.fail_on}")
        return {"y": inputs["x"] * 2}


def test_concurrent_requests_are_merged_and_answered_with_their_own_rows() -> None:
    model = RecordingModel()
    model.release.clear()  # hold the first batch so the others queue up behind it
    scheduler = BatchScheduler(
        model, BatchingOptions(max_batch_size=4, batch_timeout_micros=50_000, num_batch_threads=1)
    )
    futures = [scheduler.submit({"x": np.array([float(i)])}, 1) for i in range(9)]
    model.release.set()
    results = [future.result(timeout=5)["y"].tolist() for future in futures]
    scheduler.close()
    assert results == [[2.0 * i] for i in range(9)]
    assert sum(model.batches) == 9 and max(model.batches) == 4 and len(model.batches) <= 4


def test_open_batch_runs_after_the_timeout() -> None:
    model = RecordingModel()
    scheduler = BatchScheduler(model, BatchingOptions(max_batch_size=32, batch_timeout_micros=100_000))
    started = time.monotonic()
    assert scheduler.submit({"x": np.array([1.0, 2.0])}, 2).result(timeout=5)["y"].tolist() == [2.0, 4.0]
    waited = time.monotonic() - started
    scheduler.close()
    assert 0.09 <= waited < 1.0
    assert model.batches == [2]


def test_batches_are_padded_to_allowed_sizes_and_trimmed_back() -> None:
    model = RecordingModel()
    options = BatchingOptions(max_batch_size=8, batch_timeout_micros=0, allowed_batch_sizes=(4, 8))
    scheduler = BatchScheduler(model, options)
    assert scheduler.submit({"x": np.array([1.0, 2.0, 3.0])}, 3).result(timeout=5)["y"].tolist() == [2.0, 4.0, 6.0]
    scheduler.close()
    assert model.batches == [4]


def test_oversized_requests_and_full_queues_are_refused_with_tf_serving_texts() -> None:
    model = RecordingModel()
    model.release.clear()
    scheduler = BatchScheduler(
        model, BatchingOptions(max_batch_size=2, batch_timeout_micros=0, num_batch_threads=1, max_enqueued_batches=2)
    )
    with pytest.raises(InvalidArgumentError, match="Task size 3 is larger than maximum input batch size 2"):
        scheduler.submit({"x": np.zeros(3)}, 3)
    accepted = [scheduler.submit({"x": np.zeros(2)}, 2)]
    time.sleep(0.2)  # the worker takes the first batch and blocks in the model
    accepted += [scheduler.submit({"x": np.zeros(2)}, 2) for _ in range(2)]
    with pytest.raises(UnavailableError, match="The batch scheduling queue to which this task was submitted is full"):
        scheduler.submit({"x": np.zeros(2)}, 2)
    model.release.set()
    for future in accepted:
        future.result(timeout=5)
    scheduler.close()
    with pytest.raises(UnavailableError, match="being unloaded"):
        scheduler.submit({"x": np.zeros(1)}, 1)


def test_a_bad_request_fails_alone_when_its_batch_fails() -> None:
    model = RecordingModel(fail_on=13.0)
    model.release.clear()
    scheduler = BatchScheduler(model, BatchingOptions(max_batch_size=8, batch_timeout_micros=100_000))
    good = scheduler.submit({"x": np.array([1.0])}, 1)
    bad = scheduler.submit({"x": np.array([13.0])}, 1)
    model.release.set()
    assert good.result(timeout=5)["y"].tolist() == [2.0]
    with pytest.raises(InvalidArgumentError, match=r"cannot decode 13\.0"):
        bad.result(timeout=5)
    scheduler.close()


def test_async_requests_of_a_batch_are_settled_together_in_one_loop_callback() -> None:
    model = RecordingModel(fail_on=13.0)
    model.release.clear()
    scheduler = BatchScheduler(model, BatchingOptions(max_batch_size=8, batch_timeout_micros=100_000))

    async def send() -> tuple[list[object], int]:
        loop = asyncio.get_running_loop()
        handed_over = 0
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counting(*args: object) -> object:
            nonlocal handed_over
            handed_over += 1
            return call_soon_threadsafe(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        futures = [scheduler.submit_async({"x": np.array([value])}, 1) for value in (1.0, 13.0, 3.0, 4.0)]
        abandoned = scheduler.submit_async({"x": np.array([5.0])}, 1)
        abandoned.cancel()  # its caller went away (e.g. a deadline): the others must still be answered
        model.release.set()
        results = await asyncio.gather(*futures, return_exceptions=True)
        return results, handed_over

    results, handed_over = asyncio.run(send())
    scheduler.close()
    assert [result["y"].tolist() for result in (results[0], results[2], results[3])] == [[2.0], [6.0], [8.0]]
    assert isinstance(results[1], InvalidArgumentError)
    assert model.batches[0] == 5 and handed_over == 1


def test_a_failure_outside_the_model_fails_its_batch_and_the_thread_serves_on() -> None:
    calls = []

    def flaky_metrics(rows: int) -> None:
        calls.append(rows)
        if len(calls) == 1:
            raise RuntimeError("metrics backend down")

    scheduler = BatchScheduler(RecordingModel(), BatchingOptions(batch_timeout_micros=0), on_batch=flaky_metrics)
    with pytest.raises(InternalError, match="batch processing failed"):
        scheduler.submit({"x": np.array([1.0])}, 1).result(timeout=5)
    assert scheduler.submit({"x": np.array([2.0])}, 1).result(timeout=5)["y"].tolist() == [4.0]
    scheduler.close()


def test_batching_options_are_validated() -> None:
    with pytest.raises(ValueError, match="must be increasing, positive and end with max_batch_size"):
        BatchingOptions(max_batch_size=8, allowed_batch_sizes=(4, 6))
    with pytest.raises(ValueError, match="num_batch_threads must be >= 1"):
        BatchingOptions(num_batch_threads=0)


# --- versions --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "aspired"),
    [
        (VersionPolicy(), {5}),
        (VersionPolicy("latest", num_versions=2), {3, 5}),
        (VersionPolicy("all"), {1, 3, 5}),
        (VersionPolicy("specific", versions=(1, 4)), {1}),
    ],
)
def test_version_policies_pick_tf_servings_versions(policy: VersionPolicy, aspired: set[int]) -> None:
    assert policy.aspired([1, 3, 5]) == aspired
    assert VersionPolicy.from_proto(policy.to_proto()) == policy


class FakeServable:
    def __init__(self, name: str, version: int) -> None:
        self.name, self.version, self.closed = name, version, False

    def close(self) -> None:
        self.closed = True


def fake_loader(failing: set[int]):  # type: ignore[no-untyped-def]
    def load(name: str, version: int, path: Path) -> FakeServable:
        if version in failing:
            raise ValueError(f"version {version} is broken")
        return FakeServable(name, version)

    return load


def test_new_versions_load_before_old_ones_unload_and_failures_keep_the_old_one(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "not-a-version").mkdir()
    manager = ModelManager(ModelConfig("m", tmp_path), fake_loader(failing={2}))
    manager.poll()
    assert manager.available_versions() == [1]
    (tmp_path / "2").mkdir()  # a broken push: version 1 keeps serving
    manager.poll()
    assert manager.available_versions() == [1]
    assert manager.states()[2].state is State.END and "broken" in manager.states()[2].error
    (tmp_path / "3").mkdir()
    manager.poll()
    assert manager.available_versions() == [3]
    assert {v: s.state for v, s in manager.states().items()} == {1: State.END, 2: State.END, 3: State.AVAILABLE}


def test_unload_waits_for_requests_in_flight(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    manager = ModelManager(ModelConfig("m", tmp_path), fake_loader(failing=set()))
    manager.poll()
    holding = threading.Event()
    done = threading.Event()

    def request() -> None:
        with manager.acquire(None) as servable:
            holding.set()
            time.sleep(0.3)
            assert not servable.closed  # not unloaded under a running request
        done.set()

    thread = threading.Thread(target=request)
    thread.start()
    holding.wait()
    (tmp_path / "2").mkdir()
    manager.poll()  # loads 2, then unloads 1 once the request lets go
    assert done.is_set()
    thread.join()
    with pytest.raises(NotFoundError, match=r"Servable not found for request: Specific\(m, 1\)"), manager.acquire(1):
        pass


def test_labels_resolve_and_unknown_names_say_what_was_asked(tmp_path: Path) -> None:
    for version in ("1", "2"):
        (tmp_path / version).mkdir()
    config = ModelConfig("m", tmp_path, VersionPolicy("all"), {"stable": 1})
    # A labelled first config needs the flag: TF Serving checks labels before the first load (server_core.cc:514
    # before :524); this server used to defer them to the first poll instead (tests/serving/test_serving_labels.py).
    core = ServerCore([config], fake_loader(failing=set()), allow_labels_for_unavailable_models=True)
    core.poll()
    with core.acquire("m", label="stable") as servable:
        assert servable.version == 1
    with pytest.raises(InvalidArgumentError, match="Unrecognized servable version label: canary"):
        core.resolve_label("m", "canary")
    with pytest.raises(NotFoundError, match=r"Latest\(other\)"), core.acquire("other"):
        pass
    with pytest.raises(InvalidArgumentError, match=r"ModelSpec has no name specified\."), core.acquire(""):
        pass


def test_model_config_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "models.config"
    path.write_text("model_config_list { config { name: 'a' base_path: 'x' model_platform: 'pytorch' } }")
    with pytest.raises(ValueError, match=r"models\.config: model 'a' has model_platform 'pytorch'"):
        read_model_config_file(path)
    path.write_text("model_config_list { config { name: ")
    with pytest.raises(ValueError, match="is not a valid ModelServerConfig text proto"):
        read_model_config_file(path)
    path.write_text("model_config_list { config { name: 'a' base_path: 'rel' } }")
    (model,) = read_model_config_file(path)
    assert model.base_path == tmp_path / "rel"  # relative to the config file
    with pytest.raises(ValueError, match="cannot read model config file"):
        read_model_config_file(tmp_path / "missing.config")


# --- REST JSON -------------------------------------------------------------------------------------------------


def test_row_and_columnar_requests_decode_to_the_same_tensors() -> None:
    row, fmt = predict_inputs_from_json({"instances": [{"a": [1, 2], "b": {"b64": "aGk="}}]}, {"a": FLOAT, "b": STRING})
    columns, fmt2 = predict_inputs_from_json(
        {"inputs": {"a": [[1, 2]], "b": [{"b64": "aGk="}]}}, {"a": FLOAT, "b": STRING}
    )
    assert (fmt, fmt2) == (ROW, COLUMNAR)
    for inputs in (row, columns):
        assert inputs["a"].dtype == np.float32 and inputs["a"].tolist() == [[1.0, 2.0]]
        assert inputs["b"].tolist() == [b"hi"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"instances": [1], "inputs": [1]}, "expecting only one of 'inputs' or 'instances' keys to exist"),
        ({"instances": []}, "No values in 'instances' array"),
        ({"instances": 3}, "Excepting 'instances' to be an list/array"),
        ({"instances": [[1.0], [1.0, 2.0]]}, "Expecting tensor size: 1 but got: 2"),
        ({"instances": ["x"]}, "is not of expected type: float"),
    ],
)
def test_malformed_json_tensors_get_tf_serving_messages(document: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("(", r"\(").replace("[", r"\[")):
        predict_inputs_from_json(document, {"x": FLOAT})


def test_outputs_follow_tf_servings_json_layout() -> None:
    outputs = {"classes": np.array([1, 0]), "scores_bytes": np.array([b"\x00", b"a"], dtype=object)}
    assert outputs_to_json(outputs, ROW) == {
        "predictions": [
            {"classes": 1, "scores_bytes": {"b64": "AA=="}},
            {"classes": 0, "scores_bytes": {"b64": "YQ=="}},
        ]
    }
    assert outputs_to_json({"classes": np.array([1, 0])}, COLUMNAR) == {"outputs": [1, 0]}
    assert json_to_ndarray([[1, 2], [3, 4]], FLOAT).shape == (2, 2)


# --- errors and metrics ----------------------------------------------------------------------------------------


def test_error_codes_map_to_tf_servings_http_statuses() -> None:
    assert [code.http_status for code in (Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.UNAVAILABLE)] == [400, 404, 503]
    assert Code.FAILED_PRECONDITION.http_status == 400 and Code.DEADLINE_EXCEEDED.http_status == 504
    assert isinstance(error_for(Code.NOT_FOUND, "x"), NotFoundError)
    assert error_for(Code.DATA_LOSS, "x").code is Code.DATA_LOSS
    assert code_from_http(503) is Code.UNAVAILABLE and code_from_http(418) is Code.INVALID_ARGUMENT


def test_metrics_render_prometheus_text() -> None:
    metrics = ServingMetrics()
    metrics.request_count.inc(model_name="m", status="OK")
    metrics.request_latency.labels(model_name="m", API="Predict", entrypoint="GRPC").observe(15.0)
    text = metrics.render()
    assert ':tensorflow:serving:request_count{model_name="m",status="OK"} 1.0' in text
    # prometheus_client writes labels sorted by name and bucket bounds as Go floats.
    assert (
        ':tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",le="10.0",model_name="m"} 0.0'
        in text
    )
    assert (
        ':tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",le="18.0",model_name="m"} 1.0'
        in text
    )
    assert ':tensorflow:serving:request_latency_count{API="Predict",entrypoint="GRPC",model_name="m"} 1.0' in text
    assert "# TYPE :tensorflow:serving:request_latency histogram" in text
    assert "_created" not in text and "request_count_total" not in text


def test_each_server_counts_in_its_own_registry() -> None:
    first, second = ServingMetrics(), ServingMetrics()  # the same names twice: no "Duplicated timeseries"
    first.request_count.inc(model_name="m", status="OK")
    first.batch_size.labels(model_name="m").observe(4)
    assert "request_count{" not in second.render() and "tfxp_serving_batch_size_count{" not in second.render()
    assert 'tfxp_serving_batch_size_sum{model_name="m"} 4.0' in first.render()


# --- event loop ------------------------------------------------------------------------------------------------


async def _running_loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_server_and_load_generator_loops_are_uvloop_when_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert issubclass(event_loop.run(_running_loop_type()), uvloop.Loop)


def test_without_uvloop_the_same_code_runs_on_asyncio_default_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop → ImportError, as on Windows
    loop_type = event_loop.run(_running_loop_type())
    assert loop_type.__module__.startswith("asyncio")


def test_a_failed_version_waits_for_the_retry_interval_unless_its_files_change(tmp_path: Path) -> None:
    # The soak's half-written push: version 2 appears before its saved_model.pb; it must be served once complete.
    calls: list[int] = []

    def load(name: str, version: int, path: Path) -> FakeServable:
        calls.append(version)
        if not (path / "saved_model.pb").exists():
            raise ValueError(f"no saved_model.pb in {path}")
        return FakeServable(name, version)

    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "saved_model.pb").write_bytes(b"pb")
    manager = ModelManager(ModelConfig("m", tmp_path), load)
    manager.poll()
    (tmp_path / "2").mkdir()
    manager.poll()
    manager.poll()
    manager.poll()
    assert calls.count(2) == 1  # no retry on every poll: TF Serving waits --load_retry_interval_micros
    assert manager.available_versions() == [1]
    (tmp_path / "2" / "saved_model.pb").write_bytes(b"pb")  # the push completes
    manager.poll()
    assert calls.count(2) == 2
    assert manager.available_versions() == [2]
    assert manager.states()[2].attempts == 1  # a fresh count for the changed files


def test_a_failed_version_is_retried_after_the_interval_and_given_up_after_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from serving import manager as manager_module

    monkeypatch.setattr(manager_module, "LOAD_RETRY_INTERVAL_SECONDS", 0.0)
    (tmp_path / "1").mkdir()
    manager = ModelManager(ModelConfig("m", tmp_path), fake_loader(failing={1}))
    for _ in range(manager_module.MAX_LOAD_RETRIES + 5):
        manager.poll()
    assert manager.states()[1].attempts == manager_module.MAX_LOAD_RETRIES + 1
    assert manager.states()[1].state is State.END and "broken" in manager.states()[1].error
