"""The run summary (`OUT/run-summary.json`), read back from ML Metadata after a run.

Everything in it is what MLMD recorded for the latest pipeline run: each component's execution state
(complete, cached, failed) and duration, the Evaluator's blessing and metrics, and the Pusher's
destination. The blessing gets one human-readable line saying why. An output the summary cannot read (a corrupt
`training_metrics.json`, unreadable TFMA results) is listed under `problems` with its component, path and error,
and everything else is still reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.baseline import reason
from components.baseline.spec import SERVED_PATH_PROPERTY, SERVED_VERSION_PROPERTY
from components.contract import ACCURACY_METRIC, TRAINING_METRICS_FILE
from components.data.spans import SPANS_PROPERTY, parse_spans
from components.edge_exporter.summary import edge_summary
from components.publish import list_versions
from components.report.evaluation import evaluation_metrics, training_metrics, validation_failures
from components.validation.drift import RECORD_PROPERTIES, STOPPED_DECISION, summary_entry
from pipeline.config import TfxpConfig
from pipeline.layout import output_layout
from pipeline.mlmd import latest_run, open_store, run_executions


@dataclass(frozen=True)
class ComponentRecord:
    """One component's execution in a run."""

    name: str
    status: str
    seconds: float
    outputs: dict[str, list[metadata_store_pb2.Artifact]]
    inputs: dict[str, list[metadata_store_pb2.Artifact]]


def latest_run_components(
    store: metadata_store.MetadataStore, pipeline_name: str, since_ms: int = 0
) -> dict[str, ComponentRecord]:
    """The executions of the newest `pipeline_run` context of `pipeline_name`, by component id.

    Args:
        store: The MLMD store.
        pipeline_name: `pipeline.name`.
        since_ms: Ignore runs created before this time (ms since the epoch), e.g. the current run's start,
            so a run that failed before registering does not report the previous run's results.
    """
    run = latest_run(store, pipeline_name, since_ms)
    if run is None:
        return {}
    records: dict[str, ComponentRecord] = {}
    for record in run_executions(store, run, pipeline_name):
        events = store.get_events_by_execution_ids([record.execution.id])
        artifacts = {artifact.id: artifact for artifact in store.get_artifacts_by_id([e.artifact_id for e in events])}
        inputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        outputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        for event in events:
            key = event.path.steps[0].key if event.path.steps else ""
            is_output = event.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
            (outputs if is_output else inputs).setdefault(key, []).append(artifacts[event.artifact_id])
        records[record.component] = ComponentRecord(record.component, record.status, record.seconds, outputs, inputs)
    return records


def _int_property(artifact: metadata_store_pb2.Artifact, name: str) -> int | None:
    value = artifact.custom_properties.get(name)
    return value.int_value if value is not None else None


def _string_property(artifact: metadata_store_pb2.Artifact, name: str) -> str | None:
    value = artifact.custom_properties.get(name)
    return value.string_value if value is not None else None


def spans_seen(examples: metadata_store_pb2.Artifact) -> list[int] | None:
    """The spans an Examples artifact holds (its `spans` custom property); None for data without spans."""
    text = _string_property(examples, SPANS_PROPERTY)
    return parse_spans(text) if text else None


def served_baseline(evaluator: ComponentRecord, metrics: dict[str, dict[str, float]], config: TfxpConfig) -> dict:
    """What the Evaluator compared with: `mode` (`evaluator.baseline`), the served `version` and `path` ("" when
    nothing was served yet) and TFMA's `accuracy` of that version on this run's eval split."""
    artifact = (evaluator.inputs.get("baseline_model") or [None])[0]
    version = (_string_property(artifact, SERVED_VERSION_PROPERTY) or "") if artifact is not None else ""
    path = (_string_property(artifact, SERVED_PATH_PROPERTY) or "") if artifact is not None else ""
    accuracy = metrics.get("baseline", {}).get(ACCURACY_METRIC) if version else None
    return {"mode": config.evaluator.baseline, "version": version, "path": path, "accuracy": accuracy}


def published_before(store: metadata_store.MetadataStore, pushed: metadata_store_pb2.Artifact) -> bool:
    """Whether an earlier Pusher execution pushed to the same version as `pushed` (so this one found it there)."""
    destination = _string_property(pushed, "pushed_destination")
    return any(
        artifact.id != pushed.id
        and _int_property(artifact, "pushed")
        and _string_property(artifact, "pushed_destination") == destination
        for artifact in store.get_artifacts_by_type("PushedModel")
    )


