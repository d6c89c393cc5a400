"""Says when a trained model is broken, and why it likely is, from what training and evaluation measured.

A model that learned its training images but answers one class (or chance) on the eval split is not a model the
Evaluator should merely "not push": the run's message names the symptoms and the usual causes. The check is a
pure function of numbers in `training_metrics.json` (`eval_metrics.TopPredictedShare` is the one extra metric
it needs), and imports no ML framework, so the report words it the same way (`components/report/diagnosis.py`).

Example:
    diagnose(train_accuracy=0.95, train_loss=0.2, eval_accuracy=0.37, eval_loss=71.8, num_classes=3,
             top_predicted_share=1.0, warmup_steps=300, train_steps=300)
    # {"broken": True, "symptoms": ["answers one class for 100 % of the eval images", ...], "likely_causes": [...]}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# Training accuracy at least this high, and this far above the eval accuracy, makes a poor eval a broken model.
HIGH_TRAIN_ACCURACY = 0.5
TRAIN_EVAL_GAP = 0.3
# One class for at least this share of the eval images.
ONE_CLASS_SHARE = 0.9
# Eval accuracy within this share of the way from chance to perfect counts as chance.
CHANCE_MARGIN = 0.1
# Eval loss this many times the last training loss (and above the loss of a uniform guess, ln C).
LOSS_RATIO = 5.0
# A warmup longer than this share of the run leaves little time at a decayed rate.
LONG_WARMUP = 0.5


def diagnose(
    train_accuracy: float,
    train_loss: float,
    eval_accuracy: float,
    eval_loss: float,
    num_classes: int,
    top_predicted_share: float | None,
    warmup_steps: int,
    train_steps: int,
    eval_crop_differs: bool = False,
) -> dict[str, Any]:
    """Whether the model is broken (a good train split, a chance or one-class eval split), with likely causes.

    Args:
        train_accuracy: The last epoch's training accuracy.
        train_loss: The last epoch's training loss.
        eval_accuracy: Top-1 accuracy on the eval split after training.
        eval_loss: Cross-entropy on the eval split after training.
        num_classes: Classes of the label map.
        top_predicted_share: `TopPredictedShare` on the eval split; None when not measured.
        warmup_steps: The schedule's warmup.
        train_steps: The run's steps.
        eval_crop_differs: Training crops randomly while evaluation takes a central crop (or the reverse).

    Returns:
        {"broken": bool, "symptoms": [...], "likely_causes": [...]} (both lists empty when not broken).
    """
    chance = 1.0 / max(num_classes, 1)
    symptoms = []
    if top_predicted_share is not None and top_predicted_share >= ONE_CLASS_SHARE:
        symptoms.append(f"answers one class for {top_predicted_share:.0%} of the eval images")
    if eval_accuracy < chance + CHANCE_MARGIN * (1 - chance):
        symptoms.append(f"eval accuracy {eval_accuracy:.3g} is near chance ({chance:.3g} for {num_classes} classes)")
    if eval_loss > LOSS_RATIO * train_loss and eval_loss > math.log(max(num_classes, 2)):
        symptoms.append(
            f"eval loss {eval_loss:.3g} is {eval_loss / max(train_loss, 1e-12):.0f}× the last training loss"
        )
    learned = train_accuracy >= HIGH_TRAIN_ACCURACY and train_accuracy - eval_accuracy >= TRAIN_EVAL_GAP
    if not (learned and symptoms):
        return {"broken": False, "symptoms": [], "likely_causes": []}
    symptoms.insert(0, f"training accuracy {train_accuracy:.3g} but eval accuracy {eval_accuracy:.3g}")
    return {
        "broken": True,
        "symptoms": symptoms,
        "likely_causes": _likely_causes(warmup_steps, train_steps, eval_crop_differs),
    }


def _likely_causes(warmup_steps: int, train_steps: int, eval_crop_differs: bool) -> list[str]:
    """The usual causes of a broken model, the schedule's first (a long warmup, else a peak rate too high)."""
    causes = []
    if warmup_steps >= LONG_WARMUP * train_steps:
        causes.append(
            f"the schedule: the warmup ({warmup_steps} steps) takes {warmup_steps / train_steps:.0%} of the run "
            f"({train_steps} steps), so the rate peaks late and never decays (trainer.schedule.warmup_*)"
        )
    else:
        causes.append(
            "the schedule: a peak rate too high for the optimizer (trainer.schedule.learning_rate, "
            "trainer.optimizer.name; `tfxp run` refuses the settings known to fail)"
        )
    causes.append(
        "BatchNorm statistics: the moving means and variances lag the weights after a short or unstable run "
        "(train longer, or lower the peak rate)"
    )
    preprocessing = "the preprocessing: eval images differ from training images"
    if eval_crop_differs:
        preprocessing += " (training crops randomly, evaluation takes the trainer.eval_crop central crop)"
    causes.append(preprocessing + "; check data.label_offset and the eval split's labels with `tfxp data inspect`")
    return causes


def symptoms_text(symptoms: Sequence[str]) -> str:
    """The symptoms joined by semicolons; a generic line when none is listed."""
    return "; ".join(symptoms) or "no symptoms listed"


def causes_text(causes: Sequence[str]) -> str:
    """The causes numbered, `(1) ...; (2) ...` (a cause may hold a semicolon of its own); `not listed` when none."""
    return "; ".join(f"({number}) {cause}" for number, cause in enumerate(causes, 1)) or "not listed"


def explain(diagnosis: dict[str, Any]) -> str:
    """One paragraph for the Trainer's log and the report; "" when the model is not broken."""
    if not diagnosis.get("broken"):
        return ""
    symptoms, causes = diagnosis.get("symptoms", []), diagnosis.get("likely_causes", [])
    return f"the trained model looks broken: {symptoms_text(symptoms)}. Likely causes: {causes_text(causes)}."
