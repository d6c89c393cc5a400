"""Train, evaluate and export: the Trainer's work as a plain function of file patterns and directories.

`train_and_export` is what `run_fn` calls; it needs no TFX, so tests and benchmarks call it directly. It runs
named phases, each a function tests can call alone:

1. `set_up_runtime` (runtime.py): GPU memory, strategy, precision, XLA, seeds, each with its reason;
2. `build_inputs`, `build_and_compile`, `fit`, `evaluate` (phases.py);
3. `export` (the SavedModel of the model contract) and `collect_metrics` / `write_metrics` (here).
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf
import tf_keras as keras

from components.trainer.diagnosis import diagnose, explain
from components.trainer.export import export_saved_model
from components.trainer.init_weights import load_initial_weights
from components.trainer.input_pipeline import list_files
from components.trainer.optimization import schedule_curve
from components.trainer.options import RunOptions, TrainerOptions
from components.trainer.phases import (
    CompiledModel,
    Evaluation,
    FitResult,
    build_and_compile,
    build_inputs,
    evaluate,
    fit,
    train_head_first,
)
from components.trainer.recipe import describe
from components.trainer.runtime import REPORTED_REASONS, TrainingRuntime, set_up_runtime
from components.trainer.warm_start import apply_warm_start
from foundation.bounded import parse_json
from foundation.contract import IMAGE_KEY, TRAINING_METRICS_FILE, read_label_map
from foundation.preprocessing_spec import PreprocessingSpec

logger = logging.getLogger(__name__)


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
    """Class names from the label map (`foundation.contract.read_label_map`: one rule for every reader).

    Raises:
        LabelMapError: the file is missing (naming `data.labels`), has a blank line or a duplicate name, or
            lists fewer than two classes.
    """
    return read_label_map(labels_path)


def backup_dir_for(base_dir: str, run: RunOptions, paths: Sequence[str]) -> str:
    """A backup dir keyed by the options and inputs, so a rerun of the same training resumes and nothing else does."""
    fingerprint = json.dumps({"run": run.model_dump(mode="json"), "inputs": sorted(paths)}, sort_keys=True, default=str)
    return f"{base_dir.rstrip('/')}/backup-{hashlib.sha256(fingerprint.encode()).hexdigest()[:16]}"


BACKUP_RECIPE_FILE = "recipe.json"


def note_backups(backup_dir: str, trainer: TrainerOptions, chief: bool) -> list[str]:
    """Records this run's optimizer in its backup dir, and says which other backups beside it are not resumed.

    A backup is resumed only by the same options and inputs (`backup_dir_for`); one written under another
    optimizer or schedule holds optimizer slots (momentum, Adam's moments) that mean nothing to this one, so the
    run starts fresh, and says so.

    Returns:
        One line per backup beside this one that is not resumed (also logged).
    """
    base = backup_dir.rstrip("/").rsplit("/", 1)[0]
    notes = []
    for other in sorted(tf.io.gfile.glob(f"{base}/backup-*")):
        if other.rstrip("/") == backup_dir.rstrip("/"):
            continue
        recorded = f"{other}/{BACKUP_RECIPE_FILE}"
        written_under = "other options"
        if tf.io.gfile.exists(recorded):
            with tf.io.gfile.GFile(recorded) as handle:
                written_under = parse_json(handle.read()).get("description", written_under)
        notes.append(
            f"trainer: the backup {other} was written under {written_under}; this run ("
            f"{trainer.optimizer.name}, {trainer.schedule.name} schedule) does not resume it and starts fresh"
        )
    for note in notes:
        logger.warning("%s", note)
    if chief:
        tf.io.gfile.makedirs(backup_dir)
        with tf.io.gfile.GFile(f"{backup_dir.rstrip('/')}/{BACKUP_RECIPE_FILE}", "w") as handle:
            description = f"{trainer.optimizer.name}, {trainer.schedule.name} schedule"
            handle.write(
                json.dumps({"description": description, "optimizer": trainer.optimizer.model_dump(mode="json")})
            )
    return notes


def read_encoded_images(file_patterns: Sequence[str], count: int, compression: str = "GZIP") -> list[bytes]:
    """The first `count` `image/encoded` values of the split (for warmup requests)."""
    if count <= 0:
        return []
    dataset = tf.data.TFRecordDataset(list_files(file_patterns), compression_type=compression).take(count)
    feature = {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string)}
    return [tf.io.parse_single_example(record, feature)[IMAGE_KEY].numpy() for record in dataset]


def export(
    model: keras.Model, run: RunOptions, eval_files: Sequence[str], labels: Sequence[str], export_dir: str, chief: bool
) -> None:
    """Writes the SavedModel of the model contract (signatures, label map, warmup requests from the eval split).

    Args:
        model: The float32 model to serve (`Evaluation.model`).
        run: The Trainer's options (image size, channels, label offset, warmup request count).
        eval_files: Where the warmup requests' images come from.
        labels: The class names, written as the model's label map asset.
        export_dir: The SavedModel directory.
        chief: Only the chief reads warmup images; other workers export to scratch without them.
    """
    warmup = read_encoded_images(eval_files, run.warmup_requests) if chief else []
    export_saved_model(
        model,
        export_dir,
        PreprocessingSpec(
            run.trainer.image_size,
            run.trainer.channels,
            run.trainer.max_image_pixels,
            central_crop=run.trainer.eval_crop,
        ),
        labels,
        warmup,
        label_offset=run.label_offset,
    )


@dataclass
class PhaseClock:
    """Seconds per phase: each `lap` closes the phase that ran since the previous one."""

    started: float = field(default_factory=time.perf_counter)
    seconds: dict[str, float] = field(default_factory=dict)

    def lap(self, phase: str) -> None:
        """Records the time since the previous lap (or the start) as `phase`."""
        self.seconds[phase] = time.perf_counter() - self.started - sum(self.seconds.values())

    def total(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.started


def collect_metrics(
    trainer: TrainerOptions,
    runtime: TrainingRuntime,
    compiled: CompiledModel,
    fitted: FitResult,
    evaluation: Evaluation,
    num_classes: int,
    clock: PhaseClock,
) -> dict[str, Any]:
    """The content of `training_metrics.json`: throughput, final losses and accuracies, and the runtime's choices.

    Args:
        trainer: The trainer section.
        runtime: The runtime the training ran under.
        compiled: The trained model.
        fitted: The fit phase's history and throughput.
        evaluation: The eval-split loss and accuracy.
        num_classes: The label map's class count.
        clock: The phases' seconds so far.
    """
    return {
        **fitted.throughput,
        "start_epoch": fitted.start_epoch,
        "epochs": trainer.epochs,
        "final_loss": evaluation.loss,
        "final_accuracy": evaluation.accuracy,
        "eval_top_predicted_share": evaluation.top_predicted_share,
        "final_train_loss": float(fitted.history["loss"][-1]),
        "final_train_accuracy": float(fitted.history["accuracy"][-1]),
        "peak_learning_rate": compiled.peak_learning_rate,
        "recipe": recipe_record(trainer, compiled, runtime.global_batch),
        "diagnosis": diagnose(
            float(fitted.history["accuracy"][-1]),
            float(fitted.history["loss"][-1]),
            evaluation.accuracy,
            evaluation.loss,
            num_classes,
            evaluation.top_predicted_share,
            compiled.recipe.warmup_steps,
            trainer.train_steps,
            eval_crop_differs=("crop" in trainer.augment) != (trainer.eval_crop < 1),
        ),
        "replicas": runtime.replicas,
        "workers": runtime.workers,
        "chief": runtime.chief,
        "strategy": runtime.strategy_name,
        "precision": runtime.policy,
        "xla": runtime.jit_compile,
        "loss_scaling": compiled.loss_scaling,
        "reasons": {name: runtime.reasons[name] for name in REPORTED_REASONS},
        "gpu_memory": runtime.gpu_memory,
        "model": trainer.model,
        "num_classes": num_classes,
        "phase_seconds": dict(clock.seconds),
        "total_seconds": clock.total(),
    }


def recipe_record(trainer: TrainerOptions, compiled: CompiledModel, global_batch: int) -> dict[str, Any]:
    """The recipe as it ran: optimizer, schedule (with its curve, for the report's plot), loss, weight decay."""
    recipe = compiled.recipe
    return {
        "description": describe(trainer, global_batch),
        "optimizer": trainer.optimizer.model_dump(mode="json"),
        "optimizer_class": type(recipe.optimizer).__name__,
        "schedule": trainer.schedule.model_dump(mode="json"),
        "peak_learning_rate": recipe.peak_learning_rate,
        "warmup_steps": recipe.warmup_steps,
        "train_steps": trainer.train_steps,
        "label_smoothing": trainer.label_smoothing,
        "decayed_in_loss": compiled.decayed_variables,
        "model": trainer.model,
        "zero_gamma": trainer.zero_gamma,
        "augment": list(trainer.augment),
        "crop_area": list(trainer.crop_area),
        "crop_aspect": list(trainer.crop_aspect),
        "scale_range": list(trainer.scale_range),
        "eval_crop": trainer.eval_crop,
        "curve": [[step, rate] for step, rate in schedule_curve(recipe.schedule)],
    }


def write_metrics(metrics: dict[str, Any], directories: Sequence[str]) -> None:
    """Writes `metrics` as `training_metrics.json` (sorted keys) into each directory, creating it."""
    for directory in directories:
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(f"{directory.rstrip('/')}/{TRAINING_METRICS_FILE}", "w") as handle:
            handle.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")


@contextmanager
def _scratch_dir() -> Iterator[str]:
    # Non-chief workers log and export too (the standard MultiWorkerMirroredStrategy pattern), into scratch.
    with tempfile.TemporaryDirectory(prefix="tfxp-worker-", ignore_cleanup_errors=True) as scratch:
        yield scratch


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
        LabelMapError: the label map is missing or malformed (`read_labels`).
        ValueError: a strategy this environment cannot give (e.g. `multi_worker` without TF_CONFIG).
        FileNotFoundError: no input files.
    """
    clock = PhaseClock()
    runtime = set_up_runtime(run.trainer)  # first: it configures devices before any tensor exists
    labels = read_labels(run.labels_path)
    train_data = build_inputs(run, paths.train_files, runtime, training=True)
    compiled = build_and_compile(run.trainer, runtime, len(labels))
    # Pretrained weights first; a served model of this pipeline that matches (warm start) then takes over.
    initial = load_initial_weights(compiled.model, run.trainer.init_weights)
    warm = apply_warm_start(compiled.model, run.trainer.warm_start, run.serving_base, labels)
    with _scratch_dir() as scratch:
        clock.lap("setup")
        log_dir = paths.model_run_dir if runtime.chief else scratch
        head_steps = train_head_first(compiled, train_data, run.trainer, runtime)
        if paths.backup_dir:
            note_backups(paths.backup_dir, run.trainer, runtime.chief)
        fitted = fit(compiled, train_data, run.trainer, runtime, log_dir, paths.backup_dir, extra_callbacks)
        clock.lap("fit")
        evaluation = evaluate(compiled, run, paths.eval_files, runtime)
        clock.lap("evaluate")
        export_dir = paths.serving_model_dir if runtime.chief else f"{scratch}/export"
        export(evaluation.model, run, paths.eval_files, labels, export_dir, runtime.chief)
        clock.lap("export")
    metrics = collect_metrics(run.trainer, runtime, compiled, fitted, evaluation, len(labels), clock)
    metrics["warm_start"] = warm.to_dict()
    metrics["init_weights"] = {**initial.to_dict(), "head_only_steps": head_steps}
    if metrics["diagnosis"]["broken"]:
        logger.warning("trainer: %s", explain(metrics["diagnosis"]))
    if runtime.chief:
        write_metrics(metrics, (paths.model_run_dir, *paths.metrics_dirs))
    return metrics
