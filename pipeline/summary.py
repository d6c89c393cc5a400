"""The run summary (`OUT/run-summary.json`), read back from ML Metadata after a run.

Everything in it is what MLMD recorded for the latest pipeline run: each component's execution state
(complete, cached, failed) and duration, the Evaluator's blessing and metrics, and the Pusher's
destination. The blessing gets one human-readable line saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.contract import ACCURACY_METRIC
from components.edge_exporter.summary import edge_summary
from pipeline.config import TfxpConfig

_STATES = {
    metadata_store_pb2.Execution.COMPLETE: "complete",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.NEW: "new",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}


@dataclass(frozen=True)
class ComponentRecord:
    """One component's execution in a run."""

    name: str
    status: str
    seconds: float
    outputs: dict[str, list[metadata_store_pb2.Artifact]]
    inputs: dict[str, list[metadata_store_pb2.Artifact]]


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


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
    runs = store.get_contexts_by_type("pipeline_run")
    pipeline_contexts = store.get_contexts_by_type("pipeline")
    pipeline_ids = {context.id for context in pipeline_contexts if context.name == pipeline_name}
    if not runs or not pipeline_ids:
        return {}
    run = max(runs, key=lambda context: (context.create_time_since_epoch, context.id))
    if run.create_time_since_epoch < since_ms:
        return {}
    executions = store.get_executions_by_context(run.id)
    node_prefix = f"{pipeline_name}."
    records: dict[str, ComponentRecord] = {}
    for execution in sorted(executions, key=lambda item: item.id):
        node_names = [
            context.name[len(node_prefix) :]
            for context in store.get_contexts_by_execution(execution.id)
            if context.type == "node" and context.name.startswith(node_prefix)
        ]
        if not node_names:
            continue
        events = store.get_events_by_execution_ids([execution.id])
        artifacts = {artifact.id: artifact for artifact in store.get_artifacts_by_id([e.artifact_id for e in events])}
        inputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        outputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
        for event in events:
            key = event.path.steps[0].key if event.path.steps else ""
            is_output = event.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
            (outputs if is_output else inputs).setdefault(key, []).append(artifacts[event.artifact_id])
        seconds = max(0.0, (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000)
        records[node_names[0]] = ComponentRecord(
            node_names[0], _STATES.get(execution.last_known_state, "unknown"), round(seconds, 2), outputs, inputs
        )
    return records


def _int_property(artifact: metadata_store_pb2.Artifact, name: str) -> int | None:
    value = artifact.custom_properties.get(name)
    return value.int_value if value is not None else None


def _string_property(artifact: metadata_store_pb2.Artifact, name: str) -> str | None:
    value = artifact.custom_properties.get(name)
    return value.string_value if value is not None else None


def evaluation_metrics(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """Overall-slice metrics from a TFMA output dir: {"candidate": {...}, "baseline": {...}, "diff": {...}}."""
    import tensorflow_model_analysis as tfma

    grouped: dict[str, dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for item in metrics.metric_keys_and_values:
            group = "diff" if item.key.is_diff else (item.key.model_name or "candidate")
            value = item.value
            if value.HasField("double_value"):
                grouped.setdefault(group, {})[item.key.name] = value.double_value.value
    return grouped


def blessing_reason(
    blessed: bool, metrics: dict[str, dict[str, float]], config: TfxpConfig, validation_failures: list[str]
) -> str:
    """One line saying why the model was or was not blessed."""
    accuracy = metrics.get("candidate", {}).get(ACCURACY_METRIC)
    baseline = metrics.get("baseline", {}).get(ACCURACY_METRIC)
    minimum = config.evaluator.min_accuracy
    drop = config.evaluator.max_accuracy_drop
    if accuracy is None:
        return "not blessed: the Evaluator produced no accuracy" if not blessed else "blessed"
    parts = [f"eval accuracy {accuracy:.4f} {'≥' if accuracy >= minimum else '<'} evaluator.min_accuracy {minimum}"]
    if baseline is None:
        parts.append("no blessed baseline yet")
    else:
        change = accuracy - baseline
        verdict = "within" if change >= -drop - 1e-10 else "beyond"
        parts.append(
            f"change vs last blessed model ({baseline:.4f}) {change:+.4f}, {verdict} evaluator.max_accuracy_drop {drop}"
        )
    head = "blessed" if blessed else "not blessed"
    text = f"{head}: " + "; ".join(parts)
    if not blessed and validation_failures:
        text += " (TFMA: " + "; ".join(validation_failures) + ")"
    return text


def validation_failures(evaluation_uri: str) -> list[str]:
    import tensorflow_model_analysis as tfma

    try:
        result = tfma.load_validation_result(evaluation_uri)
    except Exception:  # no validation file (e.g. an Evaluator without thresholds)
        return []
    return [
        failure.message.strip().splitlines()[0]
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
        if failure.message
    ]


def training_metrics(model_uri: str) -> dict[str, Any]:
    """`training_metrics.json` written by the Trainer into the Model artifact, if present."""
    path = Path(model_uri) / "training_metrics.json"
    if not path.is_file():
        return {}
    try:
        loaded = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def build_summary(
    config: TfxpConfig,
    metadata_path: str,
    wall_seconds: float,
    failure: BaseException | None = None,
    failed_component: str | None = None,
    started_at: float = 0.0,
) -> dict[str, Any]:
    """The run summary of ARCHITECTURE.md's output contract, from MLMD.

    Args:
        config: The run's resolved config.
        metadata_path: The SQLite MLMD file.
        wall_seconds: The run's duration.
        failure: The failure, when a component failed.
        failed_component: Its id.
        started_at: The run's start (seconds since the epoch); earlier runs in MLMD are not reported.
    """
    components: dict[str, ComponentRecord] = {}
    if Path(metadata_path).exists():
        since_ms = int(started_at * 1000) - 1000  # MLMD and this clock may round differently
        components = latest_run_components(open_store(metadata_path), config.pipeline.name, max(since_ms, 0))
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
    }
    if failure is not None:
        summary["error"] = str(failure)
        summary["failed_component"] = failed_component
        if failed_component and failed_component not in summary["components"]:
            summary["components"][failed_component] = {"status": "failed", "seconds": None}
    evaluator = components.get("Evaluator")
    if evaluator is not None:
        blessing = (evaluator.outputs.get("blessing") or [None])[0]
        evaluation = (evaluator.outputs.get("evaluation") or [None])[0]
        blessed = bool(blessing is not None and _int_property(blessing, "blessed"))
        metrics = evaluation_metrics(evaluation.uri) if evaluation is not None else {}
        failures = validation_failures(evaluation.uri) if evaluation is not None else []
        summary["blessed"] = blessed
        summary["blessing_reason"] = blessing_reason(blessed, metrics, config, failures)
        candidate = metrics.get("candidate", {})
        summary["metrics"]["accuracy"] = candidate.get(ACCURACY_METRIC)
        summary["metrics"]["example_count"] = candidate.get("example_count")
        if "baseline" in metrics:
            summary["metrics"]["baseline_accuracy"] = metrics["baseline"].get(ACCURACY_METRIC)
    trainer = components.get("Trainer")
    if trainer is not None and trainer.outputs.get("model"):
        summary["metrics"]["training"] = training_metrics(trainer.outputs["model"][0].uri)
    edge_exporter = components.get("EdgeExporter")
    if edge_exporter is not None and edge_exporter.outputs.get("edge_model"):
        edge = edge_summary(edge_exporter.outputs["edge_model"][0].uri)
        summary["edge_model_path"] = edge["edge_model_path"]
        summary["edge"] = edge["edge"]
        summary["metrics"].update(edge["metrics"])
    pusher = components.get("Pusher")
    if pusher is not None and pusher.outputs.get("pushed_model"):
        pushed = pusher.outputs["pushed_model"][0]
        if _int_property(pushed, "pushed"):
            summary["pushed_model_dir"] = _string_property(pushed, "pushed_destination")
    return summary


def write_summary(summary: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
