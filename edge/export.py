"""The device export end to end: convert, evaluate against the SavedModel, gate, write, push.

`export_edge_model` does the work without writing anything; `write_edge_model` lays out the EdgeModel
directory (`model.tflite`, `labels.txt`, `edge_metadata.json`) and `push_edge_model` writes it and publishes
it as `<edge base>/<model>/<version>/` (`foundation.publish`: staged beside the versions, renamed when complete).

A device model's version identity is what went into it, not its bytes (int8 conversion is not byte-reproducible):
the SavedModel (its path, as the Pusher records it, and its fingerprint), the edge options that shape the model
(`MODEL_OPTIONS`), the calibration sample's records and the converter (`edge_inputs`). `find_edge_version` finds
a version published from the same inputs, so the EdgeExporter skips the conversion (`reuse_published`).

Example:
    inputs = edge_inputs(Path("model/Format-Serving"), "data/digits", EdgeOptions(mode="int8"))
    if find_edge_version("tfxp_output/edge/digits", inputs.identity) is None:
        export = export_edge_model(Path("model/Format-Serving"), "data/digits", EdgeOptions(mode="int8"), inputs=inputs)
    if export.blessed:
        pushed = push_edge_model(export, "edge_model", "tfxp_output/edge/digits")
    else:
        write_edge_model(export, "edge_model")
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from edge.app_client import MetadataSpec, agreement, classify, with_model_metadata
from edge.benchmark import benchmark
from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.evaluate import accuracy_of, evaluate_saved_model
from edge.options import EdgeOptions
from edge.quantize import convert, get_mode
from edge.release import RELEASE_FILE, release_record
from edge.runtime import TensorInfo, TfliteModel
from foundation.contract import (
    EDGE_METADATA_FILE,
    EDGE_MODEL_FILE,
    LABELS_ASSET,
    LABELS_FILE,
    PREPROCESSING_ASSET,
    SIGNATURE_PREPROCESSED,
    LabelMapError,
    read_label_map,
    write_label_map,
)
from foundation.preprocessing_spec import PreprocessingSpec
from foundation.publish import find_published, list_versions, next_version, publish_version

EDGE_FILES = (EDGE_MODEL_FILE, LABELS_FILE, EDGE_METADATA_FILE)
METADATA_FORMAT = "tfxp.edge/1"
# Bumped whenever the conversion itself changes what a model holds (its graph, its metadata), so models made
# the old way are not taken for the new ones.
CONVERSION_FORMAT = "tfxp.edge-conversion/1"
# The `edge` options that shape the device model; the others gate (`max_accuracy_drop`, `verify`, ...) or time
# it (`threads`) and do not make another model.
MODEL_OPTIONS = ("mode", "io_dtype", "representative_samples", "supported_ops", "keep_tensor_names", "app_client")


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


@dataclass(frozen=True)
class AppDescription:
    """What the model's own metadata says about it (`edge.app_client.MetadataSpec`)."""

    name: str
    mode: str
    examples: str
    saved_model: dict[str, str]
    accuracy: float
    saved_model_accuracy: float
    count: int

    def metadata_spec(self, frame: TensorInfo, spec: PreprocessingSpec) -> MetadataSpec:
        size = spec.image_size
        gray = ", gray conversion (ITU-R 601 luma)" if spec.channels == 1 else ""
        return MetadataSpec(
            name=self.name,
            version=f"tfxp {_tfxp_version()}, edge.mode {self.mode}, SavedModel {self.saved_model['path']} "
            f"(fingerprint {self.saved_model['fingerprint'] or 'none'})",
            description=f"Image classifier ({self.mode}). Trained and evaluated on {self.examples}: top-1 accuracy "
            f"{self.accuracy:.4f} in LiteRT, {self.saved_model_accuracy:.4f} as SavedModel, on {self.count} eval "
            "examples.",
            input_description=f"RGB frame [1, {size}, {size}, 3], {frame.dtype}, pixels 0..255 as the camera gives "
            f"them; scaling{gray} and normalisation are inside the model.{_crop_step(spec)}",
        )


