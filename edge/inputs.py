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

from edge.data import LabeledImages, load_split
from edge.errors import EdgeError
from edge.options import EdgeOptions
from edge.quantize import get_mode
from foundation.bounded import read_document
from foundation.contract import (
    LABELS_ASSET,
    PREPROCESSING_ASSET,
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
    """The SavedModel's preprocessing: `assets/preprocessing.json`, else the `serving_preprocessed` input shape.

    Raises:
        EdgeError: neither gives a square image size.
    """
    path = f"{saved_model}/{PREPROCESSING_ASSET}"
    if tf.io.gfile.exists(path):
        try:
            return PreprocessingSpec.from_json(read_document(path, path))
        except (ValueError, OSError) as error:
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
