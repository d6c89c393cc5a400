"""The device export end to end: convert, evaluate against the SavedModel, gate, write, push.

`export_edge_model` does the work without writing anything; `write_edge_model` lays out the EdgeModel
directory (`model.tflite`, `labels.txt`, `edge_metadata.json`) and `push_atomically` publishes it as
`<edge base>/<model>/<version>/` (a staging directory beside it, renamed when complete).

Example:
    export = export_edge_model(Path("model/Format-Serving"), "data/digits", EdgeOptions(mode="int8"))
    target = next_version_dir("tfxp_output/edge/digits") if export.blessed else None
    write_edge_model(export, Path("edge_model"), pushed_path=target)
    if target:
        push_atomically(Path("edge_model"), target)
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf

from components.trainer.preprocessing import PreprocessingSpec
from edge.benchmark import benchmark
from edge.data import load_split
from edge.errors import EdgeError
from edge.evaluate import evaluate, evaluate_saved_model
from edge.options import EdgeOptions
from edge.quantize import SIGNATURE, convert, get_mode
from edge.runtime import TfliteModel

MODEL_FILE = "model.tflite"
LABELS_FILE = "labels.txt"
METADATA_FILE = "edge_metadata.json"
EDGE_FILES = (MODEL_FILE, LABELS_FILE, METADATA_FILE)
METADATA_FORMAT = "tfxp.edge/1"


@dataclass(frozen=True)
class GateResult:
    """The accuracy gate's verdict.

    Attributes:
        blessed: Whether the TFLite model may be pushed.
        drop: SavedModel accuracy − TFLite accuracy (negative when TFLite is better).
        reason: One sentence with both accuracies, the drop and the limit.
    """

    blessed: bool
    drop: float
    reason: str


def accuracy_gate(saved_model_accuracy: float, tflite_accuracy: float, max_drop: float) -> GateResult:
    """Blesses the TFLite model when it loses at most `max_drop` accuracy against the SavedModel."""
    drop = saved_model_accuracy - tflite_accuracy
    blessed = drop <= max_drop + 1e-9  # a drop exactly at the limit passes despite float rounding
    verdict = "within" if blessed else "exceeds"
    reason = (
        f"accuracy drop {drop * 100:.2f} points (SavedModel {saved_model_accuracy:.4f} → TFLite "
        f"{tflite_accuracy:.4f}) {verdict} edge.max_accuracy_drop {max_drop * 100:.2f} points"
    )
    if not blessed:
        reason += f", by {(drop - max_drop) * 100:.2f} points; not pushed"
    return GateResult(blessed=blessed, drop=drop, reason=reason)


@dataclass(frozen=True)
class EdgeExport:
    """A converted, evaluated and gated device model (nothing written yet).

    Attributes:
        tflite: The TFLite flatbuffer.
        labels: Class names, one per output index.
        metadata: What `edge_metadata.json` holds.
        gate: The accuracy gate's verdict.
    """

    tflite: bytes
    labels: list[str]
    metadata: dict[str, Any] = field(repr=False)
    gate: GateResult

    @property
    def blessed(self) -> bool:
        return self.gate.blessed


def read_labels(saved_model: Path) -> list[str]:
    """Class names from the SavedModel's `assets/labels.txt`.

    Raises:
        EdgeError: the file is missing or empty.
    """
    path = f"{saved_model}/assets/{LABELS_FILE}"
    if not tf.io.gfile.exists(path):
        raise EdgeError(
            f"SavedModel {saved_model} has no assets/{LABELS_FILE}; the model contract puts the label map "
            "(one class name a line) there; export the model with the tfxp trainer"
        )
    with tf.io.gfile.GFile(path) as handle:
        labels = [line.strip() for line in handle.read().splitlines() if line.strip()]
    if not labels:
        raise EdgeError(f"{path} is empty; it must hold one class name a line")
    return labels


def read_preprocessing(saved_model: Path) -> PreprocessingSpec:
    """The SavedModel's preprocessing: `assets/preprocessing.json`, else the `serving_preprocessed` input shape.

    Raises:
        EdgeError: neither gives a square image size.
    """
    path = f"{saved_model}/assets/preprocessing.json"
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as handle:
            try:
                return PreprocessingSpec.from_json(handle.read())
            except ValueError as error:
                raise EdgeError(f"{path}: {error}") from None
    # Models made outside tfxp may lack the asset; their signature's input shape says the same.
    loaded = tf.saved_model.load(str(saved_model))
    if SIGNATURE not in loaded.signatures:
        raise EdgeError(
            f"SavedModel {saved_model} has neither assets/preprocessing.json nor a `{SIGNATURE}` signature; "
            "the model contract requires both"
        )
    (spec,) = loaded.signatures[SIGNATURE].structured_input_signature[1].values()
    shape = spec.shape.as_list()
    if len(shape) != 4 or shape[1] is None or shape[1] != shape[2] or shape[3] not in (1, 3):
        raise EdgeError(
            f"`{SIGNATURE}` of {saved_model} takes {shape}; expected square images [None, S, S, 1 or 3] "
            "(or an assets/preprocessing.json)"
        )
    return PreprocessingSpec(image_size=int(shape[1]), channels=int(shape[3]))


def export_edge_model(
    saved_model: Path,
    examples: str | Path,
    options: EdgeOptions,
    *,
    label_offset: int = 0,
    benchmark_runs: int = 50,
    train_split: str = "train",
    eval_split: str = "eval",
) -> EdgeExport:
    """Converts, evaluates both models on the same eval examples, benchmarks and gates.

    Args:
        saved_model: SavedModel directory with the model contract's signatures and assets.
        examples: A `tfxp data` directory or TFX Examples artifact URI with train and eval splits.
        options: The `edge` section: conversion and gate settings (`enabled` is the pipeline's, not read here).
        label_offset: Subtracted from `image/class/label` (`data.label_offset`). Defaults to 0.
        benchmark_runs: Timed batch-1 invocations for the latency figures. Defaults to 50.
        train_split: Split the int8 calibration images come from. Defaults to `train`.
        eval_split: Split both models are evaluated on. Defaults to `eval`.

    Returns:
        The export; nothing is written.

    Raises:
        EdgeError: from conversion (bad mode, ops, missing data), reading data or assets, or the runtime.
    """
    mode = get_mode(options.mode)
    spec = read_preprocessing(saved_model)
    labels = read_labels(saved_model)
    calibration = None
    if mode.needs_representative_data:
        calibration = load_split(
            examples,
            train_split,
            spec,
            limit=options.representative_samples,
            label_offset=label_offset,
            shuffle=True,
        ).images
    tflite = convert(
        saved_model,
        options.mode,
        calibration,
        options.supported_ops,
        options.io_dtype,
        keep_tensor_names=options.keep_tensor_names,
    )
    model = TfliteModel(tflite, threads=options.threads, where=f"the {options.mode} TFLite model of {saved_model}")
    if model.num_classes != len(labels):
        raise EdgeError(
            f"{saved_model} has {len(labels)} labels in assets/{LABELS_FILE} but {model.num_classes} outputs; "
            "the label map must have one line per class"
        )
    # A subset is a seeded sample (shards are often sorted by class); both models see the same images.
    eval_data = load_split(
        examples,
        eval_split,
        spec,
        limit=options.eval_samples,
        label_offset=label_offset,
        shuffle=options.eval_samples > 0,
    )
    reference = evaluate_saved_model(saved_model, eval_data)
    result = evaluate(model, eval_data)
    gate = accuracy_gate(reference.accuracy, result.accuracy, options.max_accuracy_drop)
    speed = benchmark(model, runs=benchmark_runs)
    metadata = {
        "format": METADATA_FORMAT,
        "mode": mode.name,
        "mode_description": mode.description,
        "io_dtype": model.input.dtype,
        "supported_ops": options.supported_ops,
        "source": {"saved_model": str(saved_model), "signature": SIGNATURE},
        "input": model.input.to_json(),
        "outputs": {name: info.to_json() for name, info in model.outputs.items()},
        "normalization": {
            "pixel_range": [0.0, 1.0],
            "image_size": spec.image_size,
            "channels": spec.channels,
            "steps": "decode JPEG/PNG to `channels` channels, resize bilinear to image_size × image_size, scale "
            "pixels to [0, 1]; any further normalisation is inside the model. A quantized input takes "
            "q = round(x / scale) + zero_point.",
        },
        "labels_file": LABELS_FILE,
        "num_classes": len(labels),
        "representative_samples": len(calibration) if calibration is not None else 0,
        "accuracy": {
            "saved_model": reference.accuracy,
            "tflite": result.accuracy,
            "drop": gate.drop,
            "max_drop": options.max_accuracy_drop,
            "eval_examples": result.count,
            "per_class_tflite": result.per_class_by_name(labels),
            "per_class_saved_model": reference.per_class_by_name(labels),
        },
        "size_bytes": len(tflite),
        "sha256": hashlib.sha256(tflite).hexdigest(),
        "latency": speed.to_json(),
        "blessed": gate.blessed,
        "reason": gate.reason,
        "pushed_path": None,
    }
    return EdgeExport(tflite=tflite, labels=labels, metadata=metadata, gate=gate)


def write_edge_model(export: EdgeExport, out_dir: str | Path, pushed_path: str | None = None) -> None:
    """Writes `model.tflite`, `labels.txt` and `edge_metadata.json` (with `pushed_path`) into `out_dir`."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{MODEL_FILE}", "wb") as handle:
        handle.write(export.tflite)
    with tf.io.gfile.GFile(f"{out_dir}/{LABELS_FILE}", "w") as handle:
        handle.write("".join(f"{label}\n" for label in export.labels))
    write_metadata({**export.metadata, "pushed_path": pushed_path}, out_dir)


