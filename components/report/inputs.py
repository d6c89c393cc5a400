"""The one gatherer of a run's facts from its artifacts, for the RunReport component and for `tfxp run`/`report`.

Both front ends describe the run's artifacts as `ReportInputs` (their directories and custom properties): the
RunReport component from its input artifacts (`components.report.executor`), the local runner from ML Metadata
(`pipeline.summary`, which also sets the two fields only ML Metadata knows, `model_cached` and `already_served`).
`summarize` reads the directories into the typed run summary (`components.report.summary.RunSummary`) and
`artifact_facts` into the rest of what the page shows; `facts_from_inputs` is both, for the component, which marks
what it cannot know (each component's start and state, the earlier runs) as `not_available`. An input that is
missing (edge disabled, `evaluator.baseline: none`) or unreadable becomes a problem on the page, never an error.

Example:
    facts = facts_from_inputs(ReportInputs(config=config_dict, model_uri=".../Trainer/model/5", ...))
    html = report_html(facts)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from components.baseline import reason
from components.edge_exporter.summary import edge_summary
from components.load_check.blessing import COMPONENT_ID as LOAD_CHECK_ID
from components.load_check.blessing import RESULT_FILE, read_result
from components.report import diagnosis, evaluation, readers
from components.report.facts import RunFacts, reported
from components.report.summary import BaselineRecord, DataSeen, EdgeRecord, LoadCheckRecord, RunSummary
from foundation.contract import ACCURACY_METRIC, TRAINING_METRICS_FILE, read_label_map
from foundation.data.spans import parse_spans

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
        load_check: The LoadCheck's InfraBlessing: {"uri", "blessed" (bool), "reason"}; None without the
            component (`serving.load_check` off under `serving.rollout: direct`).
        pushed_destination: The version directory the Pusher pushed to; None when it did not push.
        edge_model_uri: The EdgeExporter's `edge_model`; None when edge is disabled.
        model_cached: The Trainer's model is an earlier run's (ML Metadata: the Trainer was cached); the
            RunReport component cannot tell and leaves it False.
        already_served: The version an earlier run already pushed this very model to (ML Metadata); None when
            not known or not so.
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
    load_check: dict[str, Any] | None = None
    pushed_destination: str | None = None
    edge_model_uri: str | None = None
    model_cached: bool = False
    already_served: str | None = None


def facts_from_inputs(inputs: ReportInputs) -> RunFacts:
    """The report's facts from the pipeline's artifacts; never raises for a missing or unreadable input."""
    summary = summarize(inputs)  # the RunReport runs only after every component before it succeeded
    facts = RunFacts(out_dir=inputs.out_dir, summary=summary.to_json_dict())
    facts.not_available = {
        "components": NO_METADATA.format(what="when each component started and whether it ran or was cached"),
        "history": NO_METADATA.format(what="the earlier runs"),
        "misclassified": NOT_SCANNED,
    }
    artifact_facts(facts, inputs)
    return facts


@contextmanager
def _reported(summary: RunSummary, component: str, path: str, what: str) -> Iterator[None]:
    """Records an error of the block as a problem of the summary instead of raising it."""
    try:
        yield
    except Exception as error:  # in run-summary.json and on the page, never dropped
        summary.add_problem(component, path, f"cannot read the {what}: {type(error).__name__}: {error}")


def summarize(inputs: ReportInputs, summary: RunSummary | None = None) -> RunSummary:
    """The run summary from the run's artifacts: spans, training metrics, evaluation, edge, push and decision.

    Args:
        inputs: What the artifacts say.
        summary: A summary to fill (the local runner's, which already holds ML Metadata's problems); default a
            new one of a succeeded run.

    Never raises for a missing or unreadable artifact: it is a problem of the summary.
    """
    summary = summary if summary is not None else RunSummary.start(inputs.config)
    if inputs.spans is not None:
        summary.data = DataSeen(spans_seen=parse_spans(inputs.spans) if inputs.spans else None)
    evaluated = inputs.evaluation_uri is not None or inputs.blessed is not None
    failures = _evaluation(summary, inputs) if evaluated else []
    if inputs.model_uri:
        summary.metrics.training = {}
        path = f"{inputs.model_uri}/{TRAINING_METRICS_FILE}"
        with _reported(summary, "Trainer", path, "training metrics"):
            summary.metrics.training = evaluation.training_metrics(inputs.model_uri)
    if inputs.load_check is not None:
        summary.load_check = _load_check(summary, inputs.load_check)
    if inputs.edge_model_uri:
        with _reported(summary, "EdgeExporter", inputs.edge_model_uri, "edge export metadata"):
            edge = edge_summary(inputs.edge_model_uri)
            summary.edge_model_path = edge["edge_model_path"]
            summary.edge = EdgeRecord.model_validate(edge["edge"])
            for key, value in edge["metrics"].items():
                setattr(summary.metrics, key, value)
    summary.pushed_model_dir = inputs.pushed_destination
    if evaluated:
        _decision(summary, inputs, failures)
    return summary


def _load_check(summary: RunSummary, blessing: dict[str, Any]) -> LoadCheckRecord:
    """The LoadCheck's outcome from its `load_check.json`; from the blessing's properties when that cannot be
    read (a problem of the summary then)."""
    record = LoadCheckRecord(passed=bool(blessing["blessed"]), reason=str(blessing.get("reason") or ""))
    with _reported(summary, LOAD_CHECK_ID, f"{blessing['uri']}/{RESULT_FILE}", "load check result"):
        record = LoadCheckRecord.model_validate(read_result(blessing["uri"]), from_attributes=True)
    return record


def _evaluation(summary: RunSummary, inputs: ReportInputs) -> list[str]:
    """The blessing, the baseline and the eval metrics; returns TFMA's validation failures for the reason."""
    uri = inputs.evaluation_uri
    evaluator = inputs.config.get("evaluator") or {}
    metrics: dict[str, dict[str, float]] = {}
    failures: list[str] = []
    unread = len(summary.problems)
    if uri:
        with _reported(summary, "Evaluator", uri, "TFMA metrics"):
            metrics = evaluation.evaluation_metrics(uri)
        with _reported(summary, "Evaluator", uri, "TFMA validation result"):
            failures = evaluation.validation_failures(uri)
    summary.blessed = bool(inputs.blessed)
    served = inputs.baseline or {}
    version = served.get("version", "")
    mode: Literal["served", "none"] = "none" if evaluator.get("baseline") == "none" else "served"
    baseline = BaselineRecord(
        mode=mode,
        version=version,
        path=served.get("path", ""),
        accuracy=metrics.get("baseline", {}).get(ACCURACY_METRIC) if version else None,
    )
    if served.get("not_compared"):  # set only then: the key is not in a summary whose baseline was compared
        baseline.not_compared = served["not_compared"]
    summary.baseline = baseline
    if len(summary.problems) > unread and not metrics:
        head = "pushed" if summary.blessed else "not pushed"  # the same heads as components.baseline.reason's
        summary.blessing_reason = f"{head}: the Evaluator's output in {uri} could not be read"
    candidate = metrics.get("candidate", {})
    summary.metrics.accuracy = candidate.get(ACCURACY_METRIC)
    summary.metrics.example_count = candidate.get("example_count")
    if "baseline" in metrics:
        summary.metrics.baseline_accuracy = metrics["baseline"].get(ACCURACY_METRIC)
    return failures


