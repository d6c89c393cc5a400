"""A run's facts from the pipeline's own artifacts, for the RunReport component (no ML Metadata, no run summary).

The RunReport component hands over what its input artifacts say (their directories and custom properties) as
`ReportInputs`; `facts_from_inputs` reads the directories and writes the summary fields the sections read, as
`pipeline.summary` does for a local run from ML Metadata. What it cannot know there (each component's start and
state, the earlier runs) is marked `not_available`, so those sections say so. An input that is missing (edge
disabled, `evaluator.baseline: none`) or unreadable becomes a line on the page, never an error.

Example:
    facts = facts_from_inputs(ReportInputs(config=config_dict, model_uri=".../Trainer/model/5", ...))
    html = report_html(facts)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from components.baseline import reason
from components.contract import ACCURACY_METRIC, TRAINING_METRICS_FILE, read_label_map
from components.data.spans import parse_spans
from components.edge_exporter.summary import edge_summary
from components.report import evaluation, readers
from components.report.facts import RunFacts, reported

NO_METADATA = (
    "Not in this report: the pipeline's RunReport component has no ML Metadata, which records {what}. The local "
    "`tfxp run` writes OUT/report.html with it."
)
NOT_SCANNED = (
    "No misclassified images: the pipeline's RunReport component does not run the model on the eval split "
    "(`tfxp report OUT` does, for a local run)."
)


@dataclass(frozen=True)
class ReportInputs:
    """What the RunReport component's input artifacts say; None where an input is absent.

    Attributes:
        config: The config that ran, as plain data (`TfxpConfig.to_dict()`).
        labels_path: The label map (`data.labels_path`); "" when not known.
        out_dir: Shown as the run's output (`pipeline.output`, or the Kubeflow pipeline root).
        spans: The Examples artifact's `spans` property ("" = data without spans); None without the artifact.
        statistics_uri: StatisticsGen's `statistics`.
        anomalies_uri: ExampleValidator's `anomalies`.
        model_uri: The Trainer's `model` (it holds `training_metrics.json`).
        model_run_uri: The Trainer's `model_run` (TensorBoard scalars).
        evaluation_uri: The Evaluator's `evaluation` (TFMA's metrics, plots and validation result).
        blessed: The Evaluator's blessing; None without it.
        baseline: The ServedBaseline's `baseline_model` properties: {"version", "path"} ("" when nothing was
            served yet) and "not_compared" (why that version was not compared; "" when it was); None without the
            component (`evaluator.baseline: none`).
        pushed_destination: The version directory the Pusher pushed to; None when it did not push.
        edge_model_uri: The EdgeExporter's `edge_model`; None when edge is disabled.
    """

    config: dict[str, Any]
    labels_path: str = ""
    out_dir: str = ""
    spans: str | None = None
    statistics_uri: str | None = None
    anomalies_uri: str | None = None
    model_uri: str | None = None
    model_run_uri: str | None = None
    evaluation_uri: str | None = None
    blessed: bool | None = None
    baseline: dict[str, str] | None = None
    pushed_destination: str | None = None
    edge_model_uri: str | None = None


def facts_from_inputs(inputs: ReportInputs) -> RunFacts:
    """The report's facts from the pipeline's artifacts; never raises for a missing or unreadable input."""
    summary: dict[str, Any] = {
        "status": "succeeded",  # the RunReport runs only after every component before it succeeded
        "blessed": bool(inputs.blessed),
        "blessing_reason": None,
        "pushed_model_dir": inputs.pushed_destination,
        "edge_model_path": None,
        "metrics": {},
        "config": inputs.config,
        "problems": [],
    }
    if inputs.spans is not None:
        summary["data"] = {"spans_seen": parse_spans(inputs.spans)}
    facts = RunFacts(out_dir=inputs.out_dir, summary=summary)
    facts.not_available = {
        "components": NO_METADATA.format(what="when each component started and whether it ran or was cached"),
        "history": NO_METADATA.format(what="the earlier runs"),
        "misclassified": NOT_SCANNED,
    }
    _data(facts, inputs)
    _training(facts, inputs)
    _evaluation(facts, inputs)
    _edge(facts, inputs)
    summary["decision"] = "pushed" if inputs.pushed_destination else "not pushed"
    return facts


def _data(facts: RunFacts, inputs: ReportInputs) -> None:
    if inputs.statistics_uri:
        with reported(facts, "StatisticsGen", inputs.statistics_uri, "statistics"):
            facts.splits = readers.counts_from_statistics(inputs.statistics_uri)
            facts.splits_source = "StatisticsGen"
    if inputs.anomalies_uri:
        with reported(facts, "ExampleValidator", inputs.anomalies_uri, "anomalies"):
            facts.anomalies = readers.anomaly_lines(inputs.anomalies_uri)


def _training(facts: RunFacts, inputs: ReportInputs) -> None:
    if inputs.model_uri:
        path = f"{inputs.model_uri}/{TRAINING_METRICS_FILE}"
        with reported(facts, "Trainer", path, "training metrics"):
            facts.summary["metrics"]["training"] = evaluation.training_metrics(inputs.model_uri)
        facts.saved_model_bytes = readers.directory_bytes(evaluation.saved_model_dir(inputs.model_uri))
    if inputs.model_run_uri:
        with reported(facts, "Trainer", inputs.model_run_uri, "TensorBoard scalars"):
            facts.curves = readers.epoch_curves(inputs.model_run_uri)


def _evaluation(facts: RunFacts, inputs: ReportInputs) -> None:
    summary, uri = facts.summary, inputs.evaluation_uri
    evaluator = inputs.config.get("evaluator") or {}
    baseline = inputs.baseline or {}
    version = baseline.get("version", "")
    metrics: dict[str, dict[str, float]] = {}
    failures: list[str] = []
    if uri:
        with reported(facts, "Evaluator", uri, "TFMA metrics"):
            metrics = evaluation.evaluation_metrics(uri)
        with reported(facts, "Evaluator", uri, "TFMA validation result"):
            failures = evaluation.validation_failures(uri)
        labels: list[str] = []
        if inputs.labels_path:
            with reported(facts, "pipeline", inputs.labels_path, "label map"):
                labels = read_label_map(inputs.labels_path)
        with reported(facts, "Evaluator", uri, "TFMA confusion matrix"):
            facts.confusion = evaluation.confusion_matrix(uri, labels)
    candidate = metrics.get("candidate", {})
    summary["metrics"]["accuracy"] = candidate.get(ACCURACY_METRIC)
    summary["metrics"]["example_count"] = candidate.get("example_count")
    if "baseline" in metrics:
        summary["metrics"]["baseline_accuracy"] = metrics["baseline"].get(ACCURACY_METRIC)
    mode: Literal["served", "none"] = "none" if inputs.baseline is None else "served"
    accuracy = metrics.get("baseline", {}).get(ACCURACY_METRIC) if version else None
    not_compared = baseline.get("not_compared", "")
    summary["baseline"] = {
        "mode": mode,
        "version": version,
        "path": baseline.get("path", ""),
        "accuracy": accuracy,
        "not_compared": not_compared,
    }
    if inputs.blessed is None or not candidate:
        return  # no Evaluator output to explain: the Evaluation section says what is missing
    summary["blessing_reason"] = reason.blessing_reason(
        bool(inputs.blessed),
        candidate.get(ACCURACY_METRIC),
        reason.Baseline(mode, version, accuracy, not_compared),
        float(evaluator.get("min_accuracy", 0.0)),
        float(evaluator.get("max_accuracy_drop", 0.0)),
        failures,
    )


def _edge(facts: RunFacts, inputs: ReportInputs) -> None:
    if not inputs.edge_model_uri:
        return
    with reported(facts, "EdgeExporter", inputs.edge_model_uri, "edge export metadata"):
        edge = edge_summary(inputs.edge_model_uri)
        facts.summary["edge_model_path"] = edge["edge_model_path"]
        facts.summary["edge"] = edge["edge"]
        facts.summary["metrics"].update(edge["metrics"])
