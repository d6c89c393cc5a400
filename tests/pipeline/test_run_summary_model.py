"""The typed run summary (`components.report.summary.RunSummary`): one gatherer for `tfxp run` and the RunReport
component, `run-summary.json` with the keys it always had, and every component's state as the run ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlmd_fixtures import FakeRunStore

from pipeline.config import TfxpConfig, build_config
from pipeline.layout import output_layout
from pipeline.summary import build_summary, write_summary

# The keys of run-summary.json as `pipeline/summary.py` wrote them before the typed summary (ARCHITECTURE.md's
# output contract; `error`/`failed_component` on a failed run, `served_version` on a succeeded one).
ALWAYS = {
    "status",
    "blessed",
    "blessing_reason",
    "pushed_model_dir",
    "edge_model_path",
    "metrics",
    "components",
    "wall_seconds",
    "config",
    "problems",
}
FULL_RUN = ALWAYS | {"data", "baseline", "edge", "decision", "warm_start", "served_version"}
FAILED_RUN = ALWAYS | {"error", "failed_component"}
METRICS = {
    "accuracy",
    "example_count",
    "training",
    "edge_accuracy",
    "edge_saved_model_accuracy",
    "edge_accuracy_drop",
    "edge_size_bytes",
    "edge_latency_p50_ms",
    "edge_latency_p99_ms",
}
BASELINE = {"mode", "version", "path", "accuracy"}
EDGE = {"status", "blessed", "reason", "mode", "io_dtype", "arch_check", "version"}
COMPONENT = {"status", "seconds"}
TRAINING = {"model": "small_resnet", "steps": 80, "warm_start": {"applied": False, "reason": "nothing served"}}
EDGE_METADATA = {
    "skipped": False,
    "blessed": True,
    "pushed_path": "/out/edge/digits/7",
    "mode": "int8",
    "accuracy": {"tflite": 0.97, "saved_model": 0.975, "drop": 0.005},
    "size_bytes": 90_000,
    "latency": {"p50_ms": 0.2, "p99_ms": 0.4},
    "reason": "within edge.max_accuracy_drop",
}


def _full_run(tmp_path: Path) -> TfxpConfig:
    """A run of every component in ML Metadata, with the artifacts the summary reads."""
    config = build_config({}, [f"pipeline.output={tmp_path / 'out'}"])
    layout = output_layout(config)
    Path(layout.metadata_path).parent.mkdir(parents=True)
    root = tmp_path / "root"
    for name in ("examples", "model", "evaluation", "blessing", "pushed", "edge_model"):
        (root / name).mkdir(parents=True)
    (root / "model" / "training_metrics.json").write_text(json.dumps(TRAINING))
    (root / "edge_model" / "edge_metadata.json").write_text(json.dumps(EDGE_METADATA))
    version = Path(layout.serving_base) / "1796094230"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"model")
    store = FakeRunStore(Path(layout.metadata_path))
    run = store.start_run()
    uri = {name: str(root / name) for name in ("examples", "model", "evaluation", "blessing", "pushed", "edge_model")}
    store.add_execution(
        run, "ImportExampleGen", "complete", {"examples": [uri["examples"]]}, {uri["examples"]: {"spans": "1,2"}}
    )
    store.add_execution(run, "Trainer", "complete", {"model": [uri["model"]]})
    store.add_execution(
        run,
        "Evaluator",
        "complete",
        {"evaluation": [uri["evaluation"]], "blessing": [uri["blessing"]]},
        {uri["blessing"]: {"blessed": 1}},
    )
    store.add_execution(
        run,
        "Pusher",
        "complete",
        {"pushed_model": [uri["pushed"]]},
        {uri["pushed"]: {"pushed": 1, "pushed_destination": str(version)}},
    )
    store.add_execution(run, "EdgeExporter", "complete", {"edge_model": [uri["edge_model"]]})
    return config  # fmt: skip


def _written(tmp_path: Path, summary: Any) -> dict[str, Any]:
    path = tmp_path / "run-summary.json"
    write_summary(summary, path)
    return dict(json.loads(path.read_text()))


def test_a_full_run_summary_keeps_the_keys_it_always_had(tmp_path: Path) -> None:
    config = _full_run(tmp_path)
    written = _written(tmp_path, build_summary(config, output_layout(config).metadata_path, wall_seconds=2.0))

    assert set(written) == FULL_RUN
    assert set(written["metrics"]) == METRICS
    assert set(written["baseline"]) == BASELINE
    assert set(written["edge"]) == EDGE
    assert all(set(record) == COMPONENT for record in written["components"].values())
    assert written["data"] == {"spans_seen": [1, 2]}
    assert written["served_version"] == "1796094230" and written["decision"] == "pushed"


def test_a_failed_run_summary_keeps_the_keys_it_always_had(tmp_path: Path) -> None:
    config = TfxpConfig()
    failure = RuntimeError("Trainer: out of memory")
    written = _written(
        tmp_path, build_summary(config, str(tmp_path / "none.db"), 1.0, failure=failure, failed_component="Trainer")
    )

    assert set(written) == FAILED_RUN
    assert written["components"] == {"Trainer": {"status": "failed", "seconds": None}}
    assert written["metrics"] == {} and written["problems"] == []


def test_a_written_summary_reads_back_with_the_same_keys(tmp_path: Path) -> None:
    from components.report.summary import RunSummary

    config = _full_run(tmp_path)
    written = _written(tmp_path, build_summary(config, output_layout(config).metadata_path, wall_seconds=2.0))
    without_served = {key: value for key, value in written.items() if key != "served_version"}

    assert RunSummary.model_validate(written).to_json_dict() == written
    assert RunSummary.model_validate(without_served).to_json_dict() == without_served  # absent stays absent


def test_a_summary_of_the_wrong_shape_is_refused_by_the_report(tmp_path: Path) -> None:
    from pipeline.report.gather import ReportError, read_summary

    (tmp_path / "run-summary.json").write_text(json.dumps({"status": "succeeded", "components": ["Trainer"]}))
    refused = r"run-summary.json is not a record as tfxp writes one \(components: .*\); rerun `tfxp run`"
    with pytest.raises(ReportError, match=refused):
        read_summary(tmp_path)


def test_the_component_and_the_local_run_gather_the_same_summary(tmp_path: Path) -> None:
    """One gatherer: the RunReport component's summary of the same artifacts is the local run's, less what only ML
    Metadata knows (components, wall time, what is served after the run)."""
    from components.report.inputs import ReportInputs, facts_from_inputs

    config = _full_run(tmp_path)
    local = _written(tmp_path, build_summary(config, output_layout(config).metadata_path, wall_seconds=2.0))
    root = tmp_path / "root"
    inputs = ReportInputs(
        config=local["config"],
        spans="1,2",
        model_uri=str(root / "model"),
        evaluation_uri=str(root / "evaluation"),
        blessed=True,
        baseline=None,
        pushed_destination=local["pushed_model_dir"],
        edge_model_uri=str(root / "edge_model"),
    )
    component = facts_from_inputs(inputs).summary

    only_mlmd = {"components", "wall_seconds", "served_version"}
    assert set(component) == set(local) - only_mlmd
    assert component == {key: value for key, value in local.items() if key not in only_mlmd}


def test_a_component_that_raised_is_failed_not_running(tmp_path: Path) -> None:
    """A component that raises stays RUNNING in ML Metadata; the summary and the report say it failed."""
    from components.report.build import report_html
    from pipeline.report.gather import gather_facts

    config = build_config({}, [f"pipeline.output={tmp_path / 'out'}"])
    layout = output_layout(config)
    Path(layout.metadata_path).parent.mkdir(parents=True)
    store = FakeRunStore(Path(layout.metadata_path))
    run = store.start_run()
    store.add_execution(run, "ImportExampleGen", "complete")
    store.add_execution(run, "ServedBaseline", "running")
    failure = RuntimeError("the served version 100 cannot be loaded")
    summary = build_summary(config, layout.metadata_path, 3.0, failure=failure, failed_component="ServedBaseline")
    write_summary(summary, Path(layout.summary_path))

    written = json.loads(Path(layout.summary_path).read_text())
    assert written["components"]["ServedBaseline"]["status"] == "failed"
    assert written["components"]["ImportExampleGen"]["status"] == "complete"
    facts = gather_facts(Path(config.pipeline.output), with_model=False)
    assert {step["component"]: step["status"] for step in facts.timeline} == {
        "ImportExampleGen": "complete",
        "ServedBaseline": "failed",
    }
    assert facts.timeline[0]["start"] is not None  # ML Metadata's timeline, matched with the summary's run
    page = report_html(facts)
    assert "<td>ServedBaseline</td><td>failed</td>" in page
    assert "<td>running</td>" not in page
