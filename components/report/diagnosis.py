"""The Trainer's diagnosis of the model it trained, in words: the Training section's alert and the run's reason.

The Trainer writes `diagnosis` into `training_metrics.json` (`components/trainer/diagnosis.py`, `diagnose`):
`{"broken": bool, "symptoms": [...], "likely_causes": [...]}`; the lists are joined with that module's own
`symptoms_text` and `causes_text` (it imports no ML framework). A file from before the Trainer recorded a
diagnosis, or one whose diagnosis is not of that shape, reads as not broken.

Example:
    diagnosis = broken_diagnosis(training)  # None unless the Trainer said the model is broken
    reason_clause(diagnosis)
    # "the Trainer's own evaluation says the model is broken: training accuracy 0.95 but eval accuracy 0.37; ...;
    #  likely causes: (1) the schedule: ...; (2) BatchNorm statistics: ..."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.trainer.diagnosis import causes_text, symptoms_text


@dataclass(frozen=True)
class Diagnosis:
    """A broken model's symptoms and likely causes, as the Trainer measured and listed them."""

    symptoms: tuple[str, ...]
    likely_causes: tuple[str, ...]


def _lines(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value if str(item).strip()) if isinstance(value, list) else ()


def broken_diagnosis(training: dict[str, Any] | None) -> Diagnosis | None:
    """The Trainer's diagnosis when it says the model is broken (`diagnosis.broken` is true); None otherwise,
    also when `training` (the training metrics) has no diagnosis."""
    diagnosis = (training or {}).get("diagnosis")
    if not isinstance(diagnosis, dict) or diagnosis.get("broken") is not True:
        return None
    return Diagnosis(_lines(diagnosis.get("symptoms")), _lines(diagnosis.get("likely_causes")))


def page_text(diagnosis: Diagnosis) -> tuple[str, str]:
    """The Training section's alert: its bold lead and its text."""
    return (
        "The trained model looks broken:",
        f"{symptoms_text(diagnosis.symptoms)}. Likely causes: {causes_text(diagnosis.likely_causes)}.",
    )


def reason_clause(diagnosis: Diagnosis) -> str:
    """The clause `inputs._decision` appends to the run's `blessing_reason` (after "; ")."""
    return (
        f"the Trainer's own evaluation says the model is broken: {symptoms_text(diagnosis.symptoms)}; "
        f"likely causes: {causes_text(diagnosis.likely_causes)}"
    )
