"""Gathers a run's facts from its output directory: the run summary, ML Metadata and the artifacts it names.

The run summary (`OUT/run-summary.json`, read as `components.report.summary.RunSummary`) is the starting point: it
holds the config, the decision and the metrics. ML Metadata (`OUT/<pipeline>/metadata.db`) gives the components'
start times, the artifact directories of the latest run and the earlier runs; the artifacts are read by the
RunReport component's gatherer (`components.report.inputs.artifact_facts`), and only what needs the run's own
model (the misclassified eval images) or ML Metadata (the timeline, the history) is read here. Each artifact that
cannot be read becomes a problem on the page (component, path, error) and the rest of the report is still written.

Example:
    facts = gather_facts(Path("tfxp_output"))
    facts.summary["blessed"], facts.confusion["labels"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.report import evaluation, readers
from components.report.evaluation import evaluation_metrics
from components.report.facts import RunFacts, reported
from components.report.inputs import artifact_facts
from components.report.summary import RunSummary
from foundation.contract import ACCURACY_METRIC, read_label_map
from foundation.errors import TfxpError
from foundation.records import RecordError, read_record
from pipeline.config import TfxpConfig
from pipeline.layout import output_layout
from pipeline.report import history

SUMMARY_FILE = "run-summary.json"


class ReportError(TfxpError, ValueError):
    """The directory is not the output of `tfxp run` (no readable run summary); the message says how to fix it."""


def read_summary(out_dir: Path) -> dict[str, Any]:
    """The run summary of `out_dir`.

    Raises:
        ReportError: there is none, or it is not a JSON object.
    """
    path = out_dir / SUMMARY_FILE
    try:
        summary = read_record(path, RunSummary, "run summary", "rerun `tfxp run` to write it again")
    except FileNotFoundError:
        raise ReportError(
            f"{out_dir} has no {SUMMARY_FILE}, so it is not the output of `tfxp run`; pass the directory given to "
            "`tfxp run --output` (default ./tfxp_output)"
        ) from None
    except RecordError as error:
        raise ReportError(str(error)) from None
    return summary.to_json_dict()


def _config(facts: RunFacts, out_dir: Path) -> TfxpConfig | None:
    """The run's config, with its output directory where the report finds it now."""
    with reported(facts, "pipeline", str(out_dir / SUMMARY_FILE), "config in the run summary"):
        config = TfxpConfig.model_validate(facts.summary.get("config") or {})
        pipeline = config.pipeline.model_copy(update={"output": str(out_dir)})
        return config.model_copy(update={"pipeline": pipeline})
    return None


def _accuracy(evaluation_uri: str) -> float | None:
    try:
        return evaluation_metrics(evaluation_uri).get("candidate", {}).get(ACCURACY_METRIC)
    except Exception:  # an earlier run's unreadable TFMA output: that run shows no accuracy
        return None


def _first_uri(components: dict[str, Any], component: str, key: str) -> str | None:
    record = components.get(component)
    artifacts = record.outputs.get(key) if record is not None else None
    return artifacts[0].uri if artifacts else None


def gather_facts(out_dir: Path, with_model: bool = True) -> RunFacts:
    """Everything the report shows about the run in `out_dir`.

    Args:
        out_dir: The run's output directory (`tfxp run --output`).
        with_model: Run the Trainer's SavedModel on the eval split to find misclassified images (seconds).

    Raises:
        ReportError: `out_dir` has no readable run summary.
    """
    facts = RunFacts(out_dir=str(out_dir), summary=read_summary(out_dir))
    config = _config(facts, out_dir)
    components: dict[str, Any] = {}
    if config is not None:
        components = _read_metadata(facts, config)
    if not facts.timeline:  # no ML Metadata: the summary's components, without start times
        facts.timeline = [
            {"component": name, "status": record.get("status"), "start": None, "seconds": record.get("seconds")}
            for name, record in facts.summary.get("components", {}).items()
        ]
    if config is None:
        return facts
    from pipeline.summary import report_inputs

    labels: list[str] = []
    with reported(facts, "pipeline", config.data.labels_path, "label map"):
        labels = read_label_map(config.data.labels_path)
    artifact_facts(facts, report_inputs(config, components), labels)
    _manifest_counts(facts, config)
    _misclassified(facts, components, config, labels, with_model)
    return facts


def _read_metadata(facts: RunFacts, config: TfxpConfig) -> dict[str, Any]:
    """The latest run's components (with their artifacts), its timeline and the run history, from ML Metadata."""
    from pipeline.mlmd import open_store
    from pipeline.summary import ended_state, latest_run_components

    metadata_path = output_layout(config).metadata_path
    if not Path(metadata_path).is_file():
        return {}
    components: dict[str, Any] = {}
    name = config.pipeline.name
    with reported(facts, "pipeline", metadata_path, "ML Metadata store"):
        store = open_store(metadata_path)
        facts.history = history.run_history(store, name, _accuracy)
        failed = facts.summary.get("status") == "failed"
        timeline = [
            {**step, "status": ended_state(step["status"], failed)} for step in history.latest_timeline(store, name)
        ]
        if same_run(facts.summary.get("components") or {}, timeline):
            components = latest_run_components(store, name)
            facts.timeline = timeline
    return components


def same_run(summary_components: dict[str, Any], timeline: list[dict[str, Any]]) -> bool:
    """Whether the newest run in ML Metadata is the summary's run: every component the summary has a duration for
    is there in the same state. A run that failed before registering in ML Metadata has none (its summary names
    only the failed component, without seconds); the newest run in the store is then an earlier one."""
    states = {step["component"]: step["status"] for step in timeline}
    recorded = {name: record for name, record in summary_components.items() if record.get("seconds") is not None}
    return bool(recorded) and all(states.get(name) == record.get("status") for name, record in recorded.items())


def _manifest_counts(facts: RunFacts, config: TfxpConfig) -> None:
    """Examples per split from the data set's manifest, for a run whose StatisticsGen output is not there."""
    if facts.splits or config.data.spans != "none":
        return
    with reported(facts, "data", config.data.path, "data set manifest"):
        manifest = readers.counts_from_manifest(config.data.path)
        if manifest:
            facts.splits = manifest
            facts.splits_source = f"{config.data.path}/{readers.MANIFEST_FILE}"


def _misclassified(
    facts: RunFacts, components: dict[str, Any], config: TfxpConfig, labels: list[str], with_model: bool
) -> None:
    """The most confidently misclassified eval images, from the Trainer's SavedModel (local runs only)."""
    model = _first_uri(components, "Trainer", "model")
    examples = _first_uri(components, "ImportExampleGen", "examples")
    if not (with_model and model and examples):
        return
    with reported(facts, "Trainer", model, "SavedModel's predictions on the eval split"):
        files = evaluation.eval_files(examples)
        if files:
            facts.misclassified, facts.misclassified_scanned = evaluation.misclassified(
                evaluation.saved_model_dir(model), files, labels, config.data.first_label
            )