def _decision(summary: RunSummary, inputs: ReportInputs, failures: list[str]) -> None:
    """`decision` and `blessing_reason` (naming the served version): `no new data` when the Trainer's model is an
    earlier run's and nothing new was pushed (refused again, or an earlier run already pushed it: never twice).
    A model the Evaluator blessed but the load check refused was not pushed because of that: the reason says so.
    When the Trainer's own diagnosis says the model is broken, the reason ends with its symptoms and likely causes,
    so the run says why, not only "not pushed"."""
    pushed = summary.pushed_model_dir
    no_new_data = inputs.model_cached and (inputs.already_served is not None or not pushed)
    summary.decision = "no new data" if no_new_data else "pushed" if pushed else "not pushed"
    training = summary.metrics.training or {}
    if "warm_start" in training:
        summary.warm_start = training["warm_start"]
    if summary.blessing_reason is None:  # else the Evaluator's output could not be read: said so already
        evaluator = inputs.config.get("evaluator") or {}
        baseline = summary.baseline or BaselineRecord()
        summary.blessing_reason = reason.blessing_reason(
            summary.blessed,
            summary.metrics.accuracy,
            reason.Baseline(baseline.mode, baseline.version, baseline.accuracy, baseline.not_compared),
            float(evaluator.get("min_accuracy", 0.0)),
            float(evaluator.get("max_accuracy_drop", 0.0)),
            failures,
            already_served=inputs.already_served,
            no_new_data=no_new_data,
        )
    check = summary.load_check
    if check is not None and not check.passed and summary.blessed and summary.decision != "pushed":
        summary.blessing_reason = reason.refused_by_load_check(summary.blessing_reason, check.reason, no_new_data)
    broken = diagnosis.broken_diagnosis(training)
    if broken is not None:
        summary.blessing_reason += "; " + diagnosis.reason_clause(broken)


def artifact_facts(facts: RunFacts, inputs: ReportInputs, labels: list[str] | None = None) -> None:
    """What the page shows beyond the summary: examples per split and class, anomalies, the training curves, the
    SavedModel's size and the confusion matrix; what cannot be read is a problem of `facts`.

    Args:
        facts: Filled in place.
        inputs: The run's artifacts.
        labels: The label map's class names when the caller has read it already; None = read `labels_path`.
    """
    if inputs.statistics_uri:
        with reported(facts, "StatisticsGen", inputs.statistics_uri, "statistics"):
            facts.splits = readers.counts_from_statistics(inputs.statistics_uri)
            facts.splits_source = "StatisticsGen"
    if inputs.anomalies_uri:
        with reported(facts, "ExampleValidator", inputs.anomalies_uri, "anomalies"):
            facts.anomalies = readers.anomaly_lines(inputs.anomalies_uri)
        with reported(facts, "ExampleValidator", inputs.anomalies_uri, "drift record"):
            facts.drift = readers.drift_record(inputs.anomalies_uri)
    if inputs.model_uri:
        facts.saved_model_bytes = readers.directory_bytes(evaluation.saved_model_dir(inputs.model_uri))
    if inputs.model_run_uri:
        with reported(facts, "Trainer", inputs.model_run_uri, "TensorBoard scalars"):
            facts.curves = readers.epoch_curves(inputs.model_run_uri)
    if inputs.evaluation_uri:
        if labels is None:
            labels = []
            if inputs.labels_path:
                with reported(facts, "pipeline", inputs.labels_path, "label map"):
                    labels = read_label_map(inputs.labels_path)
        with reported(facts, "Evaluator", inputs.evaluation_uri, "TFMA confusion matrix"):
            facts.confusion = evaluation.confusion_matrix(inputs.evaluation_uri, labels)
