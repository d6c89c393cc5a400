"""The run summary (`OUT/run-summary.json`, ARCHITECTURE.md's output contract) as one typed model.

`RunSummary` is what `tfxp run` writes and `tfxp report` reads back, and what the RunReport component's page is built
from: `components.report.inputs.summarize` fills it from a run's artifacts for both, and the local runner adds what
only ML Metadata knows (each component's state and duration, the failure, what is served now).

A key is in the file exactly when the run set it: the always-present keys (`status` ... `problems`) are set by
`RunSummary.start`, the others (`error`, `failed_component`, `data`, `baseline`, `load_check`, `edge`, `decision`,
`warm_start`, `served_version`) only when the run has them, so a null value (`"served_version": null`: nothing
served) and an absent key (a failed run does not say what is served) keep their different meanings. `to_json_dict`
writes the keys that were set; `model_validate` of a written file sets the same ones again.

Example:
    summary = RunSummary.start(config.to_dict())
    summary.metrics.accuracy = 0.97
    json.dumps(summary.to_json_dict())
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    # Unknown keys are kept (a summary written by a newer tfxp still reads), never dropped; a number that reads as
    # infinity or NaN (`"wall_seconds": 1e999` is valid JSON) is refused where the summary is read back.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class ComponentState(_Record):
    """One component's execution: `status` (`complete`, `cached`, `failed`, ...) and its duration (None when it
    failed before ML Metadata recorded it)."""

    status: str
    seconds: float | None = None


class Problem(_Record):
    """An output the summary could not read: which component wrote it, where, and the error."""

    component: str
    path: str
    error: str


class DataSeen(_Record):
    """What ImportExampleGen read: the span numbers (None for data without span folders)."""

    spans_seen: list[int] | None = None
    # The drift checks' record (`components.validation.drift.summary_entry`): warnings, accepted, stopped.
    drift: dict[str, Any] | None = None


class BaselineRecord(_Record):
    """What the Evaluator compared the candidate with.

    Attributes:
        mode: `evaluator.baseline`.
        version: The served version; "" when nothing was served yet.
        path: Its directory; "" when nothing was served yet.
        accuracy: TFMA's accuracy of that version on this run's eval split.
        not_compared: Why that version was not compared (its label map is not the run's); set only then.
    """

    mode: Literal["served", "none"] = "served"
    version: str = ""
    path: str = ""
    accuracy: float | None = None
    not_compared: str = ""


class LoadCheckRecord(_Record):
    """The LoadCheck's outcome (`serving.load_check.LoadCheckResult`, from its InfraBlessing).

    Attributes:
        passed: The model loaded in the serving process and answered the eval sample like in-process.
        reason: Why, in one line.
        server: `tensorflow_model_server` or `tfxp local server`.
        examples_compared: Eval examples whose answers were compared.
        max_abs_difference: The largest probability gap between served and in-process answers.
        load_seconds: From starting the server to the version being AVAILABLE.
    """

    passed: bool
    reason: str = ""
    server: str = ""
    examples_compared: int = 0
    max_abs_difference: float | None = None
    load_seconds: float | None = None


class EdgeRecord(_Record):
    """The EdgeExporter's outcome (`components.edge_exporter.summary.edge_summary`)."""

    status: str
    blessed: bool = False
    reason: str = ""
    mode: str | None = None
    io_dtype: str | None = None
    arch_check: dict[str, Any] | None = None
    # The published edge version (also when an identical model was already published: status `already_published`).
    version: str | None = None


class Metrics(_Record):
    """The run's numbers; each key is there when the component that measures it ran.

    Attributes:
        accuracy: The candidate's eval accuracy (TFMA).
        example_count: Eval examples TFMA counted.
        baseline_accuracy: The baseline's eval accuracy (TFMA), when it had one.
        training: The Trainer's `training_metrics.json` ({} when it could not be read).
        edge_accuracy: The device model's eval accuracy; the other `edge_*` keys are its size and latency.
    """

    accuracy: float | None = None
    example_count: float | None = None
    baseline_accuracy: float | None = None
    training: dict[str, Any] | None = None
    edge_accuracy: float | None = None
    edge_saved_model_accuracy: float | None = None
    edge_accuracy_drop: float | None = None
    edge_size_bytes: int | None = None
    edge_latency_p50_ms: float | None = None
    edge_latency_p99_ms: float | None = None


Decision = Literal["pushed", "not pushed", "no new data", "stopped by the drift check"]


class RunSummary(_Record):
    """`run-summary.json`: the outcome, the decision and its reason, the metrics, the components, the config.

    Attributes:
        status: `succeeded` or `failed` (a component failed).
        blessed: The Evaluator's blessing.
        blessing_reason: Why the model was pushed or not, in one line (`components.baseline.reason`).
        pushed_model_dir: The version directory pushed (and still there); None when nothing was.
        edge_model_path: The pushed device model; None when none.
        metrics: See `Metrics`.
        components: Each component's state and duration, in the order they ran (local runs).
        wall_seconds: The run's duration (local runs).
        config: The config that ran, as plain data.
        problems: Outputs that could not be read.
        error: The failure (failed runs).
        failed_component: The component that failed (failed runs; None when not known).
        data: What ImportExampleGen read (when it ran).
        baseline: What the Evaluator compared with (when it ran).
        load_check: Whether the model loaded and answered in a serving process (when the LoadCheck ran).
        edge: The EdgeExporter's outcome (when it ran).
        decision: `pushed`, `not pushed` or `no new data` (when the Evaluator ran).
        warm_start: Whether the Trainer started from the served model, and why (when it says).
        served_version: The version served after the run (succeeded local runs; None when nothing is served);
            under a guarded rollout, `stable`.
        rollout: Under `serving.rollout: canary`: `stable`, `canary`, `rolled_back` and the last decision
            (`action`, `by`, `reason`) after the run (`serving.rollout.state`).
    """

    status: Literal["succeeded", "failed"]
    blessed: bool = False
    blessing_reason: str | None = None
    pushed_model_dir: str | None = None
    edge_model_path: str | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    components: dict[str, ComponentState] = Field(default_factory=dict)
    wall_seconds: float | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    problems: list[Problem] = Field(default_factory=list)
    error: str | None = None
    failed_component: str | None = None
    data: DataSeen | None = None
    baseline: BaselineRecord | None = None
    load_check: LoadCheckRecord | None = None
    edge: EdgeRecord | None = None
    decision: Decision | None = None
    warm_start: dict[str, Any] | None = None
    served_version: str | None = None
    rollout: dict[str, Any] | None = None

    @classmethod
    def start(cls, config: dict[str, Any], status: Literal["succeeded", "failed"] = "succeeded") -> RunSummary:
        """A summary with the keys every summary has, before anything was read."""
        return cls(
            status=status,
            blessed=False,
            blessing_reason=None,
            pushed_model_dir=None,
            edge_model_path=None,
            metrics=Metrics(),
            config=config,
            problems=[],
        )

    def add_problem(self, component: str, path: str, error: str) -> None:
        """Records an output that could not be read."""
        self.problems.append(Problem(component=component, path=path, error=error))

    def to_json_dict(self) -> dict[str, Any]:
        """The summary as `run-summary.json` holds it: the keys that were set, in the contract's order.

        A number that is not finite (a diverged model's NaN accuracy) is written as null, "no number": the reader
        refuses NaN and infinity, and the run that needs its report most must not write one its report refuses.
        """
        return _finite_or_null(self.model_dump(mode="json", exclude_unset=True))


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(item) for item in value]
    return value
