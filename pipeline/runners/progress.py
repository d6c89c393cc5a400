"""Live per-component progress of a local run, read from ML Metadata while LocalDagRunner runs.

LocalDagRunner has no progress hook, and its "Component X is running" log lines are unreliable (libraries
reset absl's verbosity). MLMD is its public record: each component's execution is registered RUNNING when it
starts and published COMPLETE, CACHED or FAILED when it ends. A thread polls a read-only connection to the
SQLite store and reports each component's start and end once; after the run, the final snapshot names the
component a failure belongs to.

Example:
    with watch_run(layout.metadata_path, "tfxp-digits", since_ms, print_progress) as watch:
        LocalDagRunner().run(pipeline)
    watch.records  # the run's executions when it ended
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pipeline.mlmd import FINISHED, ExecutionRecord, latest_run, open_store, run_executions

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, str, float], None]
"""Called with (component id, state `running`|`finished`, seconds the component took; 0.0 when starting)."""

POLL_SECONDS = 0.5
"""How often the watcher reads MLMD; a component shorter than this is reported starting and finishing at once."""

SETUP = "pipeline setup"
"""Where a failure belongs that happened before any component started (e.g. compiling the pipeline)."""


class ProgressReporter:
    """Turns successive snapshots of a run's executions into progress calls: each component starts and ends once.

    A component that is already finished when first seen (a quick or cached one) is reported starting, then
    finishing. A failed component is reported starting only; the failure itself is the runner's to report.
    """

    def __init__(self, callback: ProgressCallback | None) -> None:
        self._callback = callback
        self._started: set[str] = set()
        self._finished: set[str] = set()

    def update(self, records: Sequence[ExecutionRecord]) -> None:
        """Reports what changed since the previous snapshot."""
        for record in records:
            if record.component not in self._started:
                self._started.add(record.component)
                self._emit(record.component, "running", 0.0)
            if record.status in FINISHED and record.component not in self._finished:
                self._finished.add(record.component)
                self._emit(record.component, "finished", record.seconds)

    def _emit(self, component: str, state: str, seconds: float) -> None:
        if self._callback is not None:
            self._callback(component, state, seconds)


def read_run(metadata_path: str, pipeline_name: str, since_ms: int) -> list[ExecutionRecord] | None:
    """The executions of the run started since `since_ms`, or None when that run has not registered yet.

    Raises:
        Exception: what MLMD raises for a store it cannot read (e.g. still being created).
    """
    if not Path(metadata_path).exists():
        return None
    store = open_store(metadata_path)
    run = latest_run(store, pipeline_name, since_ms)
    return None if run is None else run_executions(store, run, pipeline_name)


def failed_component(records: Sequence[ExecutionRecord] | None, components: Sequence[str]) -> str:
    """The component a run's failure belongs to.

    Args:
        records: The run's executions when it ended (`read_run`); None when it never registered.
        components: The pipeline's component ids in the order the runner runs them.

    Returns:
        The component whose execution failed or never finished; else the first component with no execution
        (it failed before registering one, e.g. resolving its inputs); else `SETUP`.
    """
    if records is None:
        return SETUP
    for record in records:
        if record.status not in FINISHED:
            return record.component
    seen = {record.component for record in records}
    return next((component for component in components if component not in seen), SETUP)


class RunWatch:
    """What `watch_run` saw: `records` is the run's executions at the last read (None before it registered)."""

    def __init__(self) -> None:
        self.records: list[ExecutionRecord] | None = None


@contextlib.contextmanager
def watch_run(
    metadata_path: str,
    pipeline_name: str,
    since_ms: int,
    callback: ProgressCallback | None,
    poll_seconds: float = POLL_SECONDS,
) -> Iterator[RunWatch]:
    """Reports progress while the block runs the pipeline, polling MLMD from a thread.

    On exit the thread stops and one last read (in the caller's thread) reports what the run ended with, so
    every finished component is reported before this returns.

    Args:
        metadata_path: The SQLite MLMD file (it may not exist yet).
        pipeline_name: `pipeline.name`.
        since_ms: The run's start (ms since the epoch); earlier runs are ignored.
        callback: Receives the progress; None = only record the executions.
        poll_seconds: Seconds between reads.
    """
    reporter = ProgressReporter(callback)
    watch = RunWatch()
    stop = threading.Event()

    def poll() -> None:
        try:
            records = read_run(metadata_path, pipeline_name, since_ms)
        except Exception as error:  # a store TFX is still creating: try again at the next tick
            logger.debug("progress: cannot read %s yet: %s", metadata_path, error)
            return
        if records is not None:
            watch.records = records
            reporter.update(records)

    def loop() -> None:
        while not stop.wait(poll_seconds):
            poll()

    thread = threading.Thread(target=loop, name="tfxp-progress", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stop.set()
        thread.join()
        poll()
