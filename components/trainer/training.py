"""Train, evaluate and export: the Trainer's work as a plain function of file patterns and directories.

`train_and_export` is what `run_fn` calls; it needs no TFX, so tests and benchmarks call it directly.
Order matters: GPU memory is configured before any tensor exists, then the strategy is created (a
MultiWorkerMirroredStrategy must come before other ops), then the precision policy, model and data.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf
import tf_keras as keras

from components.contract import read_label_map
from components.trainer.callbacks import ProfilerWindow, StopAtStep, ThroughputCallback
from components.trainer.export import export_saved_model
from components.trainer.input_pipeline import IMAGE_KEY, InputOptions, list_files, make_dataset
from components.trainer.memory import configure_gpu_memory
from components.trainer.models import ModelSpec, build_model
from components.trainer.options import RunOptions, TrainerOptions
from components.trainer.precision import resolve_precision
from components.trainer.preprocessing import PreprocessingSpec
from components.trainer.strategy import (
    WarmupCosineDecay,
    cluster_workers,
    create_strategy,
    is_chief,
    resolve_strategy,
    scaled_learning_rate,
    worker_index,
)
from components.trainer.xla import resolve_xla

logger = logging.getLogger(__name__)

METRICS_FILE = "training_metrics.json"


@dataclass(frozen=True)
class TrainerPaths:
    """Where the Trainer reads and writes.

    Attributes:
        train_files: File patterns of the train split (gzip TFRecords).
        eval_files: File patterns of the eval split.
        serving_model_dir: Where the SavedModel goes (TFX: `fn_args.serving_model_dir`).
        model_run_dir: TensorBoard logs and `training_metrics.json` (TFX: `fn_args.model_run_dir`).
        backup_dir: Persistent BackupAndRestore dir (survives a killed run); None = no backup.
        metrics_dirs: Further directories that receive a copy of `training_metrics.json`.
    """

    train_files: Sequence[str]
    eval_files: Sequence[str]
    serving_model_dir: str
    model_run_dir: str
    backup_dir: str | None = None
    metrics_dirs: Sequence[str] = ()


def read_labels(labels_path: str) -> list[str]:
    """Class names from the label map (`components.contract.read_label_map`: one rule for every reader).

    Raises:
        LabelMapError: the file is missing (naming `data.labels`), has a blank line or a duplicate name, or
            lists fewer than two classes.
    """
    return read_label_map(labels_path)


def backup_dir_for(base_dir: str, run: RunOptions, paths: Sequence[str]) -> str:
    """A backup dir keyed by the options and inputs, so a rerun of the same training resumes and nothing else does."""
    fingerprint = json.dumps({"run": run.model_dump(mode="json"), "inputs": sorted(paths)}, sort_keys=True, default=str)
    return f"{base_dir.rstrip('/')}/backup-{hashlib.sha256(fingerprint.encode()).hexdigest()[:16]}"


def _gpu_capabilities() -> list[tuple[int, int]]:
    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            capabilities.append(tuple(capability))
    return capabilities


def read_encoded_images(file_patterns: Sequence[str], count: int, compression: str = "GZIP") -> list[bytes]:
    """The first `count` `image/encoded` values of the split (for warmup requests)."""
    if count <= 0:
        return []
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type=compression).take(count)
    feature = {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)}
    return [tf.io.parse_single_example(record, feature)[IMAGE_KEY].numpy() for record in dataset]


def _input_options(
    trainer: TrainerOptions, run: RunOptions, batch: int, training: bool, workers: int, index: int = 0
) -> InputOptions:
    return InputOptions(
        image_size=trainer.image_size,
        channels=trainer.channels,
        batch_size=batch,
        training=training,
        label_offset=run.label_offset,
        cache=trainer.cache,
        shuffle_buffer=trainer.shuffle_buffer,
        augment=trainer.augment,
        deterministic=trainer.deterministic,
        seed=trainer.seed,
        num_workers=workers,
        worker_index=index,
    )


def train_and_export(
    run: RunOptions, paths: TrainerPaths, extra_callbacks: Sequence[keras.callbacks.Callback] = ()
) -> dict[str, Any]:
    """Trains `run.trainer.model`, evaluates it on the eval split and exports the SavedModel.

    Args:
        run: The Trainer's options.
        paths: Inputs and outputs.
        extra_callbacks: Further Keras callbacks for `fit` (after the Trainer's own; tests and benchmarks).

    Returns:
        The training metrics (also written as `training_metrics.json` to `model_run_dir` and `metrics_dirs`).

    Raises:
        GpuMemoryConfigError: GPU memory could not be configured (e.g. TensorFlow initialized too early).
        ValueError: an unknown model, strategy, precision or XLA setting; a bad label map.
        FileNotFoundError: no input files, or no label map.
    """
    started = time.perf_counter()
    phases: dict[str, float] = {}
    trainer = run.trainer
    memory = configure_gpu_memory(trainer.gpu_memory)
    num_gpus = len(tf.config.list_physical_devices("GPU"))
    tf_config = os.environ.get("TF_CONFIG")
    strategy_name, strategy_reason = resolve_strategy(trainer.strategy, tf_config, num_gpus)
    strategy = create_strategy(strategy_name)
    policy, precision_reason = resolve_precision(trainer.precision, _gpu_capabilities())
    replicas = strategy.num_replicas_in_sync
    jit_compile, xla_reason = resolve_xla(trainer.xla, replicas=replicas, num_gpus=num_gpus)
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(trainer.seed)
    if trainer.deterministic:
        tf.config.experimental.enable_op_determinism()
    for line in (strategy_reason, precision_reason, xla_reason):
        logger.info("trainer: %s", line)

    labels = read_labels(run.labels_path)
    global_batch = trainer.batch_size * replicas
    workers = cluster_workers(tf_config) if strategy_name == "multi_worker" else 1
    index = worker_index(tf_config) if workers > 1 else 0
    train_data = make_dataset(paths.train_files, _input_options(trainer, run, global_batch, True, workers, index))
    model_spec = ModelSpec(trainer.image_size, trainer.channels, len(labels), trainer.width)
    peak_learning_rate = scaled_learning_rate(trainer.learning_rate, global_batch, trainer.base_batch_size)
    with strategy.scope():
        model = build_model(trainer.model, model_spec)
        schedule = WarmupCosineDecay(peak_learning_rate, trainer.warmup_steps, trainer.train_steps)
        model.compile(
            optimizer=keras.optimizers.Adam(schedule),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=jit_compile,
        )

    chief = is_chief(strategy)
    scratch = tempfile.mkdtemp(prefix="tfxp-worker-")  # non-chief logs and export (the standard MWMS pattern)
    try:
        throughput = ThroughputCallback(global_batch)
        callbacks: list[keras.callbacks.Callback] = [throughput, StopAtStep(trainer.train_steps)]
        log_dir = paths.model_run_dir if chief else scratch
        callbacks += _tensorboard(log_dir)
        if trainer.profile_window:
            callbacks.append(ProfilerWindow(log_dir, *trainer.profile_window))
        callbacks += extra_callbacks
        if paths.backup_dir:
            callbacks.insert(0, keras.callbacks.BackupAndRestore(paths.backup_dir, delete_checkpoint=True))
        phases["setup"] = time.perf_counter() - started
        history = model.fit(
            train_data, epochs=trainer.epochs, steps_per_epoch=trainer.epoch_steps, callbacks=callbacks, verbose=2
        )
        if paths.backup_dir and chief:
            _remove_backup(paths.backup_dir)
        phases["fit"] = time.perf_counter() - started - sum(phases.values())
        # Evaluate the float32 export copy on one device: the accuracy reported is the served model's, and
        # no replica gets an empty final eval batch (which breaks Conv2D under MirroredStrategy).
        export_model = _float32_copy(model, trainer.model, model_spec)
        export_model.compile(
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
        eval_data = make_dataset(paths.eval_files, _input_options(trainer, run, global_batch, False, 1))
        evaluation = export_model.evaluate(eval_data, steps=trainer.eval_steps or None, return_dict=True, verbose=0)
        phases["evaluate"] = time.perf_counter() - started - sum(phases.values())

        export_dir = paths.serving_model_dir if chief else f"{scratch}/export"
        warmup = read_encoded_images(paths.eval_files, run.warmup_requests) if chief else []
        export_saved_model(
            export_model,
            export_dir,
            PreprocessingSpec(trainer.image_size, trainer.channels),
            labels,
            warmup,
            label_offset=run.label_offset,
        )
        phases["export"] = time.perf_counter() - started - sum(phases.values())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    metrics = {
        **throughput.summary(),
        "start_epoch": throughput.start_epoch,
        "epochs": trainer.epochs,
        "final_loss": float(evaluation["loss"]),
        "final_accuracy": float(evaluation["accuracy"]),
        "final_train_loss": float(history.history["loss"][-1]),
        "final_train_accuracy": float(history.history["accuracy"][-1]),
        "peak_learning_rate": peak_learning_rate,
        "replicas": replicas,
        "chief": chief,
        "strategy": strategy_name,
        "precision": policy,
        "xla": jit_compile,
        "loss_scaling": isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer),
        "reasons": {"strategy": strategy_reason, "precision": precision_reason, "xla": xla_reason},
        "gpu_memory": memory,
        "model": trainer.model,
        "num_classes": len(labels),
        "phase_seconds": phases,
        "total_seconds": time.perf_counter() - started,
    }
    if chief:
        for directory in (paths.model_run_dir, *paths.metrics_dirs):
            tf.io.gfile.makedirs(directory)
            with tf.io.gfile.GFile(f"{directory.rstrip('/')}/{METRICS_FILE}", "w") as handle:
                handle.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


def _remove_backup(backup_dir: str) -> None:
    # BackupAndRestore deletes its checkpoint files but leaves the directory: a finished run leaves none.
    try:
        if tf.io.gfile.exists(backup_dir):
            tf.io.gfile.rmtree(backup_dir)
    except tf.errors.NotFoundError:
        pass  # a worker removed its own temp backup at the same moment


def _tensorboard(log_dir: str) -> list[keras.callbacks.Callback]:
    # TensorFlow 2.21 no longer depends on the tensorboard package, without which summaries cannot be written.
    if importlib.util.find_spec("tensorboard") is None:
        logger.warning("trainer: the tensorboard package is not installed, so no TensorBoard scalars are written")
        return []
    # profile_batch=0: ProfilerWindow profiles, also without the tensorboard package.
    return [keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False, profile_batch=0)]


def _float32_copy(model: keras.Model, name: str, spec: ModelSpec) -> keras.Model:
    """The trained model rebuilt in float32 with the same weights.

    Mixed-precision variables are float32 already, so this loses nothing; the exported graph then has no
    float16/bfloat16 ops, which CPU serving and TFLite conversion handle poorly.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        copy = build_model(name, spec)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    copy.set_weights(model.get_weights())
    return copy
