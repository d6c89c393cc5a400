"""A small SQLite ML Metadata store laid out as TFX records a run, written with ml_metadata's own API.

TFX keeps one `pipeline` context (named after the pipeline), one `pipeline_run` context per run and one `node`
context per component (`<pipeline>.<component id>`); each execution belongs to the run and its node, and its
output artifacts hang off OUTPUT events keyed by the output name. Tests of the summary and of the runner's
progress use this instead of running TFX.

Example:
    store = FakeRunStore(tmp_path / "metadata.db")
    run = store.start_run()
    trainer = store.add_execution(run, "Trainer", outputs={"model": [str(model_dir)]})
    store.set_state(trainer, "complete")
"""

from __future__ import annotations

from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

PIPELINE = "tfxp-digits"

_STATES = {
    "running": metadata_store_pb2.Execution.RUNNING,
    "complete": metadata_store_pb2.Execution.COMPLETE,
    "cached": metadata_store_pb2.Execution.CACHED,
    "failed": metadata_store_pb2.Execution.FAILED,
}


class FakeRunStore:
    """Writes runs, executions and output artifacts into an MLMD SQLite file, the way TFX does."""

    def __init__(self, path: Path, pipeline_name: str = PIPELINE) -> None:
        config = metadata_store_pb2.ConnectionConfig()
        config.sqlite.filename_uri = str(path)
        config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        self.store = metadata_store.MetadataStore(config)
        self.pipeline_name = pipeline_name
        self._context_types = {
            name: self.store.put_context_type(metadata_store_pb2.ContextType(name=name))
            for name in ("pipeline", "pipeline_run", "node")
        }
        self._execution_type = self.store.put_execution_type(metadata_store_pb2.ExecutionType(name="Component"))
        artifact_type = metadata_store_pb2.ArtifactType(name="Artifact")
        self._artifact_type = self.store.put_artifact_type(artifact_type)
        self._pipeline = self._context("pipeline", pipeline_name)
        self._nodes: dict[str, int] = {}
        self._runs = 0

    def _context(self, kind: str, name: str) -> int:
        context = metadata_store_pb2.Context(type_id=self._context_types[kind], name=name)
        return int(self.store.put_contexts([context])[0])

    def start_run(self) -> int:
        """A new `pipeline_run` context (created now); returns its id."""
        self._runs += 1
        return self._context("pipeline_run", f"run-{self._runs}")

    def add_execution(
        self,
        run: int,
        component: str,
        state: str = "running",
        outputs: dict[str, list[str]] | None = None,
        properties: dict[str, dict[str, int | str]] | None = None,
    ) -> int:
        """Registers `component`'s execution in `run` with output artifacts at the given URIs.

        Args:
            run: The run's context id.
            component: The component id.
            state: `running`, `complete`, `cached` or `failed`.
            outputs: Output name → artifact URIs.
            properties: Artifact URI → custom properties (e.g. `{"blessed": 1}`).
        """
        if component not in self._nodes:
            self._nodes[component] = self._context("node", f"{self.pipeline_name}.{component}")
        execution = metadata_store_pb2.Execution(type_id=self._execution_type, last_known_state=_STATES[state])
        pairs = []
        for key, uris in (outputs or {}).items():
            for uri in uris:
                artifact = metadata_store_pb2.Artifact(type_id=self._artifact_type, uri=uri)
                for name, value in (properties or {}).get(uri, {}).items():
                    field = "int_value" if isinstance(value, int) else "string_value"
                    setattr(artifact.custom_properties[name], field, value)
                event = metadata_store_pb2.Event(type=metadata_store_pb2.Event.OUTPUT)
                event.path.steps.add().key = key
                pairs.append((artifact, event))
        contexts = self.store.get_contexts_by_id([self._pipeline, run, self._nodes[component]])
        execution_id, _, _ = self.store.put_execution(execution, pairs, contexts)
        return int(execution_id)

    def set_state(self, execution_id: int, state: str) -> None:
        """Publishes the execution's new state (updating its last-update time)."""
        (execution,) = self.store.get_executions_by_id([execution_id])
        execution.last_known_state = _STATES[state]
        self.store.put_execution(execution, [], [])