def served_version(config: TfxpConfig) -> str | None:
    """The version TF Serving serves now: the newest complete one under the serving base path."""
    versions = list_versions(output_layout(config).serving_base, required_file="saved_model.pb")
    return versions[0].rsplit("/", 1)[-1] if versions else None


def _existing_push(destination: str | None, problems: list[dict[str, str]]) -> str | None:
    """`destination` when it is still a complete version; otherwise None, and a problem saying it is gone.

    The Pusher's record outlives the version: an operator may have removed it since (a rollback). The summary
    then does not name it as pushed or served.
    """
    if not destination:
        return None
    base = destination.rstrip("/").rsplit("/", 1)[0]
    if destination.rstrip("/") in list_versions(base, required_file="saved_model.pb"):
        return destination
    problems.append(
        {
            "component": "Pusher",
            "path": destination,
            "error": "the Pusher recorded this version as pushed, but it no longer exists (removed since?); "
            "it is not served",
        }
    )
    return None


@contextmanager
def _reported(problems: list[dict[str, str]], component: str, path: str, what: str) -> Iterator[None]:
    """Records an error of the block in `problems` instead of raising it.

    A summary that cannot read one output still reports everything else, and says what it could not read,
    where, and why: {"component", "path", "error"}.
    """
    try:
        yield
    except Exception as error:  # reported in run-summary.json and on stderr, never dropped
        detail = f"cannot read the {what}: {type(error).__name__}: {error}"
        problems.append({"component": component, "path": path, "error": detail})


def build_summary(
    config: TfxpConfig,
    metadata_path: str,
    wall_seconds: float,
    failure: BaseException | None = None,
    failed_component: str | None = None,
    started_at: float = 0.0,
) -> dict[str, Any]:
    """The run summary of docs/architecture.md's output contract, from MLMD.

    Args:
        config: The run's resolved config.
        metadata_path: The SQLite MLMD file.
        wall_seconds: The run's duration.
        failure: The failure, when a component failed.
        failed_component: Its id.
        started_at: The run's start (seconds since the epoch); earlier runs in MLMD are not reported.
    """
    problems: list[dict[str, str]] = []
    components: dict[str, ComponentRecord] = {}
    store = None
    if Path(metadata_path).exists():
        since_ms = int(started_at * 1000) - 1000  # MLMD and this clock may round differently
        with _reported(problems, "pipeline", metadata_path, "ML Metadata store"):
            store = open_store(metadata_path)
            components = latest_run_components(store, config.pipeline.name, max(since_ms, 0))
    summary: dict[str, Any] = {
        "status": "failed" if failure else "succeeded",
        "blessed": False,
        "blessing_reason": None,
        "pushed_model_dir": None,
        "edge_model_path": None,
        "metrics": {},
        "components": {
            name: {"status": record.status, "seconds": record.seconds} for name, record in components.items()
        },
        "wall_seconds": round(wall_seconds, 2),
        "config": config.to_dict(),
        "problems": problems,
    }
    if failure is not None:
        summary["error"] = str(failure)
        summary["failed_component"] = failed_component
        if failed_component and failed_component not in summary["components"]:
            summary["components"][failed_component] = {"status": "failed", "seconds": None}
    example_gen = components.get("ImportExampleGen")
    if example_gen is not None and example_gen.outputs.get("examples"):
        summary["data"] = {"spans_seen": spans_seen(example_gen.outputs["examples"][0])}
    validator = components.get("ExampleValidator")
    anomalies = validator.outputs.get("anomalies") if validator is not None else None
    properties = {name: _string_property(anomalies[0], name) for name in RECORD_PROPERTIES} if anomalies else {}
    if drift := summary_entry(properties, summary.get("error")):
        summary.setdefault("data", {})["drift"] = drift
        if "stopped" in drift:
            summary["decision"] = STOPPED_DECISION
    evaluator = components.get("Evaluator")
    failures: list[str] = []
    if evaluator is not None:
        failures = _add_evaluation(summary, evaluator, config, problems)
    trainer = components.get("Trainer")
    if trainer is not None and trainer.outputs.get("model"):
        model_uri = trainer.outputs["model"][0].uri
        summary["metrics"]["training"] = {}
        with _reported(problems, "Trainer", f"{model_uri}/{TRAINING_METRICS_FILE}", "training metrics"):
            summary["metrics"]["training"] = training_metrics(model_uri)
    edge_exporter = components.get("EdgeExporter")
    if edge_exporter is not None and edge_exporter.outputs.get("edge_model"):
        edge_uri = edge_exporter.outputs["edge_model"][0].uri
        with _reported(problems, "EdgeExporter", edge_uri, "edge export metadata"):
            edge = edge_summary(edge_uri)
            summary["edge_model_path"] = edge["edge_model_path"]
            summary["edge"] = edge["edge"]
            summary["metrics"].update(edge["metrics"])
    pusher = components.get("Pusher")
    if pusher is not None and pusher.outputs.get("pushed_model"):
        pushed = pusher.outputs["pushed_model"][0]
        if _int_property(pushed, "pushed"):
            summary["pushed_model_dir"] = _existing_push(_string_property(pushed, "pushed_destination"), problems)
    if evaluator is not None:
        _add_decision(summary, config, components, store, failures)
    if failure is None:
        summary["served_version"] = served_version(config)
    return summary


