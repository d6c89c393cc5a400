"""The device model's verdict: the accuracy drop against the SavedModel, and MediaPipe's ImageClassifier against LiteRT.

`accuracy_gate` blesses a TFLite model that loses at most `edge.max_accuracy_drop` accuracy; with
`edge.app_client: mediapipe`, `check_app_client` runs the app's classifier on the same eval frames and
`combine_gates` blesses only when both pass.

Example:
    gate = accuracy_gate(saved_model_accuracy=0.95, tflite_accuracy=0.94, max_drop=0.02)
    gate.blessed  # True; gate.reason says both accuracies, the drop and the limit
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.app_client import agreement, classify
from edge.data import LabeledImages
from edge.options import EdgeOptions


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
