"""What the report knows about a run: plain JSON data gathered from the summary, ML Metadata and the artifacts.

`pipeline.report.gather` fills it from a local run's output directory, `inputs.facts_from_inputs` from the pipeline's
artifacts (the RunReport component); `build.build_page` turns it into the page. It is
JSON through and through (images are base64 PNG), so a test can build a report from a stored copy of a real
run's facts without TensorFlow (`RunFacts.from_json`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from foundation.bounded import parse_json


@dataclass
class RunFacts:
    """One run's facts; every field but `summary` may be empty when its source is missing.

    Attributes:
        out_dir: The run's output directory (`pipeline.output`).
        summary: `run-summary.json` as written by `tfxp run`.
        timeline: The components in the order they started: {"component", "status" (complete, cached, failed,
            ...), "start" (seconds since the epoch, or None), "seconds" (or None)}.
        splits: Examples per split: {split: {"examples": n, "classes": {class name: n}}} ("classes" may be {}).
        splits_source: Where `splits` came from: `StatisticsGen` or the data set manifest's path.
        anomalies: One line per ExampleValidator anomaly ([] = none found; None = not known).
        drift: The drift checks' record (`readers.drift_record`); None when they did not run or the validator
            published nothing (a drift stop: then the summary's `data.drift` has the distances).
        curves: TensorBoard scalars per epoch: {run ("train", "validation"): {metric: [[epoch, value], ...]}}.
        confusion: TFMA's multi-class confusion matrix: {"labels": [class names], "matrix": [[count]]}, rows
            the true class, columns the predicted one.
        misclassified: The most confidently misclassified eval images: {"png" (base64), "true", "predicted",
            "confidence"}, most confident first.
        misclassified_scanned: How many eval examples were run through the model to find them.
        history: The runs in the pipeline's ML Metadata, oldest first: {"run", "time", "status", "blessed",
            "accuracy", "pushed_version"}.
        saved_model_bytes: The size of the Trainer's SavedModel.
        problems: What could not be read: {"component", "path", "error"} (as in the summary's `problems`).
        not_available: What this report cannot show at all, with why: {"components" | "history" |
            "misclassified": reason}. The RunReport component has no ML Metadata (no timeline, no history) and does
            not run the model; the local report knows everything.
    """

    out_dir: str
    summary: dict[str, Any]
    timeline: list[dict[str, Any]] = field(default_factory=list)
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)
    splits_source: str = ""
    anomalies: list[str] | None = None
    drift: dict[str, Any] | None = None
    curves: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    confusion: dict[str, Any] | None = None
    misclassified: list[dict[str, Any]] = field(default_factory=list)
    misclassified_scanned: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    saved_model_bytes: int | None = None
    problems: list[dict[str, str]] = field(default_factory=list)
    not_available: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """The facts as indented JSON (keys in their order: splits train first, classes in label order)."""
        return json.dumps(asdict(self), indent=1, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunFacts:
        """Facts written by `to_json`."""
        return cls(**parse_json(text))


@contextmanager
def reported(facts: RunFacts, component: str, path: str, what: str) -> Iterator[None]:
    """Records an error of the block as a problem of the report instead of raising it."""
    try:
        yield
    except Exception as error:  # shown on the page: one unreadable artifact must not lose the whole report
        facts.problems.append(
            {"component": component, "path": path, "error": f"cannot read the {what}: {type(error).__name__}: {error}"}
        )