def _add_evaluation(
    summary: dict[str, Any], evaluator: ComponentRecord, config: TfxpConfig, problems: list[dict[str, str]]
) -> list[str]:
    """The blessing, the baseline and the eval metrics; what TFMA output cannot be read goes to `problems`.

    Returns:
        TFMA's validation failures, for the blessing reason (`_add_decision`, once the push is known).
    """
    blessing = (evaluator.outputs.get("blessing") or [None])[0]
    evaluation = (evaluator.outputs.get("evaluation") or [None])[0]
    blessed = bool(blessing is not None and _int_property(blessing, "blessed"))
    metrics: dict[str, dict[str, float]] = {}
    failures: list[str] = []
    unread = len(problems)
    if evaluation is not None:
        with _reported(problems, "Evaluator", evaluation.uri, "TFMA metrics"):
            metrics = evaluation_metrics(evaluation.uri)
        with _reported(problems, "Evaluator", evaluation.uri, "TFMA validation result"):
            failures = validation_failures(evaluation.uri)
    summary["blessed"] = blessed
    summary["baseline"] = served_baseline(evaluator, metrics, config)
    if len(problems) > unread and not metrics:
        head = "pushed" if blessed else "not pushed"  # the same heads as components.baseline.reason's
        summary["blessing_reason"] = f"{head}: the Evaluator's output in {evaluation.uri} could not be read"
    candidate = metrics.get("candidate", {})
    summary["metrics"]["accuracy"] = candidate.get(ACCURACY_METRIC)
    summary["metrics"]["example_count"] = candidate.get("example_count")
    if "baseline" in metrics:
        summary["metrics"]["baseline_accuracy"] = metrics["baseline"].get(ACCURACY_METRIC)
    return failures


def _add_decision(
    summary: dict[str, Any],
    config: TfxpConfig,
    components: dict[str, ComponentRecord],
    store: metadata_store.MetadataStore | None,
    failures: list[str],
) -> None:
    """`blessing_reason` (naming the served version) and `decision`: `pushed`, `not pushed`, or `no new data`
    when the Trainer's model is cached (an earlier run trained it) and nothing new was pushed: it was refused
    again, or an earlier run already pushed it (never twice)."""
    pushed_dir = summary["pushed_model_dir"]
    trainer, pusher = components.get("Trainer"), components.get("Pusher")
    cached_model = trainer is not None and trainer.status == "cached"
    already = None
    if cached_model and pushed_dir and store is not None and pusher is not None:
        repushed = pusher.status == "cached" or published_before(store, pusher.outputs["pushed_model"][0])
        already = pushed_dir.rstrip("/").rsplit("/", 1)[-1] if repushed else None
    no_new_data = cached_model and (already is not None or not pushed_dir)
    summary["decision"] = "no new data" if no_new_data else "pushed" if pushed_dir else "not pushed"
    training = summary["metrics"].get("training") or {}
    if "warm_start" in training:
        summary["warm_start"] = training["warm_start"]
    if summary["blessing_reason"] is not None:  # the Evaluator's output could not be read: said so already
        return
    baseline, evaluator = summary["baseline"], config.evaluator
    summary["blessing_reason"] = reason.blessing_reason(
        summary["blessed"],
        summary["metrics"].get("accuracy"),
        reason.Baseline(baseline["mode"], baseline["version"], baseline["accuracy"]),
        evaluator.min_accuracy,
        evaluator.max_accuracy_drop,
        failures,
        already_served=already,
        no_new_data=no_new_data,
    )


def write_summary(summary: dict[str, Any], path: Path) -> None:
    """Writes the summary as indented JSON, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
