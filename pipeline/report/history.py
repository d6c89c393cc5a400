"""What ML Metadata says about a pipeline's runs: the latest run's component timeline, and every run's decision.

ML Metadata keeps each run (`pipeline_run` context) with its executions, so the history needs no file of its own:
for each run, the Evaluator's blessing and evaluation (accuracy from TFMA's metrics) and the Pusher's version.

Example:
    store = open_store("OUT/tfxp-digits/metadata.db")
    run_history(store, "tfxp-digits")  # [{"run": ..., "time": ..., "blessed": True, "accuracy": 0.97, ...}, ...]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipeline.mlmd import FINISHED, ExecutionRecord, latest_run, run_executions

MAX_RUNS = 50
"""The newest runs the history shows."""


def timeline(records: list[ExecutionRecord]) -> list[dict[str, Any]]:
    """Components in the order they started: {"component", "status", "start" (s since the epoch), "seconds"}."""
    ordered = sorted(records, key=lambda record: (record.execution.create_time_since_epoch, record.execution.id))
    return [
        {
            "component": record.component,
            "status": record.status,
            "start": record.execution.create_time_since_epoch / 1000,
            "seconds": record.seconds,
        }
        for record in ordered
    ]


def latest_timeline(store: metadata_store.MetadataStore, pipeline_name: str) -> list[dict[str, Any]]:
    """The newest run's timeline; [] when the store has no run of `pipeline_name`."""
    run = latest_run(store, pipeline_name)
    return [] if run is None else timeline(run_executions(store, run, pipeline_name))


def outputs(store: metadata_store.MetadataStore, execution_id: int) -> dict[str, list[metadata_store_pb2.Artifact]]:
    """An execution's output artifacts by output key."""
    events = [
        event
        for event in store.get_events_by_execution_ids([execution_id])
        if event.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
    ]
    artifacts = {artifact.id: artifact for artifact in store.get_artifacts_by_id([e.artifact_id for e in events])}
    keyed: dict[str, list[metadata_store_pb2.Artifact]] = {}
    for event in events:
        key = event.path.steps[0].key if event.path.steps else ""
        keyed.setdefault(key, []).append(artifacts[event.artifact_id])
    return keyed


def _property(artifact: metadata_store_pb2.Artifact, name: str) -> Any:
    value = artifact.custom_properties.get(name)
    if value is None:
        return None
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


def run_history(
    store: metadata_store.MetadataStore,
    pipeline_name: str,
    accuracy_of: Callable[[str], float | None],
    max_runs: int = MAX_RUNS,
) -> list[dict[str, Any]]:
    """Every run's outcome, oldest first.

    Args:
        store: The pipeline's ML Metadata.
        pipeline_name: `pipeline.name`.
        accuracy_of: The candidate's accuracy from an Evaluator `evaluation` directory (None when unreadable).
        max_runs: Only the newest this many runs.

    Returns:
        [{"run": context name, "time": s since the epoch, "status": "complete" | "failed" | ..., "blessed": bool
        or None (no Evaluator), "accuracy": float or None, "pushed_version": str or None}].
    """
    if not any(context.name == pipeline_name for context in store.get_contexts_by_type("pipeline")):
        return []
    runs = sorted(store.get_contexts_by_type("pipeline_run"), key=lambda run: (run.create_time_since_epoch, run.id))
    history = []
    for run in runs[-max_runs:]:
        records = {record.component: record for record in run_executions(store, run, pipeline_name)}
        unfinished = [record.status for record in records.values() if record.status not in FINISHED]
        entry: dict[str, Any] = {
            "run": run.name,
            "time": run.create_time_since_epoch / 1000,
            "status": unfinished[0] if unfinished else "complete",
            "blessed": None,
            "accuracy": None,
            "pushed_version": None,
        }
        evaluator = records.get("Evaluator")
        if evaluator is not None and evaluator.status in FINISHED:
            produced = outputs(store, evaluator.execution.id)
            blessing = (produced.get("blessing") or [None])[0]
            evaluation = (produced.get("evaluation") or [None])[0]
            entry["blessed"] = bool(blessing is not None and _property(blessing, "blessed"))
            entry["accuracy"] = accuracy_of(evaluation.uri) if evaluation is not None else None
        pusher = records.get("Pusher")
        if pusher is not None and pusher.status in FINISHED:
            pushed = (outputs(store, pusher.execution.id).get("pushed_model") or [None])[0]
            if pushed is not None and _property(pushed, "pushed"):
                entry["pushed_version"] = str(_property(pushed, "pushed_version") or "") or None
        history.append(entry)
    return history
