"""Drift checks between spans through `tfxp run` (LocalDagRunner): a span that does not look like the ones before it
stops the run at the ExampleValidator, before the Trainer, and the served model stays as it was.

One module-scoped sequence of runs on the digits spans: spans 1-3 clean (trained, pushed) → span 4 with labels
remapped many-to-one (stopped: label L-infinity) → span 4 with every label shifted class to class, a balanced
remap no distribution shows (stopped: the served model's agreement with the labels) → span 4 brightened (stopped:
image brightness) → the class-shifted span 4 again with `data.drift.action=warn` (trained; the warning recorded).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from components.data.span_damage import rewrite_span
from pipeline.cli import app

pytestmark = pytest.mark.e2e

# label_offset set: the remapped labels no longer match their `image/class/text`, which `auto` reads.
SETTINGS = (
    "data.spans=all",
    "data.label_offset=0",
    "trainer.train_steps=100",
    "evaluator.min_accuracy=0.5",
    "edge.enabled=false",
)


def _write_span(data: Path, span: int) -> None:
    result = CliRunner().invoke(app, ["data", "digits", "--out", str(data), "--spans", "4", "--span", str(span)])
    assert result.exit_code == 0, result.output


def _run(data: Path, out: Path, *extra: str) -> dict[str, Any]:
    args = ["run", "--config", "configs/default.yaml", "--output", str(out), "--set", f"data.path={data}"]
    for override in (*SETTINGS, *extra):
        args += ["--set", override]
    (out / "run-summary.json").unlink(missing_ok=True)  # a run that stops before writing one must not pass
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    assert (out / "run-summary.json").exists(), result.output
    summary: dict[str, Any] = json.loads((out / "run-summary.json").read_text())
    summary["exit_code"] = result.exit_code
    summary["output"] = " ".join(result.output.split())
    summary["test_seconds"] = time.monotonic() - started
    return summary


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("drift")
    data, out = root / "stream", root / "out"
    serving = out / "serving" / "digits"
    for span in (1, 2, 3):
        _write_span(data, span)
    results: dict[str, Any] = {"clean": _run(data, out)}
    results["served_before"] = _tree(serving)
    _write_span(data, 4)
    clean_four = root / "span-4-clean"
    shutil.copytree(data / "span-4", clean_four)
    results["data_files"] = sorted(str(path.relative_to(data)) for path in data.rglob("*") if path.is_file())
    damages: dict[str, dict[str, Any]] = {
        "many_to_one": {"relabel": {1: 7, 2: 7, 3: 7}},
        "class_shift": {"relabel": {label: (label + 1) % 10 for label in range(10)}},
        "brightened": {"brighten": 0.2},
    }
    for name, damage in damages.items():
        rewrite_span(clean_four, data / "span-4", **damage)
        results[name] = _run(data, out)
        results[f"{name}_served"] = _tree(serving)
    rewrite_span(clean_four, data / "span-4", **damages["class_shift"])
    results["warn"] = _run(data, out, "data.drift.action=warn")
    results["warn_served"] = _tree(serving)
    results["statistics"] = sorted(str(path.relative_to(out)) for path in (out / "statistics").rglob("*.parquet"))
    results["data_files_after"] = sorted(str(path.relative_to(data)) for path in data.rglob("*") if path.is_file())
    # What the closing note of issue 27 quotes (visible with `pytest -s`).
    print(
        "drift e2e seconds per run:",
        {name: round(results[name]["test_seconds"]) for name in ("clean", *damages, "warn")},
    )
    for name in ("clean", *damages, "warn"):
        print(name, results[name].get("data", {}).get("drift"))
    return results


def test_clean_spans_pass_the_drift_checks_and_train(runs: dict[str, Any]) -> None:
    clean = runs["clean"]
    assert clean["exit_code"] == 0, clean["output"]
    assert clean["decision"] == "pushed", clean.get("blessing_reason")
    # The push record keeps the spans the served model was trained on; the drift checks read them.
    [record] = [
        json.loads(content) for name, content in runs["served_before"].items() if name.endswith("tfxp_push.json")
    ]
    assert record["spans"] == [1, 2, 3]
    assert "stopped" not in clean.get("data", {}).get("drift", {})


def _assert_stopped_at_the_validator(
    summary: dict[str, Any], served: dict[str, bytes], before: dict[str, bytes]
) -> str:
    assert summary["exit_code"] == 2, summary["output"]  # a drift stop is a user error (DriftError)
    assert summary["failed_component"] == "ExampleValidator"
    assert "Trainer" not in summary["components"]
    assert summary["decision"] == "stopped by the drift check"
    assert served == before  # the served model untouched
    error: str = summary["data"]["drift"]["stopped"]
    # The stop's distances and label counts reach the summary (the failed validator publishes no drift.json).
    assert any(finding["exceeded"] for finding in summary["data"]["drift"]["findings"])
    assert set(summary["data"]["drift"]["label_counts"]) == {"1", "2", "3", "4"}
    assert "DriftError: span 4 does not look like the spans before it, so training was not started" in error
    assert "data.drift.accept=4" in error
    return error


def test_a_many_to_one_label_remap_stops_at_the_validator_on_the_label_distance(runs: dict[str, Any]) -> None:
    error = _assert_stopped_at_the_validator(runs["many_to_one"], runs["many_to_one_served"], runs["served_before"])
    # Against the spans the served model was trained on (its push record), not every earlier folder.
    assert "feature 'label' (drift against spans 1,2,3, the served model's): L-infinity distance 0.30" in error
    assert "above the threshold 0.1 (data.drift.label_linf)" in error


def test_a_balanced_class_to_class_remap_stops_on_the_served_models_agreement(runs: dict[str, Any]) -> None:
    error = _assert_stopped_at_the_validator(runs["class_shift"], runs["class_shift_served"], runs["served_before"])
    assert "feature 'train labels' (agreement" in error and "(data.drift.agreement_drop)" in error
    assert "data.drift.label_linf" not in error  # the label distribution did not move


def test_brightened_images_stop_on_the_image_properties(runs: dict[str, Any]) -> None:
    error = _assert_stopped_at_the_validator(runs["brightened"], runs["brightened_served"], runs["served_before"])
    assert "feature 'brightness' (drift against spans 1,2,3, the served model's): Jensen-Shannon divergence" in error
    assert "(data.drift.image_js)" in error


def test_action_warn_trains_and_records_the_warning_and_the_served_model_stays(runs: dict[str, Any]) -> None:
    warn = runs["warn"]
    assert warn["exit_code"] == 0, warn["output"]
    assert warn["components"]["Trainer"]["status"] == "complete"
    assert any("data.drift.agreement_drop" in line for line in warn["data"]["drift"]["warnings"])
    # Whether the Evaluator blesses the model trained on three clean spans and the shifted one is a close call at
    # 100 steps (its eval split holds the shifted span's eval, which that model partly learned): "not pushed" in
    # every run until a fresh-clone run blessed it. What `warn` promises is that the gate, not the drift check,
    # decides, and that the served model is what the decision says.
    assert warn["decision"] in ("pushed", "not pushed"), warn["output"]
    assert (runs["warn_served"] == runs["served_before"]) == (warn["decision"] == "not pushed")


def test_statistics_are_cached_under_the_output_never_in_the_data(runs: dict[str, Any]) -> None:
    assert runs["data_files_after"] == runs["data_files"]  # span 4 rewritten in place, under the same names
    cached_spans = {path.split("/")[1] for path in runs["statistics"]}
    assert cached_spans == {"span-1", "span-2", "span-3", "span-4"}
    # one entry per span-1..3 (their files never changed); span 4 once per version of its files
    assert sum(path.startswith("statistics/span-1/") for path in runs["statistics"]) == 2  # train and eval