def _crop_step(spec: PreprocessingSpec) -> str:
    """What an app does before the resize for a model trained with a central crop ("" for none)."""
    if spec.central_crop >= 1.0:
        return ""
    return (
        f" Crop the central square of side {spec.central_crop} x the shorter side first (MediaPipe: "
        "ImageProcessingOptions(region_of_interest=...) of that square), as serving does."
    )


@dataclass(frozen=True)
class AppCheck:
    """MediaPipe ImageClassifier on the eval frames against LiteRT's top-1."""

    passed: bool
    reason: str
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"client": "mediapipe", "passed": self.passed, "reason": self.reason, **self.details}


def check_app_client(
    tflite: bytes, eval_data: LabeledImages, ours: np.ndarray, labels: list[str], options: EdgeOptions
) -> AppCheck:
    """Runs MediaPipe's ImageClassifier on the eval frames; passes when its top-1 is LiteRT's on at least
    `edge.min_app_agreement` of them and the labels it read from the model's metadata are ours."""
    client = classify(tflite, eval_data.frames)
    agreed = agreement(ours, client.indices)
    expected = tuple(labels[index] for index in client.indices)
    labels_ok = client.labels == expected
    accuracy = float(np.mean(client.indices == eval_data.labels)) if len(eval_data) else 0.0
    passed = agreed >= options.min_app_agreement and labels_ok
    reason = (
        f"MediaPipe {client.version} ImageClassifier agrees with LiteRT on {agreed:.4f} of {len(eval_data)} eval "
        f"frames (edge.min_app_agreement {options.min_app_agreement}), accuracy {accuracy:.4f}"
    )
    if not labels_ok:
        reason += "; the labels it read from the model's metadata are not the label map's"
    if not passed:
        reason += "; not pushed"
    details = {"mediapipe": client.version, "agreement": agreed, "accuracy": accuracy, "count": len(eval_data)}
    return AppCheck(passed=passed, reason=reason, details={**details, "labels_from_metadata": labels_ok})


def combine_gates(gate: GateResult, check: AppCheck) -> GateResult:
    """The accuracy gate's verdict with the MediaPipe check's: blessed only when both pass."""
    return GateResult(blessed=gate.blessed and check.passed, drop=gate.drop, reason=f"{gate.reason}; {check.reason}")


