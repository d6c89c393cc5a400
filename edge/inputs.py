"""What a device model is made from: the SavedModel's assets, the calibration sample and their version identity.

A device model's version identity is what went into it, not its bytes (int8 conversion is not byte-reproducible):
the SavedModel (its model identity, `foundation.model_identity`, as the Pusher records it), the edge options that
shape the model (`MODEL_OPTIONS`), the calibration sample's records and the converter (`edge_inputs`).
`edge.publish` finds a version published from the same inputs by it, so the EdgeExporter skips the conversion.

Example:
    inputs = edge_inputs(Path("model/Format-Serving"), "data/digits", EdgeOptions(mode="int8"))
    inputs.identity  # "edge:<sha256>", the same for the same SavedModel, options and calibration sample
    read_preprocessing(Path("model/Format-Serving")).image_size  # 32
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf
from google.protobuf.message import DecodeError

from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.options import EdgeOptions
from edge.quantize import get_mode
from foundation.bounded import read_document
from foundation.contract import (
    LABELS_ASSET,
    PREPROCESSING_ASSET,
    SAVED_MODEL_FILE,
    SIGNATURE_PREPROCESSED,
    LabelMapError,
    read_label_map,
)
from foundation.model_identity import ModelIdentityError, model_identity
from foundation.preprocessing_spec import PreprocessingSpec

METADATA_FORMAT = "tfxp.edge/1"
# Bumped whenever the conversion itself changes what a model holds (its graph, its metadata), so models made
# the old way are not taken for the new ones.
CONVERSION_FORMAT = "tfxp.edge-conversion/1"
# The `edge` options that shape the device model; the others gate (`max_accuracy_drop`, `verify`, ...) or time
# it (`threads`) and do not make another model.
MODEL_OPTIONS = ("mode", "io_dtype", "representative_samples", "supported_ops", "keep_tensor_names", "app_client")


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
    """The SavedModel's preprocessing: `assets/preprocessing.json`, which must agree with the `serving_preprocessed`
    input shape, else that shape alone.

    Raises:
        EdgeError: the asset breaks the spec's rules (an image size past `MAX_IMAGE_SIZE`, say) or says another
            size or channel count than the signature takes; neither gives a square image size.
    """
    path = f"{saved_model}/{PREPROCESSING_ASSET}"
    shape = preprocessed_input_shape(saved_model)
    if tf.io.gfile.exists(path):
        try:
            spec = PreprocessingSpec.from_json(read_document(path, path))
        except (ValueError, OSError) as error:
            raise EdgeError(f"{path}: {error}") from None
        # The asset is a file anyone can edit; the signature is what the model takes. A dimension the signature
        # leaves open (None) takes any size.
        if shape is not None and (
            len(shape) != 4 or any(given not in (None, want) for given, want in zip(shape[1:], spec.shape, strict=True))
        ):
            raise EdgeError(
                f"{path} says image_size {spec.image_size} and channels {spec.channels}, but the model's "
                f"`{SIGNATURE_PREPROCESSED}` signature takes {shape}: the file does not belong to this model; restore "
                "the preprocessing.json the trainer exported with it, or delete it (the signature then decides)"
            )
        return spec
    # Models made outside tfxp may lack the asset; their signature's input shape says the same.
    if shape is None:
        raise EdgeError(
            f"SavedModel {saved_model} has neither {PREPROCESSING_ASSET} nor a `{SIGNATURE_PREPROCESSED}` "
            "signature with one input; the model contract requires both"
        )
    if len(shape) != 4 or shape[1] is None or shape[1] != shape[2] or shape[3] not in (1, 3):
        raise EdgeError(
            f"`{SIGNATURE_PREPROCESSED}` of {saved_model} takes {shape}; expected square images "
            f"[None, S, S, 1 or 3] (or an {PREPROCESSING_ASSET})"
        )
    try:
        return PreprocessingSpec(image_size=int(shape[1]), channels=int(shape[3]))
    except ValueError as error:
        raise EdgeError(f"`{SIGNATURE_PREPROCESSED}` of {saved_model} takes {shape}: {error}") from None


def preprocessed_input_shape(saved_model: Path) -> list[int | None] | None:
    """The input shape of the SavedModel's `serving_preprocessed` signature (None for a dimension it leaves open),
    read from `saved_model.pb` without loading the model; None when the signature is missing or has not one
    input.

    Raises:
        EdgeError: `saved_model.pb` cannot be read or parsed.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    path = f"{saved_model}/{SAVED_MODEL_FILE}"
    try:
        with tf.io.gfile.GFile(path, "rb") as handle:
            proto = saved_model_pb2.SavedModel.FromString(handle.read())
    except (OSError, tf.errors.OpError, DecodeError) as error:
        raise EdgeError(f"cannot read {path}: {error}; pass a SavedModel directory") from None
    for graph in proto.meta_graphs:
        signature = graph.signature_def.get(SIGNATURE_PREPROCESSED)
        if signature is not None and len(signature.inputs) == 1:
            (tensor,) = signature.inputs.values()
            if tensor.tensor_shape.unknown_rank:
                return None
            return [dim.size if dim.size >= 0 else None for dim in tensor.tensor_shape.dim]
    return None


@dataclass(frozen=True)
class EdgeInputs:
    """What a device model is made from, read before converting anything.

    Attributes:
        spec: The SavedModel's preprocessing (image size, channels).
        labels: Class names, one per output index.
        calibration: The int8 calibration sample (None for modes that need none).
        identity: SHA-256 over the SavedModel's model identity, the model-shaping options, the calibration
            sample and the converter: the version identity the EdgeExporter publishes under.
        recipe: What `identity` hashes, and the SavedModel's path and fingerprint, as recorded in
            `edge_metadata.json`.
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
        saved_model: SavedModel directory; its model identity (`foundation.model_identity`, what it holds, as
            the Pusher's push record names it) is part of the identity, its path is not.
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
    try:
        model = model_identity(saved_model)
    except ModelIdentityError as error:
        raise EdgeError(str(error)) from None
    made_of = {
        "conversion": CONVERSION_FORMAT,
        "tensorflow": tf.__version__,
        "model": model,
        "options": {name: getattr(options, name) for name in MODEL_OPTIONS},
        "calibration_sha256": calibration.digest if calibration is not None else None,
    }
    # The SavedModel's path is recorded (where the model came from) but is no part of the identity: a path is
    # reused when the pipeline root is removed (`foundation.model_identity`).
    saved = {"path": str(saved_model), "fingerprint": saved_model_fingerprint(saved_model), "identity": model}
    recipe = {**made_of, "saved_model": saved}
    identity = hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()
    return EdgeInputs(spec=spec, labels=labels, calibration=calibration, identity=f"edge:{identity}", recipe=recipe)
