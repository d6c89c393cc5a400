"""Runs the tfxp pipeline in this process: LocalDagRunner, SQLite ML Metadata under OUT, Beam DirectRunner.

The runner is the only place that touches the file system before the run: it resolves relative paths,
recognises the data layout and spans, writes the frozen config beside the outputs, then hands
the config to the pure `create_pipeline`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from foundation.contract import read_label_map
from foundation.data.probe import FileProbe
from foundation.errors import TfxpError
from foundation.paths import is_remote
from pipeline.config import TfxpConfig, write_config
from pipeline.layout import OutputLayout, check_data_apart, output_layout, resolve_data
from pipeline.runners.progress import ProgressCallback, failed_component, watch_run
from pipeline.runners.recovery import cancel_stale_executions, run_lock


def _absolute(path: str) -> str:
    return path if not path or is_remote(path) else str(Path(path).expanduser().resolve())


def resolve_local_paths(config: TfxpConfig) -> TfxpConfig:
    """Absolute paths, and the data section made concrete from the data itself (`pipeline.layout.resolve_data`:
    the layout, span folders, the label offset), so the pipeline does not depend on the working dir.

    Raises:
        FileNotFoundError: `data.path` is a local directory that does not exist, or `pipeline.output` is a file.
        LabelMapError: the label map is missing or breaks the label-map rule (before any component runs).
        DataError: a layout that is not recognised, or span folders that do not fit `data.spans`.
        PathRuleError: an output in `data.path`, or `data.path` in a folder the run fills (`check_data_apart`).
    """
    if is_remote(config.pipeline.output):
        raise FileNotFoundError(
            f"pipeline.output {config.pipeline.output} is a bucket: `tfxp run` keeps ML Metadata in SQLite under "
            "the output dir, which must be local; use a local --output, or `tfxp compile` for Kubeflow"
        )
    output = Path(config.pipeline.output).expanduser()
    if output.exists() and not output.is_dir():
        raise FileNotFoundError(
            f"pipeline.output {output} is a file, not a directory; pass --output DIR (created if missing)"
        )
    data_path = _absolute(config.data.path)
    if not is_remote(data_path) and not Path(data_path).is_dir():
        raise FileNotFoundError(
            f"data.path {data_path} is not a directory; make the digits data with "
            f"`tfxp data digits --out {config.data.path}` or point `--set data.path=...` at your TFRecords"
        )
    if any(character in data_path for character in "*?["):
        # ImportExampleGen globs `<data.path>/<pattern>`: a folder name with glob characters matches nothing.
        raise FileNotFoundError(
            f"data.path {data_path} contains a glob character (*, ? or [), which ImportExampleGen would read as a "
            "pattern and find no files; rename the folder or link it under a plain name"
        )
    # Every schema mode trains on the label map: check it now, not in the Trainer or the EdgeExporter.
    read_label_map(_absolute(config.data.labels_path))
    schema = config.data.schema_source
    if schema not in ("label_map", "infer"):
        schema = _absolute(schema)
        if not is_remote(schema) and not Path(schema).is_file():
            raise FileNotFoundError(f"data.schema: curated schema file {schema} does not exist")
    data = config.data.model_copy(
        update={
            "path": data_path,
            "labels": _absolute(config.data.labels_path),
            "schema_source": schema,
        }
    )
    pipeline = config.pipeline.model_copy(update={"output": _absolute(config.pipeline.output)})
    serving = config.serving.model_copy(update={"base_path": _absolute(config.serving.base_path)})
    resolved = config.model_copy(update={"data": data, "pipeline": pipeline, "serving": serving})
    check_data_apart(resolved)  # before the data is listed: outputs in the data are read as data next time
    return resolve_data(resolved, FileProbe())


@contextlib.contextmanager
def _logs_to_file(path: Path, echo: bool = False) -> Iterator[None]:
    """Sends TFX's and Beam's log records to `path` instead of the terminal during the run (to both: `echo`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in ("absl", "apache_beam", "tensorflow")]
    saved = [(logger, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = echo
    try:
        yield
    finally:
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
        handler.close()


class ComponentFailedError(TfxpError, RuntimeError):
    """A pipeline component failed; `component` names it, the message says why.

    Attributes:
        user_error: Whether the component refused the user's data or setup (its error is a `TfxpError`: schema
            violations, a drift stop, a served version that cannot be loaded), not failed for another reason.
    """

    def __init__(self, component: str, cause: BaseException, detail: str | None = None) -> None:
        self.component = component
        self.cause = cause
        self.user_error = isinstance(cause, TfxpError)
        message = f"component {component} failed: {type(cause).__name__}: {cause}"
        super().__init__(f"{message}\n{detail}" if detail else message)


@dataclass
class LocalRun:
    """What a local run produced; the summary is built from MLMD afterwards.

    Attributes:
        config: The resolved config the run used.
        layout: Where its outputs are.
        wall_seconds: The run's duration.
        started_at: Its start (seconds since the epoch): the summary ignores earlier runs in MLMD.
        failure: The component failure, when one failed.
        log_path: The run's log file.
    """

    config: TfxpConfig
    layout: OutputLayout
    wall_seconds: float
    started_at: float
    failure: ComponentFailedError | None = None
    log_path: Path | None = None


def run_log_path(layout: OutputLayout) -> Path:
    """A new run's log file, `OUT/<pipeline>/logs/run-<YYYYmmdd-HHMMSS>.log`."""
    return Path(layout.log_dir) / f"run-{time.strftime('%Y%m%d-%H%M%S')}.log"


def run_local(
    config: TfxpConfig,
    progress: ProgressCallback | None = None,
    *,
    on_log: Callable[[Path], object] | None = None,
    notify: Callable[[str], None] | None = None,
    echo_logs: bool = False,
) -> LocalRun:
    """Writes the resolved config beside the outputs and runs the pipeline with LocalDagRunner.

    One run at a time per output: the run holds `OUT/<pipeline>/run.lock`, and first cancels what an earlier,
    killed run left RUNNING (`pipeline.runners.recovery`). TFX's and Beam's logs go to
    `OUT/<pipeline>/logs/run-<time>.log`; progress comes from ML Metadata.

    Args:
        config: The config as `resolve_local_paths` returned it: the pre-flight, which the caller runs first so
            its checks answer before TensorFlow is imported, and so the data probe reads the examples once.
        progress: Optional callback for per-component progress.
        on_log: Called with the run's log file once the lock is held, before TensorFlow is imported (the CLI
            sends its file descriptors 1 and 2 there).
        notify: Called with a line for each thing recovered from a killed run.
        echo_logs: Also let TFX's and Beam's log records through to the terminal (`tfxp -v`).

    Returns:
        A LocalRun; `failure` is set (not raised) when a component failed, so callers can still
        write a summary.

    Raises:
        OutputInUseError: another `tfxp run` is using this output.
        ValueError: `config` was not resolved (a caller's mistake, not the user's).
    """
    if "auto" in (config.data.split, config.data.label_offset):
        raise ValueError("run_local runs a resolved config: call resolve_local_paths(config) first")
    layout = output_layout(config)
    with run_lock(Path(layout.metadata_path).parent):
        log_path = run_log_path(layout)
        if on_log is not None:
            on_log(log_path)
        for stale in cancel_stale_executions(layout.metadata_path, config.pipeline.name, layout.pipeline_root):
            logging.getLogger(__name__).warning("tfxp: %s", stale.describe())
            if notify is not None:
                notify(stale.describe())
        return _run_locked(config, layout, log_path, progress, echo_logs)


def _run_locked(
    config: TfxpConfig, layout: OutputLayout, log_path: Path, progress: ProgressCallback | None, echo_logs: bool
) -> LocalRun:
    from tfx import v1 as tfx

    from pipeline.pipeline import create_pipeline

    write_config(config, Path(layout.config_path))
    started_at = time.time()
    started = time.monotonic()
    since_ms = max(int(started_at * 1000) - 1000, 0)  # MLMD and this clock may round differently
    error: Exception | None = None
    components: list[str] = []
    failure = None
    with _logs_to_file(log_path, echo=echo_logs):
        with watch_run(layout.metadata_path, config.pipeline.name, since_ms, progress) as watch:
            try:
                metadata_config = tfx.orchestration.metadata.sqlite_metadata_connection_config(layout.metadata_path)
                pipeline = create_pipeline(config, metadata_config)
                components = [component.id for component in pipeline.components]  # in the order they run
                tfx.orchestration.LocalDagRunner().run(pipeline)
            except Exception as raised:  # a component's failure: reported in the summary and by the CLI
                error = raised
        if error is not None:  # the watch has read the run's final state: it names the component
            from pipeline.runners.diagnose import explain_failure

            component = failed_component(watch.records, components)
            failure = ComponentFailedError(component, error, explain_failure(component, config, error))
    return LocalRun(config, layout, time.monotonic() - started, started_at, failure, log_path)
