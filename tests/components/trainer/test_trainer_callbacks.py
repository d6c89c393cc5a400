"""Trainer callbacks on a tiny Keras model: throughput summary, exact step stop, profiler window."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tf_keras as keras

from components.trainer.callbacks import ProfilerWindow, StopAtStep, ThroughputCallback


def _tiny_model() -> keras.Model:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _data(batch: int = 4) -> Any:
    import tensorflow as tf

    return tf.data.Dataset.from_tensors((np.ones((batch, 3), np.float32), np.zeros((batch, 2), np.float32))).repeat()


class _Sleep(keras.callbacks.Callback):
    """Makes every step take at least `seconds`, so throughput has a known upper bound."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        time.sleep(self.seconds)


def test_throughput_measures_steps_after_warmup() -> None:
    # The throughput callback comes first, so an epoch's first step is timed from before the sleep too and
    # every measured step takes at least 20 ms.
    throughput = ThroughputCallback(global_batch=4, skip_steps=2)
    _tiny_model().fit(_data(), epochs=2, steps_per_epoch=6, callbacks=[throughput, _Sleep(0.02)], verbose=0)
    summary = throughput.summary()
    assert summary["steps"] == 12
    assert summary["measured_steps"] == 10  # 12 steps − 2 skipped
    assert summary["step_time_ms_p50"] >= 20.0
    assert summary["step_time_ms_p50"] <= summary["step_time_ms_p90"] <= summary["step_time_ms_p99"]
    assert 0 < summary["images_per_second"] <= 4 / 0.02
    assert throughput.start_epoch == 0 and summary["fit_seconds"] > 0
    assert summary["steps_restored"] == 0


class _Interrupt(keras.callbacks.Callback):
    """Kills training at the end of epoch `epoch` (after BackupAndRestore has backed it up)."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch == self.epoch:
            raise RuntimeError("killed")


def test_throughput_counts_the_steps_a_resumed_run_restored(tmp_path: Path) -> None:
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="killed"):
        _tiny_model().fit(
            _data(), epochs=3, steps_per_epoch=4, callbacks=[keras.callbacks.BackupAndRestore(backup), _Interrupt(1)]
        )
    throughput = ThroughputCallback(global_batch=4)
    model = _tiny_model()
    model.fit(
        _data(),
        epochs=3,
        steps_per_epoch=4,
        callbacks=[keras.callbacks.BackupAndRestore(backup), throughput],
        verbose=0,
    )
    summary = throughput.summary()
    assert throughput.start_epoch == 2
    assert (summary["steps"], summary["steps_restored"]) == (4, 8)
    assert int(model.optimizer.iterations.numpy()) == summary["steps"] + summary["steps_restored"]


def test_throughput_without_measured_steps_reports_zero() -> None:
    throughput = ThroughputCallback(global_batch=4, skip_steps=100)
    _tiny_model().fit(_data(), epochs=1, steps_per_epoch=3, callbacks=[throughput], verbose=0)
    assert throughput.summary()["images_per_second"] == 0.0 and throughput.summary()["measured_steps"] == 0


def test_stop_at_step_cuts_the_last_epoch_short() -> None:
    model = _tiny_model()
    history = model.fit(_data(), epochs=3, steps_per_epoch=4, callbacks=[StopAtStep(10)], verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 10
    assert len(history.history["loss"]) == 3


def test_profiler_window_writes_a_trace(tmp_path: Path) -> None:
    profiler = ProfilerWindow(str(tmp_path), start=2, stop=3)
    _tiny_model().fit(_data(), epochs=1, steps_per_epoch=5, callbacks=[profiler], verbose=0)
    assert profiler.profiled_steps == 2
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))


def test_profiler_window_closed_when_training_ends_inside_it(tmp_path: Path) -> None:
    profiler = ProfilerWindow(str(tmp_path), start=2, stop=50)
    _tiny_model().fit(_data(), epochs=1, steps_per_epoch=3, callbacks=[profiler], verbose=0)
    assert profiler.profiled_steps == 2
    assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))


def test_profiler_window_rejects_a_bad_window(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"trainer\.profile_steps = 5,2: need 1 ≤ start ≤ stop"):
        ProfilerWindow(str(tmp_path), start=5, stop=2)
