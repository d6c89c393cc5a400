"""The device model's input as cameras give it: RGB frames `[1, H, W, 3]`, pixels 0..255, at the model's size.

`camera_function` wraps the SavedModel's `serving_preprocessed` signature (float32 images in [0, 1] with the
model's channels → probabilities) in a `tf.function` that takes frames and does in the graph what serving does
before it: scale to [0, 1] and, for one-channel models, ITU-R 601 luma (the trainer's weights,
`foundation.preprocessing_spec.LUMA_WEIGHTS`). It is converted to TFLite as it is; the SavedModel keeps its
signatures. Frames are not resized in the graph: apps' classifiers (MediaPipe's ImageClassifier) resize to the
input size themselves, and `edge.data` resizes the eval frames to it the same way (bilinear).

The frame tensor's type is `edge.io_dtype`: `uint8` (what cameras and MediaPipe give), `float32` (pixel values
0..255 as floats) or, for full-integer models only, `int8`. The one output is `probabilities` [1, num_classes]:
MediaPipe reads every output as a classification head, so `classes` (an int64 arg-max) is left out.

Example:
    frame = camera_function(Path("model/Format-Serving"), "uint8")
    frame.function(tf.zeros([1, 32, 32, 3], tf.uint8))["probabilities"]  # [1, 10]
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf

from edge.errors import EdgeError
from foundation.contract import OUTPUT_PROBABILITIES, SAVED_MODEL_FILE, SIGNATURE_PREPROCESSED
from foundation.preprocessing_spec import LUMA_WEIGHTS, PreprocessingSpec

FRAME_INPUT = "image"
FRAME_CHANNELS = 3
PIXEL_MAX = 255.0


@dataclass(frozen=True)
class CameraFunction:
    """The frame-taking wrapper of one SavedModel.

    Attributes:
        function: Concrete function: frames `[1, H, W, 3]` of `dtype` → {`probabilities`}.
        spec: The SavedModel's preprocessing (its image size and channels).
        dtype: The frame tensor's TensorFlow type.
        loaded: The loaded SavedModel (the converter needs it to keep the variables alive).
    """

    function: Any
    spec: PreprocessingSpec
    dtype: tf.DType
    loaded: Any


# What TensorFlow opens in a SavedModel (the converter copies `assets/` too): each must be a regular file.
SAVED_MODEL_FOLDERS = ("assets", "variables")
SAVED_MODEL_FILES = (SAVED_MODEL_FILE, "fingerprint.pb")


def refuse_special_files(saved_model: Path) -> None:
    """Refuses a SavedModel with a FIFO, device or socket (or a link to one) where TensorFlow reads a file: loading
    or converting it would block on the FIFO forever (TFLite copies `assets/`, `copy_assets_to_destination_dir`).

    Raises:
        EdgeError: naming the first such path and how to fix it.
    """
    entries = [saved_model / name for name in SAVED_MODEL_FILES]
    for folder in SAVED_MODEL_FOLDERS:
        for root, dirs, files in os.walk(saved_model / folder):
            entries += [Path(root, name) for name in (*files, *dirs)]
    for path in entries:
        try:
            mode = path.stat().st_mode  # through a link: what TensorFlow would open
        except OSError:  # missing (or a dangling link): loading says so
            continue
        if stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and path.name not in SAVED_MODEL_FILES):
            continue
        raise EdgeError(
            f"{path} in the SavedModel {saved_model} is not a regular file (a FIFO, a device or a socket); "
            "TensorFlow would block or fail reading it: put back the file the model was exported with, or export "
            "the model again"
        )


def signature_spec(saved_model: Path) -> tuple[Any, Any, PreprocessingSpec]:
    """The loaded SavedModel, its `serving_preprocessed` signature and the image size and channels it takes.

    Raises:
        EdgeError: no SavedModel, a FIFO among its files (`refuse_special_files`), no such signature, or it does not
            take square images with 1 or 3 channels.
    """
    if not tf.saved_model.contains_saved_model(str(saved_model)):
        raise EdgeError(
            f"{saved_model} is not a SavedModel directory (no {SAVED_MODEL_FILE}); pass the model's serving "
            "directory, e.g. OUT/serving/<model>/<version>/ or a Model artifact's Format-Serving/"
        )
    refuse_special_files(saved_model)
    loaded = tf.saved_model.load(str(saved_model))
    if SIGNATURE_PREPROCESSED not in loaded.signatures:
        raise EdgeError(
            f"SavedModel {saved_model} has no `{SIGNATURE_PREPROCESSED}` signature (it has "
            f"{sorted(loaded.signatures)}); the model contract requires `serving_preprocessed` "
            "(float32 images [None, H, W, C] → probabilities, classes)"
        )
    signature = loaded.signatures[SIGNATURE_PREPROCESSED]
    inputs = signature.structured_input_signature[1]
    shape = next(iter(inputs.values())).shape.as_list() if len(inputs) == 1 else []
    if len(shape) != 4 or shape[1] is None or shape[1] != shape[2] or shape[3] not in (1, 3):
        raise EdgeError(
            f"`{SIGNATURE_PREPROCESSED}` of {saved_model} takes {inputs}; expected one input of square images "
            "[None, S, S, 1 or 3]"
        )
    return loaded, signature, PreprocessingSpec(image_size=int(shape[1]), channels=int(shape[3]))


def camera_function(saved_model: Path, dtype: str) -> CameraFunction:
    """`serving_preprocessed` behind camera frames of `dtype` (see the module docstring).

    Raises:
        EdgeError: see `signature_spec`; a signature without `probabilities`.
    """
    loaded, signature, spec = signature_spec(saved_model)
    if OUTPUT_PROBABILITIES not in signature.structured_outputs:
        raise EdgeError(
            f"`{SIGNATURE_PREPROCESSED}` of {saved_model} returns {sorted(signature.structured_outputs)}; the model "
            f"contract requires `{OUTPUT_PROBABILITIES}` [N, num_classes]"
        )
    (input_name,) = signature.structured_input_signature[1].keys()
    frame_dtype = tf.as_dtype(dtype)
    size = spec.image_size
    luma = tf.constant(LUMA_WEIGHTS, tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([1, size, size, FRAME_CHANNELS], frame_dtype, name=FRAME_INPUT)])
    def classify(image: tf.Tensor) -> dict[str, tf.Tensor]:
        pixels = tf.cast(image, tf.float32) / PIXEL_MAX
        if spec.channels == 1:
            pixels = tf.tensordot(pixels, luma, axes=1)[..., tf.newaxis]
        return {OUTPUT_PROBABILITIES: signature(**{input_name: pixels})[OUTPUT_PROBABILITIES]}

    return CameraFunction(classify.get_concrete_function(), spec, frame_dtype, loaded)
