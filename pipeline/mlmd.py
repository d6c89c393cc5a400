"""Read-only views of a local run's ML Metadata: the newest pipeline run and its executions, by component.

TFX records each component's execution in MLMD as it goes: registered as RUNNING when the component starts,
then published COMPLETE, CACHED or FAILED. Execution times are MLMD's own (`create_time_since_epoch`,
`last_update_time_since_epoch`, in ms), so the run summary and the live progress read the same numbers.

Example:
    store = open_store("tfxp_output/tfxp-digits/metadata.db")
    run = latest_run(store, "tfxp-digits")
    [(record.component, record.status, record.seconds) for record in run_executions(store, run, "tfxp-digits")]
"""

from __future__ import annotations

from dataclasses import dataclass

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

STATES = {
    metadata_store_pb2.Execution.COMPLETE: "complete",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.NEW: "new",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}
"""MLMD execution states as the run summary spells them."""

FINISHED = frozenset({"complete", "cached"})
"""States of a component that ran to the end (or whose earlier result was reused)."""


@dataclass(frozen=True)
class ExecutionRecord:
    """One component's execution in a run.

    Attributes:
        component: The component id (`ImportExampleGen`, `Trainer`, ...).
        status: `complete`, `cached`, `failed`, `running`, `new`, `canceled` or `unknown`.
        seconds: From registration to the last update (so far, while running).
        execution: The MLMD execution.
    """

    component: str
    status: str
    seconds: float
    execution: metadata_store_pb2.Execution


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    """A read-only connection to the SQLite MLMD store at `metadata_path` (safe while TFX writes to it)."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def latest_run(
    store: metadata_store.MetadataStore, pipeline_name: str, since_ms: int = 0
) -> metadata_store_pb2.Context | None:
    """The newest `pipeline_run` context, or None when `pipeline_name` has none created since `since_ms`.

    Args:
        store: The MLMD store.
        pipeline_name: `pipeline.name`.
        since_ms: Ignore runs created before this time (ms since the epoch), e.g. the current run's start,
            so a run that failed before registering does not report the previous run's results.
    """
    runs = store.get_contexts_by_type("pipeline_run")
    if not runs or not any(context.name == pipeline_name for context in store.get_contexts_by_type("pipeline")):
        return None
    run = max(runs, key=lambda context: (context.create_time_since_epoch, context.id))
    return run if run.create_time_since_epoch >= since_ms else None


def run_executions(
    store: metadata_store.MetadataStore, run: metadata_store_pb2.Context, pipeline_name: str
) -> list[ExecutionRecord]:
    """The executions of `run` in the order TFX registered them, each named by its component."""
    node_prefix = f"{pipeline_name}."
    records = []
    for execution in sorted(store.get_executions_by_context(run.id), key=lambda item: item.id):
        node_names = [
            context.name[len(node_prefix) :]
            for context in store.get_contexts_by_execution(execution.id)
            if context.type == "node" and context.name.startswith(node_prefix)
        ]
        if not node_names:
            continue
        seconds = max(0.0, (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000)
        status = STATES.get(execution.last_known_state, "unknown")
        records.append(ExecutionRecord(node_names[0], status, round(seconds, 2), execution))
    return records
