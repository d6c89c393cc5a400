"""The Trainer's phases one at a time: runtime set-up, build and compile, metrics (no training run)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tf_keras as keras

from components.trainer.models import ModelSpec
from components.trainer.optimization import build_recipe
from components.trainer.options import RunOptions, TrainerOptions
from components.trainer.phases import (
    CompiledModel,
    EmptyEvalSplitError,
    Evaluation,
    FitResult,
    build_and_compile,
    evaluate,
)
from components.trainer.runtime import TrainingRuntime, set_up_runtime
from components.trainer.training import PhaseClock, collect_metrics, write_metrics
from foundation.contract import TRAINING_METRICS_FILE

TINY = TrainerOptions(image_size=8, channels=1, width=4, batch_size=16, train_steps=7, steps_per_epoch=3)

# The keys of training_metrics.json that reports, benchmarks and the run summary read.
METRICS_KEYS = {
    "images_per_second", "step_time_ms_p50", "step_time_ms_p90", "step_time_ms_p99", "global_batch", "steps",
    "steps_restored", "measured_steps", "fit_seconds", "start_epoch", "epochs", "final_loss", "final_accuracy",
    "final_train_loss",
    "final_train_accuracy", "peak_learning_rate", "replicas", "workers", "chief", "strategy", "precision", "xla",
    "loss_scaling", "reasons", "gpu_memory", "model", "num_classes", "phase_seconds", "total_seconds", "recipe",
    "diagnosis", "eval_top_predicted_share",
}  # fmt: skip


@pytest.fixture(autouse=True)
def float32_policy() -> Iterator[None]:
    """set_up_runtime sets the process-wide precision policy; every test starts and ends in float32."""
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="module")
def runtime() -> TrainingRuntime:
    return set_up_runtime(TINY, tf_config="")


def test_runtime_on_cpu_is_one_float32_device_with_a_reason_for_each_choice(runtime: TrainingRuntime) -> None:
    assert (runtime.strategy_name, runtime.replicas, runtime.policy, runtime.jit_compile) == (
        "default",
        1,
        "float32",
        False,
    )
    assert runtime.chief and (runtime.workers, runtime.worker_index) == (1, 0)
    assert runtime.global_batch == TINY.batch_size
    assert runtime.gpu_memory == []
    # In set-up order: memory before any tensor, the strategy before other ops, then precision and XLA.
    assert list(runtime.reasons) == ["gpu_memory", "strategy", "precision", "xla", "seed", "determinism"]
    assert runtime.reasons["gpu_memory"].startswith("gpu_memory=growth: nothing to configure")
    assert runtime.reasons["strategy"] == "auto: one worker and 0 GPU(s), so a single device"
    assert runtime.reasons["precision"].startswith("auto: no GPU visible, so float32")
    assert runtime.reasons["xla"] == "xla auto: off on CPU (compile time rarely pays back)"
    assert runtime.reasons["seed"].startswith(f"seed {TINY.seed} ")
    assert runtime.reasons["determinism"].startswith("op determinism off")


def test_runtime_sets_the_requested_precision_policy_globally() -> None:
    runtime = set_up_runtime(TrainerOptions(precision="mixed_bfloat16", strategy="default"), tf_config="")
    assert runtime.policy == "mixed_bfloat16"
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert runtime.reasons["precision"].startswith("requested mixed_bfloat16; no GPU visible")
    assert runtime.reasons["strategy"] == "requested default"


@pytest.mark.parametrize(
    ("options", "tf_config", "message"),
    [
        # The config validates names; what only the environment decides is checked here.
        (TrainerOptions(strategy="multi_worker"), "", "multi_worker needs TF_CONFIG"),
        (TrainerOptions(), "{not json", "TF_CONFIG is not a JSON object with a `cluster` mapping"),
    ],
)
def test_runtime_rejects_a_strategy_the_environment_cannot_give(
    options: TrainerOptions, tf_config: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        set_up_runtime(options, tf_config=tf_config)


def test_build_and_compile_gives_a_compiled_model_with_one_output_per_class(runtime: TrainingRuntime) -> None:
    compiled = build_and_compile(TINY, runtime, num_classes=7)
    assert compiled.model.output_shape == (None, 7)
    assert (compiled.name, compiled.spec.num_classes, compiled.spec.image_size) == ("small_resnet", 7, 8)
    # Linear scaling: the base rate at the base batch, proportionally more for a bigger global batch.
    assert compiled.peak_learning_rate == pytest.approx(
        TINY.schedule.learning_rate * 16 / TINY.schedule.base_batch_size
    )
    assert not compiled.loss_scaling
    logs = compiled.model.train_on_batch(np.zeros((2, 8, 8, 1), np.float32), np.array([0, 6]), return_dict=True)
    assert set(logs) == {"loss", "accuracy"} and np.isfinite(logs["loss"])


def test_metrics_of_a_fake_history_and_evaluation(runtime: TrainingRuntime) -> None:
    recipe = build_recipe(TINY, global_batch=16, num_classes=10)
    compiled = CompiledModel(keras.Sequential(), "small_resnet", ModelSpec(8, 1, 10, 4), recipe)
    throughput = {
        **{"images_per_second": 900.0, "step_time_ms_p50": 1.0, "step_time_ms_p90": 2.0, "step_time_ms_p99": 3.0},
        **{"global_batch": 16, "steps": 7, "steps_restored": 0, "measured_steps": 2, "fit_seconds": 0.5},
    }
    fitted = FitResult({"loss": [2.0, 0.75], "accuracy": [0.25, 0.625]}, throughput, start_epoch=1)
    evaluation = Evaluation(compiled.model, loss=0.5, accuracy=0.875)
    clock = PhaseClock(seconds={"setup": 1.0, "fit": 2.0})

    metrics = collect_metrics(TINY, runtime, compiled, fitted, evaluation, num_classes=10, clock=clock)

    assert set(metrics) == METRICS_KEYS
    assert metrics["images_per_second"] == 900.0 and metrics["steps"] == 7
    assert (metrics["final_loss"], metrics["final_accuracy"]) == (0.5, 0.875)
    assert (metrics["final_train_loss"], metrics["final_train_accuracy"]) == (0.75, 0.625)
    assert (metrics["start_epoch"], metrics["epochs"], metrics["num_classes"]) == (1, 3, 10)
    assert metrics["peak_learning_rate"] == pytest.approx(0.1 * 16 / 64)
    assert (
        metrics["recipe"]["description"]
        == "sgd, momentum 0.9, cosine schedule, peak 0.025 at global batch 16, warmup 1 steps"
    )
    assert metrics["recipe"]["curve"][0] == [0, pytest.approx(0.025)] and metrics["recipe"]["warmup_steps"] == 1
    assert metrics["diagnosis"] == {"broken": False, "symptoms": [], "likely_causes": []}
    assert (metrics["strategy"], metrics["precision"], metrics["xla"], metrics["loss_scaling"]) == (
        "default",
        "float32",
        False,
        False,
    )
    assert metrics["reasons"] == {key: runtime.reasons[key] for key in ("strategy", "precision", "xla")}
    assert metrics["phase_seconds"] == {"setup": 1.0, "fit": 2.0}
    assert metrics["total_seconds"] >= 0
    json.dumps(metrics)  # written as JSON as it is


def test_phase_clock_laps_add_up_to_the_total() -> None:
    clock = PhaseClock()
    clock.lap("setup")
    clock.lap("fit")
    assert list(clock.seconds) == ["setup", "fit"]
    assert all(seconds >= 0 for seconds in clock.seconds.values())
    assert sum(clock.seconds.values()) <= clock.total()


def test_write_metrics_writes_sorted_json_into_each_directory(tmp_path: Path) -> None:
    directories = [str(tmp_path / "run"), str(tmp_path / "model" / "nested")]
    write_metrics({"b": 1, "a": [2.5]}, directories)
    for directory in directories:
        text = (Path(directory) / TRAINING_METRICS_FILE).read_text()
        assert json.loads(text) == {"a": [2.5], "b": 1}
        assert text.index('"a"') < text.index('"b"') and text.endswith("\n")


def test_evaluating_an_empty_eval_split_names_it_instead_of_a_keyerror(
    runtime: TrainingRuntime, tmp_path: Path
) -> None:
    import tensorflow as tf

    empty = tmp_path / "eval-00000-of-00001.gz"
    with tf.io.TFRecordWriter(str(empty), options="GZIP"):
        pass
    compiled = build_and_compile(TINY, runtime, num_classes=3)
    run = RunOptions(trainer=TINY, labels_path=str(tmp_path / "labels.txt"))

    with pytest.raises(EmptyEvalSplitError, match=rf"the eval split has no records \({empty}\), so the trained"):
        evaluate(compiled, run, [str(empty)], runtime)
