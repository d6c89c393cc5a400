"""Pure decisions of the Trainer: strategy, XLA, learning-rate schedule, GPU memory setting."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tensorflow as tf

from components.trainer.memory import GpuMemoryConfigError, configure_gpu_memory, parse_gpu_memory
from components.trainer.strategy import resolve_strategy, worker_index
from components.trainer.xla import resolve_xla

TWO_WORKERS = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}})


@pytest.mark.parametrize(
    ("requested", "tf_config", "gpus", "expected"),
    [
        ("auto", None, 0, "default"),
        ("auto", None, 1, "default"),
        ("auto", None, 8, "mirrored"),
        ("auto", TWO_WORKERS, 8, "multi_worker"),
        ("auto", json.dumps({"cluster": {"worker": ["a:1"]}}), 0, "default"),
        ("mirrored", None, 0, "mirrored"),
        ("default", TWO_WORKERS, 8, "default"),
        ("multi_worker", TWO_WORKERS, 0, "multi_worker"),
    ],
)
def test_resolve_strategy(requested: str, tf_config: str | None, gpus: int, expected: str) -> None:
    name, reason = resolve_strategy(requested, tf_config, gpus)
    assert name == expected
    assert reason


def test_multi_worker_without_tf_config_says_how_to_fix() -> None:
    with pytest.raises(ValueError, match=r"trainer\.strategy=multi_worker needs TF_CONFIG"):
        resolve_strategy("multi_worker", None, 0)


def test_unknown_strategy_and_bad_tf_config() -> None:
    with pytest.raises(ValueError, match=r"unknown strategy 'tpu' .*valid: auto, default, mirrored, multi_worker"):
        resolve_strategy("tpu", None, 0)
    with pytest.raises(ValueError, match="TF_CONFIG is not a JSON object"):
        resolve_strategy("auto", "{oops", 0)


@pytest.mark.parametrize(
    ("requested", "replicas", "gpus", "expected"),
    [
        ("auto", 1, 0, False),
        ("auto", 2, 0, False),
        ("auto", 1, 1, True),
        ("auto", 8, 8, True),
        ("on", 1, 0, True),
        ("off", 8, 8, False),
    ],
)
def test_resolve_xla(requested: str, replicas: int, gpus: int, expected: bool) -> None:
    assert resolve_xla(requested, replicas, gpus)[0] is expected


def test_xla_on_with_cpu_replicas_is_refused() -> None:
    with pytest.raises(ValueError, match=r"trainer\.xla=on with 2 replicas on CPU devices fails"):
        resolve_xla("on", replicas=2, num_gpus=0)


@pytest.mark.parametrize(("setting", "parsed"), [("growth", ("growth", None)), ("limit_mb:2048", ("limit_mb", 2048))])
def test_parse_gpu_memory(setting: str, parsed: tuple[str, int | None]) -> None:
    assert parse_gpu_memory(setting) == parsed


@pytest.mark.parametrize("setting", ["grow", "limit_mb:", "limit_mb:0", "limit_mb:lots", "default:1"])
def test_bad_gpu_memory_setting(setting: str) -> None:
    with pytest.raises(GpuMemoryConfigError, match=r"trainer.gpu_memory = .* is not valid; use `growth`"):
        parse_gpu_memory(setting)


def test_memory_config_after_tensors_exist_is_a_clear_error() -> None:
    tf.constant(1.0)  # the runtime now exists, as it would after any earlier TensorFlow work
    fake_gpu = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    with pytest.raises(GpuMemoryConfigError, match="must be applied before TensorFlow creates its first tensor"):
        configure_gpu_memory("growth", physical_gpus=[fake_gpu])
    assert configure_gpu_memory("default", physical_gpus=[fake_gpu]) == []
    assert configure_gpu_memory("growth", physical_gpus=[]) == []  # no GPU: nothing to configure


def test_worker_index_counts_the_chief_first() -> None:
    cluster = {"chief": ["c:0"], "worker": ["a:1", "b:2"]}
    assert worker_index(json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})) == 0
    assert worker_index(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})) == 2
    assert worker_index(TWO_WORKERS) == 0
    assert worker_index(None) == 0
    with pytest.raises(ValueError, match="TF_CONFIG has no usable `task`"):
        worker_index('{"cluster": {}, "task": {"index": "x"}}')


CLUSTER_A_LIST, WORKERS_A_NUMBER, DEEP = '{"cluster": [1]}', '{"cluster": {"worker": 5}}', "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("read", "tf_config"),
    [
        (lambda text: resolve_strategy("auto", text, 0), CLUSTER_A_LIST),
        (lambda text: resolve_strategy("auto", text, 0), WORKERS_A_NUMBER),
        (lambda text: resolve_strategy("auto", text, 0), DEEP),
        (worker_index, CLUSTER_A_LIST),
        (worker_index, DEEP),
        (worker_index, '{"task": [], "cluster": {}}'),
    ],
    ids=["cluster-a-list", "workers-a-number", "nested-deep", "index-cluster-a-list", "index-deep", "task-a-list"],
)
def test_a_tf_config_of_another_shape_is_a_value_error(read: Any, tf_config: str) -> None:
    # found by the second adversarial pass over issue 35 (AttributeError, TypeError, RecursionError before)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        read(tf_config)
