"""Before a local run: one `tfxp run` at a time per output, and what a killed run left behind.

A local run holds an exclusive lock on `OUT/<pipeline>/run.lock` (`flock`, which the kernel drops when the
process ends, also on kill -9), so a second `tfxp run` on the same output is refused instead of sharing the
SQLite ML Metadata store and the pipeline root. While the lock is held no other tfxp run of this pipeline is
alive, so an execution still RUNNING in ML Metadata belongs to a run that died (kill -9, OOM, power loss): it
is marked CANCELED, and the output directories it created and left empty (`Trainer/model/<id>`) are removed.
Directories holding files (e.g. a killed Trainer's TensorBoard logs) are kept. The Trainer's backup lives
outside them (`Trainer/model_run/backup-…`), so the rerun still resumes from it.

Another program writing the same metadata.db without the lock (a hand-written LocalDagRunner script) is not
seen; do not point one at a tfxp output while `tfxp run` uses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import TfxpError

LOCK_FILE = "run.lock"
SYSTEM_DIR = ".system"  # TFX's own per-node bookkeeping under the pipeline root, left alone


class OutputInUseError(TfxpError, RuntimeError):
    """Another `tfxp run` holds the output's lock."""


@contextlib.contextmanager
def run_lock(pipeline_dir: Path) -> Iterator[Path]:
    """Holds `pipeline_dir/run.lock` while the block runs.

    Args:
        pipeline_dir: `OUT/<pipeline>` (created if missing).

    Yields:
        The lock file's path; it holds the owner's pid and start time while locked.

    Raises:
        OutputInUseError: another process holds the lock, naming it and what to do.
    """
    pipeline_dir.mkdir(parents=True, exist_ok=True)
    path = pipeline_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise OutputInUseError(
            f"another `tfxp run` ({holder}) is using {pipeline_dir}; wait for it to end, or pass another --output"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    try:
        yield path
    finally:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@dataclass(frozen=True)
class StaleExecution:
    """An execution a killed run left RUNNING, now CANCELED.

    Attributes:
        execution_id: Its ML Metadata id (also the last part of its output dirs).
        component: The component id, e.g. `Trainer`.
        removed: The empty output dirs removed.
    """

    execution_id: int
    component: str
    removed: tuple[str, ...]

    def describe(self) -> str:
        """One line for the terminal, e.g. `Trainer (execution 7): marked CANCELED, removed Trainer/model/7`."""
        removed = f", removed empty {', '.join(self.removed)}" if self.removed else ""
        return (
            f"{self.component} (execution {self.execution_id}) left RUNNING by a killed run: marked CANCELED{removed}"
        )


def _holds_files(directory: Path) -> bool:
    return any(not path.is_dir() for path in directory.rglob("*"))


def _remove_empty_outputs(pipeline_root: Path, component: str, execution_id: int) -> tuple[str, ...]:
    node_dir = pipeline_root / component
    if not node_dir.is_dir():
        return ()
    removed = []
    for output_dir in sorted(node_dir.glob(f"*/{execution_id}")):
        if output_dir.parent.name == SYSTEM_DIR or not output_dir.is_dir() or _holds_files(output_dir):
            continue
        for sub in sorted(output_dir.rglob("*"), reverse=True):  # deepest first
            sub.rmdir()
        output_dir.rmdir()
        removed.append(str(output_dir.relative_to(pipeline_root)))
    return tuple(removed)


def cancel_stale_executions(metadata_path: str, pipeline_name: str, pipeline_root: str) -> list[StaleExecution]:
    """Marks the pipeline's RUNNING executions CANCELED and removes their empty output dirs.

    Call it only while holding `run_lock`: then no live run owns those executions.

    Args:
        metadata_path: The SQLite ML Metadata file; nothing happens when it does not exist yet.
        pipeline_name: The `pipeline` context's name (`pipeline.name`).
        pipeline_root: The TFX pipeline root; output dirs are `<root>/<component>/<output>/<execution id>`.

    Returns:
        What was found and done, oldest first.
    """
    if not Path(metadata_path).is_file():
        return []
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE
    store = metadata_store.MetadataStore(config)
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        return []
    running = [
        execution
        for execution in store.get_executions_by_context(pipeline.id)
        if execution.last_known_state == metadata_store_pb2.Execution.RUNNING
    ]
    if not running:
        return []
    node_type = store.get_context_type("node").id
    prefix = f"{pipeline_name}."
    stale = []
    for execution in sorted(running, key=lambda e: e.id):
        nodes = [c.name for c in store.get_contexts_by_execution(execution.id) if c.type_id == node_type]
        component = nodes[0].removeprefix(prefix) if nodes else "?"
        execution.last_known_state = metadata_store_pb2.Execution.CANCELED
        store.put_executions([execution])
        removed = _remove_empty_outputs(Path(pipeline_root), component, execution.id) if nodes else ()
        stale.append(StaleExecution(execution.id, component, removed))
    return stale