def write_metadata(metadata: dict[str, Any], out_dir: str | Path) -> None:
    """Writes `edge_metadata.json` into `out_dir` (also for a skipped export, with its reason)."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{METADATA_FILE}", "w") as handle:
        handle.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def next_version_dir(model_base: str | Path) -> str:
    """`<model base>/<version>`: a Unix timestamp like the TFX Pusher's, above every existing numeric version.

    Args:
        model_base: The device model's base directory, `<edge base>/<model>` (e.g. `OUT/edge/digits`).
    """
    base = str(model_base).rstrip("/")
    existing = tf.io.gfile.listdir(base) if tf.io.gfile.isdir(base) else []
    # Strictly above the newest version even when the clock is behind it or two pushes share a second.
    numeric = [int(name.rstrip("/")) for name in existing if name.rstrip("/").isdigit()]
    return f"{base}/{max([int(time.time()), *(version + 1 for version in numeric)])}"


def find_pushed_version(model_base: str | Path, sha256: str) -> str | None:
    """The version directory that already holds a model.tflite with this SHA-256, if any (reruns reuse it)."""
    base = str(model_base).rstrip("/")
    if not tf.io.gfile.isdir(base):
        return None
    for name in sorted(tf.io.gfile.listdir(base)):
        version_dir = f"{base}/{name.rstrip('/')}"
        metadata_path = f"{version_dir}/{METADATA_FILE}"
        if name.rstrip("/").isdigit() and tf.io.gfile.exists(metadata_path):
            with tf.io.gfile.GFile(metadata_path) as handle:
                try:
                    if json.loads(handle.read()).get("sha256") == sha256:
                        return version_dir
                except json.JSONDecodeError:
                    continue
    return None


def push_atomically(source_dir: str | Path, target_dir: str) -> str:
    """Copies the EdgeModel files into a staging directory beside `target_dir`, then renames it into place.

    On a local or POSIX file system the rename is atomic: a reader sees no version or a complete one. Buckets
    (`gs://`, `s3://`) have no directory rename: there the files are copied straight into `target_dir` with
    `model.tflite` last, so a reader that waits for `model.tflite` sees complete labels and metadata.

    Args:
        source_dir: Directory holding `model.tflite`, `labels.txt`, `edge_metadata.json`.
        target_dir: The version directory to create (`next_version_dir(<edge base>/<model>)`).

    Returns:
        `target_dir`.

    Raises:
        EdgeError: `target_dir` exists already or a source file is missing.
    """
    if tf.io.gfile.exists(target_dir):
        raise EdgeError(f"edge push target {target_dir} exists already; versions are never overwritten")
    for name in EDGE_FILES:
        if not tf.io.gfile.exists(f"{source_dir}/{name}"):
            raise EdgeError(f"cannot push {source_dir}: {name} is missing; write it with write_edge_model")
    # model.tflite last: on buckets its presence marks a complete version.
    ordered = sorted(EDGE_FILES, key=lambda name: name == MODEL_FILE)
    if "://" in target_dir:
        for name in ordered:
            tf.io.gfile.makedirs(target_dir)
            tf.io.gfile.copy(f"{source_dir}/{name}", f"{target_dir}/{name}")
        return target_dir
    parent, _, version = target_dir.rstrip("/").rpartition("/")
    # A dot-name: model servers and version scanners ignore it until the rename.
    staging = f"{parent}/.{version}.tmp-{uuid.uuid4().hex[:8]}"
    tf.io.gfile.makedirs(staging)
    try:
        for name in ordered:
            tf.io.gfile.copy(f"{source_dir}/{name}", f"{staging}/{name}")
        tf.io.gfile.rename(staging, target_dir)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
        raise
    return target_dir
