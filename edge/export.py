"""The device export: convert the SavedModel, evaluate both models on the same examples, gate; nothing written.

`export_edge_model` converts (`edge.quantize`), evaluates the TFLite model against its SavedModel on the same eval
examples (`edge.evaluate`), adds the app's metadata and MediaPipe's check (`edge.app_client`), benchmarks it and
gates it (`edge.gate`). What it is made from and its version identity are `edge.inputs`'; writing and publishing
the result is `edge.publish`.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge.app_client import MetadataSpec, with_model_metadata
from edge.benchmark import BenchmarkResult, benchmark
from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.evaluate import EvalResult, accuracy_of, evaluate_saved_model
from edge.gate import AppCheck, GateResult, SizeReference, accuracy_gate, check_app_client, combine_gates
from edge.inputs import EdgeInputs, edge_inputs
from edge.options import EdgeOptions
from edge.quantize import QuantizationMode, convert, get_mode
from edge.runtime import TensorInfo, TfliteModel
from foundation.contract import LABELS_ASSET, LABELS_FILE, SIGNATURE_PREPROCESSED
from foundation.preprocessing_spec import PreprocessingSpec

METADATA_FORMAT = "tfxp.edge/1"


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


def _tfxp_version() -> str:
    try:
        return importlib.metadata.version("tfxp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class _Evaluation:
    """Both models on the same eval examples: the examples, each model's accuracy and LiteRT's class scores."""

    data: LabeledImages
    saved_model: EvalResult
    tflite: EvalResult
    predictions: np.ndarray


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
    tflite = _convert(saved_model, options, inputs)
    model = _runtime(tflite, saved_model, options)
    _check_outputs(model, inputs.labels, saved_model)
    evaluation = _evaluate(model, saved_model, examples, eval_split, inputs.spec, options, label_offset)
    gate = accuracy_gate(evaluation.saved_model.accuracy, evaluation.tflite.accuracy, options.max_accuracy_drop)
    app_check = None
    if options.app_client == "mediapipe":
        name = model_name or Path(saved_model).name
        tflite, model, app_check = _with_app_client(
            tflite, model, name, mode, saved_model, examples, options, inputs, evaluation
        )
        gate = combine_gates(gate, app_check)
    speed = benchmark(model, runs=benchmark_runs)
    metadata = _metadata(tflite, model, saved_model, options, mode, inputs, evaluation, gate, speed, app_check)
    return EdgeExport(tflite=tflite, labels=inputs.labels, metadata=metadata, gate=gate)


def _convert(saved_model: Path, options: EdgeOptions, inputs: EdgeInputs) -> bytes:
    """The TFLite flatbuffer of the options' mode, calibrated on the inputs' sample where the mode needs one."""
    calibration = inputs.calibration
    return convert(
        saved_model,
        options.mode,
        calibration.frames if calibration is not None else None,
        options.supported_ops,
        options.io_dtype,
        keep_tensor_names=options.keep_tensor_names,
    )


def _runtime(tflite: bytes, saved_model: Path, options: EdgeOptions) -> TfliteModel:
    return TfliteModel(tflite, threads=options.threads, where=f"the {options.mode} TFLite model of {saved_model}")


def _check_outputs(model: TfliteModel, labels: list[str], saved_model: Path) -> None:
    """Raises EdgeError unless the model has one output per label."""
    if model.num_classes != len(labels):
        raise EdgeError(
            f"{saved_model} has {len(labels)} labels in {LABELS_ASSET} but {model.num_classes} outputs; "
            "the label map must have one line per class"
        )


def _evaluate(
    model: TfliteModel,
    saved_model: Path,
    examples: str | Path,
    eval_split: str,
    spec: PreprocessingSpec,
    options: EdgeOptions,
    label_offset: int,
) -> _Evaluation:
    """Both models on the eval examples (`edge.eval_samples` of them when set)."""
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
    return _Evaluation(data=eval_data, saved_model=reference, tflite=result, predictions=predictions)


def _with_app_client(
    tflite: bytes,
    model: TfliteModel,
    name: str,
    mode: QuantizationMode,
    saved_model: Path,
    examples: str | Path,
    options: EdgeOptions,
    inputs: EdgeInputs,
    evaluation: _Evaluation,
) -> tuple[bytes, TfliteModel, AppCheck]:
    """The model with the app's metadata in it (labels, description) and MediaPipe's ImageClassifier's check."""
    # Metadata changes no tensor, so LiteRT's figures hold for the bytes with it; MediaPipe runs on those.
    description = AppDescription(
        name=name,
        mode=mode.name,
        examples=str(examples),
        saved_model=inputs.recipe["saved_model"],
        accuracy=evaluation.tflite.accuracy,
        saved_model_accuracy=evaluation.saved_model.accuracy,
        count=evaluation.tflite.count,
    )
    tflite = with_model_metadata(tflite, inputs.labels, description.metadata_spec(model.input, inputs.spec))
    model = _runtime(tflite, saved_model, options)
    ours = np.argmax(evaluation.predictions, axis=-1)
    reference = SizeReference(evaluation.saved_model.accuracy, inputs.spec)
    return tflite, model, check_app_client(tflite, evaluation.data, ours, inputs.labels, options, reference)


def _metadata(
    tflite: bytes,
    model: TfliteModel,
    saved_model: Path,
    options: EdgeOptions,
    mode: QuantizationMode,
    inputs: EdgeInputs,
    evaluation: _Evaluation,
    gate: GateResult,
    speed: BenchmarkResult,
    app_check: AppCheck | None,
) -> dict[str, Any]:
    """What `edge_metadata.json` holds (`pushed_path` is filled in when the model is written)."""
    calibration, labels = inputs.calibration, inputs.labels
    return {
        "format": METADATA_FORMAT,
        "mode": mode.name,
        "mode_description": mode.description,
        "io_dtype": model.input.dtype,
        "supported_ops": options.supported_ops,
        "source": {"saved_model": str(saved_model), "signature": SIGNATURE_PREPROCESSED},
        "input": model.input.to_json(),
        "outputs": {name: info.to_json() for name, info in model.outputs.items()},
        "normalization": _normalization(inputs.spec),
        "labels_file": LABELS_FILE,
        "num_classes": len(labels),
        "representative_samples": len(calibration) if calibration is not None else 0,
        "accuracy": {
            "saved_model": evaluation.saved_model.accuracy,
            "tflite": evaluation.tflite.accuracy,
            "drop": gate.drop,
            "max_drop": options.max_accuracy_drop,
            "eval_examples": evaluation.tflite.count,
            "per_class_tflite": evaluation.tflite.per_class_by_name(labels),
            "per_class_saved_model": evaluation.saved_model.per_class_by_name(labels),
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


def _normalization(spec: PreprocessingSpec) -> dict[str, Any]:
    """How an app prepares the frames the model takes (`edge_metadata.json` → `normalization`)."""
    return {
        "pixel_range": [0.0, 255.0],
        "image_size": spec.image_size,
        "color_space": "RGB",
        "model_channels": spec.channels,
        "central_crop": spec.central_crop,
        "steps": "give RGB frames [1, image_size, image_size, 3] with pixels 0..255 as they are (resize "
        "bilinear to image_size × image_size first; MediaPipe's ImageClassifier does it itself); scaling to "
        "[0, 1], gray conversion (ITU-R 601 luma) for one-channel models and any further normalisation are "
        f"inside the model.{_crop_step(spec)}",
    }
