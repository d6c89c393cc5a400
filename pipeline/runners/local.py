"""Runs the tfxp pipeline in this process: LocalDagRunner, SQLite ML Metadata under OUT, Beam DirectRunner.

The runner is the only place that touches the file system before the run: it resolves relative paths,
picks the example split from the data layout, writes the frozen config beside the outputs, then hands
the config to the pure `create_pipeline`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import TfxpConfig, write_config
from pipeline.layout import OutputLayout, output_layout

ProgressCallback = Callable[[str, str, float], None]
"""Called with (component id, state `running`|`finished`, seconds since the component started)."""


def _is_remote(path: str) -> bool:
    return "://" in path


def _absolute(path: str) -> str:
    return path if not path or _is_remote(path) else str(Path(path).expanduser().resolve())


def resolve_config(config: TfxpConfig) -> TfxpConfig:
    """Absolute paths and a concrete `data.split`, so the pipeline does not depend on the working dir.

    Raises:
        FileNotFoundError: `data.path` is a local directory that does not exist.
    """
    data_path = _absolute(config.data.path)
    if not _is_remote(data_path) and not Path(data_path).is_dir():
        raise FileNotFoundError(
            f"data.path {data_path} is not a directory; make the digits data with "
            f"`tfxp data digits --out {config.data.path}` or point `--set data.path=...` at your TFRecords"
        )
    split = config.data.split
    if split == "auto":
        has_folders = _is_remote(data_path) or all((Path(data_path) / name).is_dir() for name in ("train", "eval"))
        split = "folders" if has_folders else "hash"
    schema = config.data.schema_source
    if schema not in ("label_map", "infer"):
        schema = _absolute(schema)
        if not _is_remote(schema) and not Path(schema).is_file():
            raise FileNotFoundError(f"data.schema: curated schema file {schema} does not exist")
    data = config.data.model_copy(
        update={"path": data_path, "labels": _absolute(config.data.labels_path), "split": split, "schema_source": schema}
    )
    pipeline = config.pipeline.model_copy(update={"output": _absolute(config.pipeline.output)})
    serving = config.serving.model_copy(update={"base_path": _absolute(config.serving.base_path)})
    return config.model_copy(update={"data": data, "pipeline": pipeline, "serving": serving})


class _ComponentProgress(logging.Handler):
    """Turns LocalDagRunner's "Component X is running/finished." log lines into progress callbacks."""

    def __init__(self, callback: ProgressCallback) -> None:
        super().__init__(logging.INFO)
        self._callback = callback
        self._started: dict[str, float] = {}
        self.current: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg not in ("Component %s is running.", "Component %s is finished.") or not record.args:
            return
        node_id = str(record.args[0] if isinstance(record.args, tuple) else record.args)
        now = time.monotonic()
        if record.msg.endswith("running."):
            self._started[node_id] = now
            self.current = node_id
            self._callback(node_id, "running", 0.0)
        else:
            self.current = None
            self._callback(node_id, "finished", now - self._started.get(node_id, now))


class ComponentFailed(RuntimeError):
    """A pipeline component failed; `component` names it, the message says why."""

    def __init__(self, component: str, cause: BaseException) -> None:
        self.component = component
        self.cause = cause
        super().__init__(f"component {component} failed: {type(cause).__name__}: {cause}")


@dataclass
class LocalRun:
    """What a local run produced; the summary is built from MLMD afterwards."""

    config: TfxpConfig
    layout: OutputLayout
    wall_seconds: float
    failure: ComponentFailed | None = None
    seconds_by_component: dict[str, float] = field(default_factory=dict)


def run_local(config: TfxpConfig, progress: ProgressCallback | None = None) -> LocalRun:
    """Resolves the config, writes it beside the outputs and runs the pipeline with LocalDagRunner.

    Args:
        config: The validated config (relative paths allowed).
        progress: Optional callback for per-component progress.

    Returns:
        A LocalRun; `failure` is set (not raised) when a component failed, so callers can still
        write a summary.
    """
    from tfx import v1 as tfx

    from pipeline.pipeline import create_pipeline

    config = resolve_config(config)
    layout = output_layout(config)
    Path(layout.metadata_path).parent.mkdir(parents=True, exist_ok=True)
    write_config(config, Path(layout.config_path))
    seconds: dict[str, float] = {}

    def record(node_id: str, state: str, elapsed: float) -> None:
        if state == "finished":
            seconds[node_id] = elapsed
        if progress is not None:
            progress(node_id, state, elapsed)

    handler = _ComponentProgress(record)
    absl_logger = logging.getLogger("absl")
    previous_level = absl_logger.level
    absl_logger.addHandler(handler)
    absl_logger.setLevel(min(previous_level or logging.INFO, logging.INFO))
    started = time.monotonic()
    failure = None
    try:
        pipeline = create_pipeline(
            config, metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
                layout.metadata_path
            )
        )
        tfx.orchestration.LocalDagRunner().run(pipeline)
    except Exception as error:  # a component's failure, reported in the summary and by the CLI
        failure = ComponentFailed(handler.current or "pipeline setup", error)
    finally:
        absl_logger.removeHandler(handler)
        absl_logger.setLevel(previous_level)
    return LocalRun(config, layout, time.monotonic() - started, failure, seconds)
