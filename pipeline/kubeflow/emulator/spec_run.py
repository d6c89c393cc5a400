"""The record of a `tfxp run-spec` run: the task states, each task's `TaskRun`, the run's `SpecRun`, and the error
of a spec that cannot run.

Example:
    run = run_spec(Path("pipeline.yaml"))
    print(run.state, run.task("Trainer").state)  # SUCCEEDED, CACHED, FAILED or SKIPPED
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from foundation.errors import TfxpError

SUCCEEDED, CACHED, FAILED, SKIPPED = "SUCCEEDED", "CACHED", "FAILED", "SKIPPED"


class RunSpecError(TfxpError, ValueError):
    """The spec or the parameters cannot be run (the message says what and how to fix it)."""


@dataclass
class TaskRun:
    """One task's run.

    Attributes:
        name: The task's name; a nested DAG's tasks carry their own names.
        state: `SUCCEEDED`, `CACHED` (KFP served it from its cache), `FAILED` or `SKIPPED` (an upstream task failed,
            so it never started).
        seconds: Wall time.
        cache_requested: The spec enables KFP's cache for it.
        log: Its stdout and stderr; empty when it did not run.
        error: Why it failed; why it was skipped.
        outputs: Output artifact key → {"uri", "metadata"} as the launcher recorded them (a cached task: the
            cached execution's, with an earlier run's URIs).
        cached_from: The run whose execution a cached task reused.
    """

    name: str
    state: str
    seconds: float = 0.0
    cache_requested: bool = False
    log: str = ""
    error: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    cached_from: str = ""


@dataclass
class SpecRun:
    """A run of a compiled spec.

    Attributes:
        pipeline: The spec's pipeline name.
        run_id: The run's id (a UUID, as KFP's).
        run_name: The run's resource name.
        backend: `kfp` or `vertex`.
        pipeline_root: The pipeline root it ran with.
        run_dir: Where its artifacts are, `<root>/<pipeline>/<run id>` on KFP (an object-store URI).
        state_dir: The emulated backend's folder: object store, MLMD and cache, logs, run records.
        state: `SUCCEEDED` or `FAILED` (the pipeline's DAG; the exit handler does not change it).
        parameters: The pipeline parameters it ran with.
        tasks: Every task, in the order they ran (skipped ones where they would have run).
    """

    pipeline: str
    run_id: str
    run_name: str
    backend: str
    pipeline_root: str
    run_dir: str
    state_dir: str
    state: str = SUCCEEDED
    parameters: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskRun] = field(default_factory=list)

    def task(self, name: str) -> TaskRun:
        """The task run called `name`.

        Raises:
            KeyError: no such task.
        """
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name}; tasks: {', '.join(task.name for task in self.tasks)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written to `<state>/runs/<run id>.json`."""
        return asdict(self)
