"""The device model's verdict: the accuracy drop against the SavedModel, and MediaPipe's ImageClassifier against LiteRT.

`accuracy_gate` blesses a TFLite model that loses at most `edge.max_accuracy_drop` accuracy; with
`edge.app_client: mediapipe`, `check_app_client` runs the app's classifier on the same eval images, at the model's
size and as apps feed it (at the images' own size and at a camera size, resized by MediaPipe itself), and
`combine_gates` blesses only when both pass.

Example:
    gate = accuracy_gate(saved_model_accuracy=0.95, tflite_accuracy=0.94, max_drop=0.02)
    gate.blessed  # True; gate.reason says both accuracies, the drop and the limit
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.app_client import agreement, classify_sets
from edge.app_frames import CAMERA_SIZE, OWN_SIZE, app_frame_sets, describe_size
from edge.data import LabeledImages
from edge.options import EdgeOptions
from foundation.preprocessing_spec import PreprocessingSpec


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
class AppCheck:
    """MediaPipe ImageClassifier on the eval frames against LiteRT's top-1."""

    passed: bool
    reason: str
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"client": "mediapipe", "passed": self.passed, "reason": self.reason, **self.details}


@dataclass(frozen=True)
class SizeReference:
    """What MediaPipe's accuracy on resized frames is held to.

    Attributes:
        saved_model_accuracy: The SavedModel's accuracy on the same eval images (TF Serving's preprocessing).
        spec: The model's preprocessing (its central crop becomes MediaPipe's region of interest).
    """

    saved_model_accuracy: float
    spec: PreprocessingSpec


def check_app_client(
    tflite: bytes,
    eval_data: LabeledImages,
    ours: np.ndarray,
    labels: list[str],
    options: EdgeOptions,
    reference: SizeReference,
) -> AppCheck:
    """Runs MediaPipe's ImageClassifier on the eval images as the gate and as apps feed it; passes when

    - at the model's size, its top-1 is LiteRT's on at least `edge.min_app_agreement` of the frames and the labels
      it read from the model's metadata are ours;
    - at the images' own size and at `edge.app_frame_size` (`edge.app_frames`: MediaPipe resizes them itself),
      its accuracy is at most `edge.max_app_accuracy_drop` below the SavedModel's on the same images (the
      accuracy gate's rule with its own limit: what apps get is held to what TF Serving gets).
    """
    frame_sets = {"model": iter([list(eval_data.frames)]), **app_frame_sets(eval_data.encoded, options.app_frame_size)}
    # The model-size frames are cropped as serving crops already; the others are whole, cropped by MediaPipe.
    answers = classify_sets(tflite, frame_sets, reference.spec, already_cropped=("model",))
    client = answers["model"]
    agreed = agreement(ours, client.indices)
    expected = tuple(labels[index] for index in client.indices)
    labels_ok = client.labels == expected
    accuracy = _accuracy(client.indices, eval_data.labels)
    sizes = {name: _size_check(answers[name].indices, eval_data.labels, name, reference, options)
             for name in (OWN_SIZE, CAMERA_SIZE)}  # fmt: skip
    passed = agreed >= options.min_app_agreement and labels_ok and all(size["passed"] for size in sizes.values())
    reason = (
        f"MediaPipe {client.version} ImageClassifier agrees with LiteRT on {agreed:.4f} of {len(eval_data)} eval "
        f"frames (edge.min_app_agreement {options.min_app_agreement}), accuracy {accuracy:.4f}"
    )
    if not labels_ok:
        reason += "; the labels it read from the model's metadata are not the label map's"
    reason += "; " + "; ".join(str(size["reason"]) for size in sizes.values())
    if not passed:
        reason += "; not pushed"
    details = {"mediapipe": client.version, "agreement": agreed, "accuracy": accuracy, "count": len(eval_data)}
    return AppCheck(
        passed=passed, reason=reason, details={**details, "labels_from_metadata": labels_ok, "sizes": sizes}
    )


def _accuracy(indices: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(indices == labels)) if len(labels) else 0.0


def _size_check(
    indices: np.ndarray, labels: np.ndarray, name: str, reference: SizeReference, options: EdgeOptions
) -> dict[str, Any]:
    """MediaPipe's accuracy on the frames of one size against the SavedModel's, judged as the accuracy gate judges
    (with `edge.max_app_accuracy_drop`)."""
    accuracy = _accuracy(indices, labels)
    drop = reference.saved_model_accuracy - accuracy
    passed = drop <= options.max_app_accuracy_drop + 1e-9
    where = describe_size(name, options.app_frame_size)
    reason = (
        f"accuracy {accuracy:.4f} on frames {where} (MediaPipe resizes them), "
        f"{drop * 100:.2f} points below the SavedModel's, {'within' if passed else 'beyond'} "
        f"edge.max_app_accuracy_drop {options.max_app_accuracy_drop * 100:.2f} points"
    )
    size = list(options.app_frame_size) if name == CAMERA_SIZE else "own"
    return {"accuracy": accuracy, "drop": drop, "passed": passed, "frame_size": size, "reason": reason}


def combine_gates(gate: GateResult, check: AppCheck) -> GateResult:
    """The accuracy gate's verdict with the MediaPipe check's: blessed only when both pass."""
    return GateResult(blessed=gate.blessed and check.passed, drop=gate.drop, reason=f"{gate.reason}; {check.reason}")