def _tfxp_version() -> str:
    try:
        return importlib.metadata.version("tfxp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def read_labels(saved_model: Path) -> list[str]:
    """Class names from the SavedModel's `assets/labels.txt` (`foundation.contract.read_label_map`'s rule).

    Raises:
        EdgeError: the file is missing or breaks the label-map rule (the message names the file and line).
    """
    hint = "the model contract puts the label map (one class name a line) there; export the model with the tfxp trainer"
    try:
        return read_label_map(f"{saved_model}/{LABELS_ASSET}", missing_hint=hint)
    except LabelMapError as error:
        raise EdgeError(str(error)) from None


def read_preprocessing(saved_model: Path) -> PreprocessingSpec:
    """The SavedModel's preprocessing: `assets/preprocessing.json`, else the `serving_preprocessed` input shape.

    Raises:
        EdgeError: neither gives a square image size.
    """
    path = f"{saved_model}/{PREPROCESSING_ASSET}"
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as handle:
            try:
                return PreprocessingSpec.from_json(handle.read())
            except ValueError as error:
                raise EdgeError(f"{path}: {error}") from None
    # Models made outside tfxp may lack the asset; their signature's input shape says the same.
    loaded = tf.saved_model.load(str(saved_model))
    if SIGNATURE_PREPROCESSED not in loaded.signatures:
        raise EdgeError(
            f"SavedModel {saved_model} has neither {PREPROCESSING_ASSET} nor a `{SIGNATURE_PREPROCESSED}` "
            "signature; the model contract requires both"
        )
    (spec,) = loaded.signatures[SIGNATURE_PREPROCESSED].structured_input_signature[1].values()
    shape = spec.shape.as_list()
    if len(shape) != 4 or shape[1] is None or shape[1] != shape[2] or shape[3] not in (1, 3):
        raise EdgeError(
            f"`{SIGNATURE_PREPROCESSED}` of {saved_model} takes {shape}; expected square images "
            f"[None, S, S, 1 or 3] (or an {PREPROCESSING_ASSET})"
        )
    return PreprocessingSpec(image_size=int(shape[1]), channels=int(shape[3]))


@dataclass(frozen=True)
class EdgeInputs:
    """What a device model is made from, read before converting anything.

    Attributes:
        spec: The SavedModel's preprocessing (image size, channels).
        labels: Class names, one per output index.
        calibration: The int8 calibration sample (None for modes that need none).
        identity: SHA-256 over the SavedModel, the model-shaping options, the calibration sample and the
            converter: the version identity the EdgeExporter publishes under.
        recipe: What `identity` hashes, as recorded in `edge_metadata.json`.
    """

    spec: PreprocessingSpec
    labels: list[str]
    calibration: LabeledImages | None
    identity: str
    recipe: dict[str, Any] = field(repr=False)


def saved_model_fingerprint(saved_model: Path) -> str:
    """The SavedModel's own checksum (`fingerprint.pb`, written by TensorFlow ≥ 2.12 on save); "" without one."""
    try:
        return str(tf.saved_model.experimental.read_fingerprint(str(saved_model)).saved_model_checksum)
    except (FileNotFoundError, tf.errors.NotFoundError, ValueError):
        return ""


def edge_inputs(
    saved_model: Path,
    examples: str | Path,
    options: EdgeOptions,
    *,
    label_offset: int = 0,
    train_split: str = "train",
) -> EdgeInputs:
    """Reads the SavedModel's assets and the calibration sample, and names the model they make.

    Args:
        saved_model: SavedModel directory; its path is part of the identity, as in the Pusher's push record
            (a new Trainer run writes a new artifact; a cached one is the same path).
        examples: A `tfxp data` directory or TFX Examples artifact URI with a `train_split`.
        options: The `edge` section; only `MODEL_OPTIONS` enter the identity.
        label_offset: `data.label_offset`. Defaults to 0.
        train_split: Split the int8 calibration sample comes from. Defaults to `train`.

    Raises:
        EdgeError: assets or calibration examples cannot be read.
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
        )
    recipe = {
        "conversion": CONVERSION_FORMAT,
        "tensorflow": tf.__version__,
        "saved_model": {"path": str(saved_model), "fingerprint": saved_model_fingerprint(saved_model)},
        "options": {name: getattr(options, name) for name in MODEL_OPTIONS},
        "calibration_sha256": calibration.digest if calibration is not None else None,
    }
    identity = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    return EdgeInputs(spec=spec, labels=labels, calibration=calibration, identity=f"edge:{identity}", recipe=recipe)


def export_edge_model(
    saved_model: Path,
    examples: str | Path,
    options: EdgeOptions,
    *,
    label_offset: int = 0,
    benchmark_runs: int = 50,
    train_split: str = "train",
    eval_split: str = "eval",
    inputs: EdgeInputs | None = None,
    model_name: str = "",
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
        inputs: `edge_inputs` of the same arguments, when the caller read them already.
        model_name: The name in the model's metadata; defaults to the SavedModel directory's name.

    Returns:
        The export; nothing is written.

    Raises:
        EdgeError: from conversion (bad mode, ops, missing data), reading data or assets, or the runtime.
    """
    mode = get_mode(options.mode)
    if inputs is None:
        inputs = edge_inputs(saved_model, examples, options, label_offset=label_offset, train_split=train_split)
    spec, labels, calibration = inputs.spec, inputs.labels, inputs.calibration
    tflite = convert(
        saved_model,
        options.mode,
        calibration.frames if calibration is not None else None,
        options.supported_ops,
        options.io_dtype,
        keep_tensor_names=options.keep_tensor_names,
    )
    model = TfliteModel(tflite, threads=options.threads, where=f"the {options.mode} TFLite model of {saved_model}")
    if model.num_classes != len(labels):
        raise EdgeError(
            f"{saved_model} has {len(labels)} labels in {LABELS_ASSET} but {model.num_classes} outputs; "
            "the label map must have one line per class"
        )
    # A subset is a seeded sample (shards are often sorted by class); both models see the same examples.
    eval_data = load_split(
        examples,
        eval_split,
        spec,
        limit=options.eval_samples,
        label_offset=label_offset,
        shuffle=options.eval_samples > 0,
    )
    reference = evaluate_saved_model(saved_model, eval_data)
    predictions = model.predict(eval_data.frames)
    result = accuracy_of(predictions, eval_data.labels)
    gate = accuracy_gate(reference.accuracy, result.accuracy, options.max_accuracy_drop)
    app_check = None
    if options.app_client == "mediapipe":
        # Metadata changes no tensor, so LiteRT's figures hold for the bytes with it; MediaPipe runs on those.
        description = AppDescription(
            name=model_name or Path(saved_model).name,
            mode=mode.name,
            examples=str(examples),
            saved_model=inputs.recipe["saved_model"],
            accuracy=result.accuracy,
            saved_model_accuracy=reference.accuracy,
            count=result.count,
        )
        tflite = with_model_metadata(tflite, labels, description.metadata_spec(model.input, spec))
        model = TfliteModel(tflite, threads=options.threads, where=f"the {options.mode} TFLite model of {saved_model}")
        app_check = check_app_client(tflite, eval_data, np.argmax(predictions, axis=-1), labels, options)
        gate = combine_gates(gate, app_check)
    speed = benchmark(model, runs=benchmark_runs)
    metadata = {
        "format": METADATA_FORMAT,
        "mode": mode.name,
        "mode_description": mode.description,
        "io_dtype": model.input.dtype,
        "supported_ops": options.supported_ops,
        "source": {"saved_model": str(saved_model), "signature": SIGNATURE_PREPROCESSED},
        "input": model.input.to_json(),
        "outputs": {name: info.to_json() for name, info in model.outputs.items()},
        "normalization": {
            "pixel_range": [0.0, 255.0],
            "image_size": spec.image_size,
            "color_space": "RGB",
            "model_channels": spec.channels,
            "central_crop": spec.central_crop,
            "steps": "give RGB frames [1, image_size, image_size, 3] with pixels 0..255 as they are (resize "
            "bilinear to image_size × image_size first; MediaPipe's ImageClassifier does it itself); scaling to "
            "[0, 1], gray conversion (ITU-R 601 luma) for one-channel models and any further normalisation are "
            f"inside the model.{_crop_step(spec)}",
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
        "identity": inputs.identity,
        "made_from": inputs.recipe,
        "latency": speed.to_json(),
        "blessed": gate.blessed,
        "reason": gate.reason,
        "pushed_path": None,
        "app_client": app_check.to_json() if app_check is not None else None,
    }
    return EdgeExport(tflite=tflite, labels=labels, metadata=metadata, gate=gate)


def write_edge_model(export: EdgeExport, out_dir: str | Path, pushed_path: str | None = None) -> None:
    """Writes `model.tflite`, `labels.txt` and `edge_metadata.json` (with `pushed_path`) into `out_dir`."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{EDGE_MODEL_FILE}", "wb") as handle:
        handle.write(export.tflite)
    write_label_map(f"{out_dir}/{LABELS_FILE}", export.labels)
    write_metadata({**export.metadata, "pushed_path": pushed_path}, out_dir)


def write_metadata(metadata: dict[str, Any], out_dir: str | Path) -> None:
    """Writes `edge_metadata.json` into `out_dir` (also for a skipped export, with its reason)."""
    tf.io.gfile.makedirs(str(out_dir))
    with tf.io.gfile.GFile(f"{out_dir}/{EDGE_METADATA_FILE}", "w") as handle:
        handle.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def find_edge_version(model_base: str | Path, identity: str) -> str | None:
    """The version directory under `model_base` published from the same inputs (`EdgeInputs.identity`), if any;
    a bucket version whose `model.tflite` never arrived does not count."""
    return find_published(str(model_base).rstrip("/"), identity, required_file=EDGE_MODEL_FILE)


def push_edge_model(export: EdgeExport, out_dir: str | Path, model_base: str | Path) -> str:
    """Writes the EdgeModel into `out_dir` and publishes it as `<model_base>/<version>/` (`foundation.publish`).

    The version's identity is `export.metadata["identity"]` (see the module docstring): a model made from inputs
    published before is not published again, and its version is the pushed path. On buckets `model.tflite` is
    moved in last, so a reader that waits for it sees complete labels and metadata. The version also gets
    `release.json` (`edge.release`), the record an OTA service reads.

    Args:
        export: A blessed export.
        out_dir: The EdgeModel artifact's directory; `edge_metadata.json` records the pushed path.
        model_base: The device model's base directory, `<edge base>/<model>` (e.g. `OUT/edge/digits`).

    Returns:
        The version directory holding the model.
    """
    base = str(model_base).rstrip("/")
    identity = export.metadata["identity"]
    existing = find_edge_version(base, identity)
    if existing is not None:
        write_edge_model(export, out_dir, existing)
        return existing
    # The version is chosen first: its path goes into edge_metadata.json, which is pushed with the model.
    version = next_version(os.path.basename(path) for path in list_versions(base))
    write_edge_model(export, out_dir, f"{base}/{version}")
    with tf.io.gfile.GFile(f"{out_dir}/{RELEASE_FILE}", "w") as handle:  # the OTA service's record, pushed along
        record = release_record(export.tflite, export.labels, export.metadata)
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return publish_version(out_dir, base, identity, last_file=EDGE_MODEL_FILE, version=version)


def reuse_published(version_dir: str, out_dir: str | Path) -> dict[str, Any]:
    """Fills the EdgeModel directory `out_dir` from a published version made from the same inputs.

    Nothing is converted or evaluated again: the files are the published ones, and `edge_metadata.json` keeps
    their accuracy and latency figures, with `reused_version` and a reason saying so.

    Returns:
        The metadata written to `out_dir`.

    Raises:
        EdgeError: the version's files cannot be read.
    """
    version = os.path.basename(version_dir.rstrip("/"))
    tf.io.gfile.makedirs(str(out_dir))
    try:
        for name in (EDGE_MODEL_FILE, LABELS_FILE, RELEASE_FILE):
            if name == RELEASE_FILE and not tf.io.gfile.exists(f"{version_dir}/{name}"):
                continue  # a version pushed before release records
            tf.io.gfile.copy(f"{version_dir}/{name}", f"{out_dir}/{name}", overwrite=True)
        with tf.io.gfile.GFile(f"{version_dir}/{EDGE_METADATA_FILE}") as handle:
            published = json.loads(handle.read())
    except (tf.errors.OpError, ValueError) as error:
        raise EdgeError(
            f"edge version {version_dir} is published from the same inputs but cannot be read ({error}); "
            "remove that version directory to publish the model again"
        ) from None
    reason = (
        f"already published as version {version} (same SavedModel, edge options and calibration sample); "
        "not converted again"
    )
    metadata = {**published, "reused_version": version, "pushed_path": version_dir, "reason": reason}
    write_metadata(metadata, out_dir)
    return metadata
