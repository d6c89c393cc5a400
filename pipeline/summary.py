"""The run summary (`OUT/run-summary.json`, `components.report.summary.RunSummary`) of a local run, from ML Metadata.

MLMD gives the latest pipeline run's components: each one's execution state (complete, cached, failed) and
duration, and the artifacts they wrote. Those artifacts go to the one gatherer the RunReport component uses too
(`components.report.inputs.summarize`); what only MLMD knows (states, durations, a cached model already pushed)
is added here. An output the summary cannot read (a corrupt `training_metrics.json`, unreadable TFMA results) is
listed under `problems` with its component, path and error, and everything else is still reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.baseline.served import find_served_model
from components.baseline.spec import NOT_COMPARED_PROPERTY, SERVED_PATH_PROPERTY, SERVED_VERSION_PROPERTY
from components.load_check import blessing as load_check
from components.pusher.executor import PUBLISHED_NOW_PROPERTY, PUSH_NOTE_PROPERTY
from components.report.inputs import ReportInputs, summarize
from components.report.summary import ComponentState, DataSeen, RunSummary
from components.validation.drift import RECORD_PROPERTIES, STOPPED_DECISION, summary_entry
from foundation.contract import SAVED_MODEL_FILE
from foundation.data.spans import SPANS_PROPERTY, parse_spans
from foundation.model_identity import MODEL_IDENTITY_PROPERTY, version_holds
from foundation.publish import is_complete_version
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


def baseline_properties(evaluator: ComponentRecord) -> dict[str, str] | None:
    """The Evaluator's `baseline_model` input's properties (`components.report.inputs.ReportInputs.baseline`):
    the served `version` and `path` ("" when nothing was served yet) and why it was `not_compared`."""
    artifact = (evaluator.inputs.get("baseline_model") or [None])[0]
    if artifact is None:
        return None
    return {
        "version": _string_property(artifact, SERVED_VERSION_PROPERTY) or "",
        "path": _string_property(artifact, SERVED_PATH_PROPERTY) or "",
        "not_compared": _string_property(artifact, NOT_COMPARED_PROPERTY) or "",
    }


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
    """The version TF Serving serves now: the newest complete one under the serving base path, or the rollout's
    `stable` (`components.baseline.served.find_served_model`)."""
    served = find_served_model(output_layout(config).serving_base)
    return served.version if served else None


def _existing_push(destination: str | None, identity: str | None, summary: RunSummary) -> str | None:
    """`destination` when it is still a complete version holding the pushed model; otherwise None, and a problem
    saying why.

    The Pusher's record outlives the version: an operator may have removed it since (a rollback), or another
    model may be in it. The summary reads the version's model identity back from its files
    (`foundation.model_identity.version_holds`) and names it as pushed or served only when it holds `identity`,
    the model the Pusher pushed (None for a Pusher execution from before tfxp recorded it: not checked).
    """
    if not destination:
        return None
    if not is_complete_version(destination, SAVED_MODEL_FILE):
        summary.add_problem(
            "Pusher",
            destination,
            "the Pusher recorded this version as pushed, but it no longer exists (removed since?); it is not served",
        )
        return None
    if identity and not version_holds(destination, identity):
        summary.add_problem(
            "Pusher",
            destination,
            f"the Pusher recorded this version as holding {identity}, but its files hold another model (changed "
            "since the push?); this run's model is not served",
        )
        return None
    return destination


FINISHED_STATES = ("complete", "cached")


def build_summary(
    config: TfxpConfig,
    metadata_path: str,
    wall_seconds: float,
    failure: BaseException | None = None,
    failed_component: str | None = None,
    started_at: float = 0.0,
) -> RunSummary:
    """The run summary of docs/architecture.md's output contract: ML Metadata's components and the artifacts they name,
    read by the RunReport component's gatherer (`components.report.inputs.summarize`).

    What only ML Metadata and the runner know is added here: each component's state and duration, whether the
    Trainer's model is an earlier run's (and already pushed), the failure, and what is served after the run.

    Args:
        config: The run's resolved config.
        metadata_path: The SQLite MLMD file.
        wall_seconds: The run's duration.
        failure: The failure, when a component failed.
        failed_component: Its id.
        started_at: The run's start (seconds since the epoch); earlier runs in MLMD are not reported.
    """
    summary = RunSummary.start(config.to_dict(), "failed" if failure else "succeeded")
    components: dict[str, ComponentRecord] = {}
    store = None
    if Path(metadata_path).exists():
        since_ms = int(started_at * 1000) - 1000  # MLMD and this clock may round differently
        try:
            store = open_store(metadata_path)
            components = latest_run_components(store, config.pipeline.name, max(since_ms, 0))
        except Exception as error:  # reported in run-summary.json and on stderr, never dropped
            summary.add_problem(
                "pipeline", metadata_path, f"cannot read the ML Metadata store: {type(error).__name__}: {error}"
            )
    summary.components = {name: _state(record, failure) for name, record in components.items()}
    summary.wall_seconds = round(wall_seconds, 2)
    if failure is not None:
        summary.error = str(failure)
        summary.failed_component = failed_component
        if failed_component and failed_component not in summary.components:
            summary.components[failed_component] = ComponentState(status="failed", seconds=None)
    summarize(_inputs(config, components, store, summary), summary)
    _add_drift(summary, components, failure)
    if failure is None:
        summary.served_version = served_version(config)
    rollout = rollout_entry(config)
    if rollout is not None:  # the key only where a rollout runs: direct runs keep the keys they always had
        summary.rollout = rollout
    return summary


def rollout_entry(config: TfxpConfig) -> dict[str, Any] | None:
    """The rollout after the run (`RunSummary.rollout`, `serving.rollout.state.rollout_summary`); None under
    `serving.rollout: direct`."""
    if config.serving.rollout != "canary":
        return None
    from serving.rollout.state import rollout_summary

    return rollout_summary(output_layout(config).serving_base)


def _add_drift(
    summary: RunSummary, components: dict[str, ComponentRecord], failure: BaseException | None = None
) -> None:
    """`data.drift`: the warnings and accepted findings the ExampleValidator recorded on its anomalies artifact, and
    a drift stop (the failure's message, and the distances its `DriftError` carries); a stop is the run's
    decision."""
    validator = components.get("ExampleValidator")
    anomalies = validator.outputs.get("anomalies") if validator is not None else None
    properties = {name: _string_property(anomalies[0], name) for name in RECORD_PROPERTIES} if anomalies else {}
    stop_record = getattr(getattr(failure, "cause", failure), "record", None)
    drift = summary_entry(properties, summary.error, stop_record if isinstance(stop_record, dict) else None)
    if not drift:
        return
    if summary.data is None:
        summary.data = DataSeen()
    summary.data.drift = drift
    if "stopped" in drift:
        summary.decision = STOPPED_DECISION


def ended_state(status: str, run_failed: bool) -> str:
    """A component's ML Metadata state as the run ended. A component that raised stays RUNNING (or NEW) in ML
    Metadata, its execution never published; once the run has failed nothing is still running: it failed."""
    return "failed" if run_failed and status not in FINISHED_STATES else status


def _state(record: ComponentRecord, failure: BaseException | None) -> ComponentState:
    return ComponentState(status=ended_state(record.status, failure is not None), seconds=record.seconds)


def _first(record: ComponentRecord | None, key: str) -> metadata_store_pb2.Artifact | None:
    artifacts = record.outputs.get(key) if record is not None else None
    return artifacts[0] if artifacts else None


def _inputs(
    config: TfxpConfig,
    components: dict[str, ComponentRecord],
    store: metadata_store.MetadataStore | None,
    summary: RunSummary,
) -> ReportInputs:
    """What the run's artifacts in ML Metadata say, as the RunReport component's gatherer takes them."""
    examples = _first(components.get("ImportExampleGen"), "examples")
    evaluator = components.get("Evaluator")
    blessing = _first(evaluator, "blessing")
    trainer, pusher = components.get("Trainer"), components.get("Pusher")
    pushed = _first(pusher, "pushed_model")
    destination = None
    if pushed is not None and _int_property(pushed, "pushed"):
        identity = _string_property(pushed, MODEL_IDENTITY_PROPERTY)
        destination = _existing_push(_string_property(pushed, "pushed_destination"), identity, summary)
    cached_model = trainer is not None and trainer.status == "cached"
    already = None
    if cached_model and destination and store is not None and pusher is not None and pushed is not None:
        # The Pusher found the version there (published_now 0: e.g. a copied output folder, where no earlier
        # Pusher execution pushed to this destination): nothing was written, so nothing was pushed.
        found = _int_property(pushed, PUBLISHED_NOW_PROPERTY) == 0
        repushed = pusher.status == "cached" or found or published_before(store, pushed)
        already = destination.rstrip("/").rsplit("/", 1)[-1] if repushed else None
    note = _string_property(pushed, PUSH_NOTE_PROPERTY) if pushed is not None and pusher is not None else None
    if note and destination and pusher is not None and pusher.status == "complete":  # said by the run that pushed
        summary.add_problem("Pusher", destination, note)
    edge = _first(components.get("EdgeExporter"), "edge_model")
    model = _first(trainer, "model")
    evaluation = _first(evaluator, "evaluation")
    infra_blessing = _first(components.get(load_check.COMPONENT_ID), load_check.BLESSING_KEY)
    return ReportInputs(
        config=summary.config,
        labels_path=config.data.labels_path,
        out_dir=config.pipeline.output,
        spans=(_string_property(examples, SPANS_PROPERTY) or "") if examples is not None else None,
        statistics_uri=_uri(_first(components.get("StatisticsGen"), "statistics")),
        anomalies_uri=_uri(_first(components.get("ExampleValidator"), "anomalies")),
        model_uri=_uri(model),
        model_run_uri=_uri(_first(trainer, "model_run")),
        evaluation_uri=_uri(evaluation) if evaluator is not None else None,
        blessed=bool(blessing is not None and _int_property(blessing, "blessed")) if evaluator is not None else None,
        baseline=baseline_properties(evaluator) if evaluator is not None else None,
        load_check=None
        if infra_blessing is None
        else {
            "uri": infra_blessing.uri,
            "blessed": bool(_int_property(infra_blessing, load_check.BLESSED_PROPERTY)),
            "reason": _string_property(infra_blessing, load_check.REASON_PROPERTY) or "",
        },
        pushed_destination=destination,
        edge_model_uri=_uri(edge),
        model_cached=cached_model,
        already_served=already,
    )


def _uri(artifact: metadata_store_pb2.Artifact | None) -> str | None:
    return artifact.uri if artifact is not None else None


def report_inputs(config: TfxpConfig, components: dict[str, ComponentRecord]) -> ReportInputs:
    """The artifacts of a run's components (from `latest_run_components`), for `artifact_facts` (`tfxp report`)."""
    return _inputs(config, components, None, RunSummary.start(config.to_dict()))


def write_summary(summary: RunSummary, path: Path) -> None:
    """Writes the summary as indented JSON, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary.to_json_dict(), indent=2, default=str) + "\n")
