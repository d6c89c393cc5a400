"""Keras callbacks of the Trainer: throughput measurement and stopping at an exact step count."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras


class ThroughputCallback(keras.callbacks.Callback):
    """Records the wall time of every training step and summarises images/s and step-time percentiles.

    A step's time is the interval between consecutive `on_train_batch_end` calls, so it includes waiting for
    input. The first `skip_steps` steps of the run (tracing, XLA compilation, filling the input pipeline) are
    left out, and so is the work between epochs (checkpoints, logs): an epoch's first step is timed from its
    own `on_train_batch_begin`.

    Example:
        throughput = ThroughputCallback(global_batch=256)
        model.fit(..., callbacks=[throughput])
        throughput.summary()["images_per_second"]
    """

    def __init__(self, global_batch: int, skip_steps: int = 5) -> None:
        super().__init__()
        self.global_batch = global_batch
        self.skip_steps = skip_steps
        self.step_seconds: list[float] = []
        self.steps_seen = 0
        self._last: float | None = None
        self._train_start: float | None = None
        self._train_seconds = 0.0
        self.start_epoch: int | None = None
        self.steps_restored = 0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._train_start = time.perf_counter()
        # BackupAndRestore (before this callback) has restored an interrupted run by now: the optimizer's step
        # count is where that run's last backup stood, the steps this run does not do again.
        self.steps_restored = int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # The first epoch seen is >0 when BackupAndRestore resumed an interrupted run.
        if self.start_epoch is None:
            self.start_epoch = epoch
        self._last = None

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._last is None:
            self._last = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # Keras converts `logs` to numpy for callbacks without `_supports_tf_logs`, which waits for the step to
        # finish, so these timestamps are real step ends, not asynchronous dispatch.
        now = time.perf_counter()
        self.steps_seen += 1
        if self._last is not None and self.steps_seen > self.skip_steps:
            self.step_seconds.append(now - self._last)
        self._last = now

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._train_start is not None:
            self._train_seconds = time.perf_counter() - self._train_start

    def summary(self) -> dict[str, float | int]:
        """images/s over the measured steps, step-time percentiles (ms) and step counts: `steps` trained by this
        run, `steps_restored` from an interrupted run's backup (the model has trained both)."""
        times = np.asarray(self.step_seconds)
        measured = {
            "images_per_second": float(self.global_batch * len(times) / times.sum()) if len(times) else 0.0,
            "step_time_ms_p50": float(np.percentile(times, 50) * 1e3) if len(times) else 0.0,
            "step_time_ms_p90": float(np.percentile(times, 90) * 1e3) if len(times) else 0.0,
            "step_time_ms_p99": float(np.percentile(times, 99) * 1e3) if len(times) else 0.0,
        }
        return {
            **measured,
            "global_batch": self.global_batch,
            "steps": self.steps_seen,
            "steps_restored": self.steps_restored,
            "measured_steps": len(times),
            "fit_seconds": self._train_seconds,
        }


class StopAtStep(keras.callbacks.Callback):
    """Stops training after exactly `total_steps` optimizer steps (the last epoch may be short).

    Counts from the optimizer's iterations, so it stays right when BackupAndRestore resumes mid-run.
    """

    def __init__(self, total_steps: int) -> None:
        super().__init__()
        self.total_steps = total_steps

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if int(self.model.optimizer.iterations.numpy()) >= self.total_steps:
            self.model.stop_training = True


class ProfilerWindow(keras.callbacks.Callback):
    """Profiles training steps `start`..`stop` (1-based, inclusive) into `log_dir/plugins/profile/`.

    The trace opens in TensorBoard's Profile tab (`pip install tensorboard tensorboard-plugin-profile`). Uses
    TensorFlow's profiler directly, so it works without the tensorboard package that Keras's TensorBoard
    callback needs. Skip the first steps (tracing, compilation) to profile the steady state.
    """

    def __init__(self, log_dir: str, start: int, stop: int) -> None:
        super().__init__()
        if not 1 <= start <= stop:
            raise ValueError(f"trainer.profile_steps = {start},{stop}: need 1 ≤ start ≤ stop, e.g. `10,20`")
        self.log_dir = log_dir
        self.start, self.stop = start, stop
        self._step = 0
        self._running = False
        self.profiled_steps = 0

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._step += 1
        if self._step == self.start:
            tf.profiler.experimental.start(self.log_dir)
            self._running = True

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._running:
            self.profiled_steps += 1
            if self._step >= self.stop:
                self._finish()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._running:  # training ended inside the window
            self._finish()

    def _finish(self) -> None:
        tf.profiler.experimental.stop()
        self._running = False
