"""Accuracy and per-class accuracy of a TFLite model (LiteRT) and of the SavedModel it came from.

Both run the same examples: the SavedModel their preprocessed images, the TFLite model their camera frames (RGB
pixels at the model's size), so the difference is the cost of the conversion and of taking frames.

Example:
    eval_data = load_split("data/digits", "eval", spec)
    tflite = evaluate(TfliteModel.load(Path("model.tflite")), eval_data)  # on eval_data.frames
    float_model = evaluate_saved_model(Path("model/Format-Serving"), eval_data)
    drop = float_model.accuracy - tflite.accuracy
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from edge.data import LabeledImages
from edge.errors import EdgeError
from edge.runtime import TfliteModel
from foundation.contract import OUTPUT_PROBABILITIES, SIGNATURE_PREPROCESSED


@dataclass(frozen=True)
class EvalResult:
    """Accuracy on a labelled split.

    Attributes:
        accuracy: Fraction of examples whose arg-max class is the label.
        per_class_accuracy: Accuracy per class index; None for classes absent from the split.
        count: Examples evaluated.
    """

    accuracy: float
    per_class_accuracy: tuple[float | None, ...]
    count: int

    def per_class_by_name(self, labels: Sequence[str]) -> dict[str, float | None]:
        """Per-class accuracy keyed by class name (index when `labels` is shorter)."""
        return {
            labels[index] if index < len(labels) else str(index): value
            for index, value in enumerate(self.per_class_accuracy)
        }

    def to_json(self, labels: Sequence[str] = ()) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "count": self.count, "per_class": self.per_class_by_name(labels)}


def accuracy_of(probabilities: np.ndarray, labels: np.ndarray) -> EvalResult:
    """Accuracy and per-class accuracy of class scores against labels.

    Args:
        probabilities: [N, num_classes] scores (any monotonic score works: only the arg-max counts).
        labels: int [N], 0-based.

    Raises:
        EdgeError: a label outside [0, num_classes) or mismatched lengths.
    """
    num_classes = probabilities.shape[-1]
    if len(labels) != len(probabilities):
        raise EdgeError(f"{len(probabilities)} predictions for {len(labels)} labels; evaluate the same examples")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise EdgeError(
            f"labels span {int(labels.min())}..{int(labels.max())} but the model has {num_classes} classes; "
            "check data.label_offset (1 for 1-based labels) and that the model was trained on this data"
        )
    correct = np.argmax(probabilities, axis=-1) == labels
    per_class = tuple(
        float(correct[labels == index].mean()) if np.any(labels == index) else None for index in range(num_classes)
    )
    return EvalResult(
        accuracy=float(correct.mean()) if len(labels) else 0.0, per_class_accuracy=per_class, count=len(labels)
    )


def evaluate(model: TfliteModel, data: LabeledImages, batch_size: int = 32) -> EvalResult:
    """Accuracy of a TFLite device model in LiteRT, on the camera frames of `data`.

    Args:
        model: The loaded TFLite model (its threads setting applies).
        data: Eval frames and labels.
        batch_size: Images per interpreter call. Defaults to 32.
    """
    return accuracy_of(model.predict(data.frames, batch_size=batch_size), data.labels)


def evaluate_saved_model(
    saved_model: Path, data: LabeledImages, signature: str = SIGNATURE_PREPROCESSED, batch_size: int = 64
) -> EvalResult:
    """Accuracy of the float SavedModel through the signature TFLite was converted from.

    Args:
        saved_model: SavedModel directory.
        data: Preprocessed eval images and labels.
        signature: Defaults to `serving_preprocessed` (images → probabilities).
        batch_size: Images per call. Defaults to 64.

    Raises:
        EdgeError: no such signature, or it has no `probabilities` output.
    """
    loaded = tf.saved_model.load(str(saved_model))
    if signature not in loaded.signatures:
        raise EdgeError(
            f"SavedModel {saved_model} has no `{signature}` signature (it has {sorted(loaded.signatures)}); "
            "the model contract requires `serving_preprocessed`"
        )
    function = loaded.signatures[signature]
    (input_name,) = function.structured_input_signature[1].keys()
    batches = []
    for start in range(0, len(data), batch_size):
        outputs = function(**{input_name: tf.constant(data.images[start : start + batch_size])})
        if OUTPUT_PROBABILITIES not in outputs:
            raise EdgeError(
                f"signature `{signature}` of {saved_model} returns {sorted(outputs)}; the model contract requires "
                f"`{OUTPUT_PROBABILITIES}` [N, num_classes]"
            )
        batches.append(outputs[OUTPUT_PROBABILITIES].numpy())
    return accuracy_of(np.concatenate(batches), data.labels)
