"""The run summary from a small MLMD store: what it cannot read is reported (file, error), never hidden."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlmd_fixtures import PIPELINE, FakeRunStore
from typer.testing import CliRunner

from foundation.model_identity import model_identity
from pipeline.cli import app
from pipeline.config import TfxpConfig, build_config
from pipeline.layout import output_layout
from pipeline.summary import build_summary


def _run_with_outputs(metadata_path: Path, root: Path) -> dict[str, Path]:
    """A finished run whose Trainer, Evaluator and Pusher outputs are directories under `root`."""
    dirs = {name: root / name for name in ("model", "evaluation", "blessing", "pushed")}
    for directory in dirs.values():
        directory.mkdir(parents=True)
    store = FakeRunStore(metadata_path)
    run = store.start_run()
    store.add_execution(run, "ImportExampleGen", "cached")
    store.add_execution(run, "Trainer", "complete", outputs={"model": [str(dirs["model"])]})
    store.add_execution(
        run,
        "Evaluator",
        "complete",
        outputs={"evaluation": [str(dirs["evaluation"])], "blessing": [str(dirs["blessing"])]},
        properties={str(dirs["blessing"]): {"blessed": 0}},
    )
    store.add_execution(
        run, "Pusher", "complete", {"pushed_model": [str(dirs["pushed"])]}, {str(dirs["pushed"]): {"pushed": 0}}
    )
    return dirs


def _summary(tmp_path: Path) -> dict[str, Any]:
    config = TfxpConfig().model_copy(deep=True)
    return build_summary(config, str(tmp_path / "metadata.db"), wall_seconds=3.0).to_json_dict()


def test_readable_outputs_make_a_summary_without_problems(tmp_path: Path) -> None:
    dirs = _run_with_outputs(tmp_path / "metadata.db", tmp_path / "root")
    (dirs["model"] / "training_metrics.json").write_text(json.dumps({"final_accuracy": 0.5, "steps": 7}))
    summary = _summary(tmp_path)
    assert summary["problems"] == []
    assert summary["metrics"]["training"] == {"final_accuracy": 0.5, "steps": 7}
    assert summary["components"]["ImportExampleGen"]["status"] == "cached"
    # No validation file (an Evaluator without thresholds) is not a problem; no metrics means no accuracy.
    assert summary["blessing_reason"] == "not pushed: the Evaluator produced no accuracy"
    assert summary["decision"] == "not pushed"


def test_corrupt_training_metrics_and_unreadable_tfma_output_are_reported(tmp_path: Path) -> None:
    dirs = _run_with_outputs(tmp_path / "metadata.db", tmp_path / "root")
    (dirs["model"] / "training_metrics.json").write_text('{"final_accuracy": 0.9,')  # cut short
    (dirs["evaluation"] / "metrics.tfrecord").write_bytes(b"\x00not a tfrecord" * 10)
    (dirs["evaluation"] / "validations.tfrecord").write_bytes(b"\x00not a tfrecord either" * 10)

    summary = _summary(tmp_path)

    problems = {(problem["component"], problem["error"].split(":")[0]): problem for problem in summary["problems"]}
    assert set(problems) == {
        ("Trainer", "cannot read the training metrics"),
        ("Evaluator", "cannot read the TFMA metrics"),
        ("Evaluator", "cannot read the TFMA validation result"),
    }
    trainer = problems["Trainer", "cannot read the training metrics"]
    assert trainer["path"] == str(dirs["model"] / "training_metrics.json")
    assert "JSONDecodeError" in trainer["error"]
    assert problems["Evaluator", "cannot read the TFMA metrics"]["path"] == str(dirs["evaluation"])
    # The blessing line says the Evaluator's output was unreadable, not that it produced nothing.
    unread = f"not pushed: the Evaluator's output in {dirs['evaluation']} could not be read"
    assert summary["blessing_reason"] == unread
    assert summary["metrics"]["training"] == {}
    assert summary["status"] == "succeeded" and summary["components"]["Pusher"]["status"] == "complete"


def test_training_metrics_that_are_not_an_object_are_reported(tmp_path: Path) -> None:
    dirs = _run_with_outputs(tmp_path / "metadata.db", tmp_path / "root")
    (dirs["model"] / "training_metrics.json").write_text("[1, 2]")
    (problem,) = _summary(tmp_path)["problems"]
    assert problem["error"] == "cannot read the training metrics: ValueError: expected a JSON object, got list"


def test_an_unreadable_metadata_store_is_reported(tmp_path: Path) -> None:
    (tmp_path / "metadata.db").write_bytes(b"this is not SQLite" * 100)
    summary = _summary(tmp_path)
    (problem,) = summary["problems"]
    assert (problem["component"], problem["path"]) == ("pipeline", str(tmp_path / "metadata.db"))
    assert problem["error"].startswith("cannot read the ML Metadata store: ")
    assert summary["components"] == {}


def test_tfxp_run_prints_the_summary_problems_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's summary shows what could not be read, with the file, on stderr (no TFX run: a fake runner)."""
    import pipeline.runners.local as local

    data = tmp_path / "data"
    for split in ("train", "eval"):
        (data / split).mkdir(parents=True)
    (data / "labels.txt").write_text("0\n1\n")

    def fake_run_local(config: TfxpConfig, progress: Any = None, **_: Any) -> local.LocalRun:
        config = local.resolve_local_paths(config)
        layout = output_layout(config)
        Path(layout.metadata_path).parent.mkdir(parents=True)
        dirs = _run_with_outputs(Path(layout.metadata_path), tmp_path / "root")
        (dirs["model"] / "training_metrics.json").write_text("{oops")
        return local.LocalRun(config, layout, wall_seconds=1.0, started_at=0.0)

    monkeypatch.setattr(local, "run_local", fake_run_local)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--set", f"data.path={data}", "--output", str(out)])

    assert result.exit_code == 0, result.output
    stderr = " ".join(result.stderr.split())
    assert "warning: Trainer: cannot read the training metrics: JSONDecodeError" in stderr
    assert str(tmp_path / "root" / "model" / "training_metrics.json") in stderr
    assert "warning" not in result.stdout
    written = json.loads((out / "run-summary.json").read_text())
    assert [problem["component"] for problem in written["problems"]] == ["Trainer"]
    assert written["config"]["pipeline"]["name"] == PIPELINE


@pytest.mark.parametrize(("raised", "code"), [("DataValidationError", 2), ("DriftError", 2), ("RuntimeError", 1)])
def test_a_component_that_refuses_the_data_is_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: str, code: int
) -> None:
    """Exit 2 when the failed component raised a user error (a TfxpError), as every user error; 1 otherwise."""
    import components.validation.strict_example_validator as validator
    import pipeline.runners.local as local

    data = tmp_path / "data"
    for split in ("train", "eval"):
        (data / split).mkdir(parents=True)
    (data / "labels.txt").write_text("0\n1\n")
    error = getattr(validator, raised, RuntimeError)("split 'eval' has 0 records")

    def fake_run_local(config: TfxpConfig, progress: Any = None, **_: Any) -> local.LocalRun:
        config = local.resolve_local_paths(config)
        failure = local.ComponentFailedError("ExampleValidator", error)
        return local.LocalRun(config, output_layout(config), wall_seconds=1.0, started_at=0.0, failure=failure)

    monkeypatch.setattr(local, "run_local", fake_run_local)
    result = CliRunner().invoke(app, ["run", "--set", f"data.path={data}", "--output", str(tmp_path / "out")])

    assert result.exit_code == code, result.output
    assert f"error: component ExampleValidator failed: {raised}: split 'eval' has 0 records" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("removed", [False, True])
def test_a_pushed_version_removed_since_is_a_problem_not_the_pushed_model_dir(tmp_path: Path, removed: bool) -> None:
    config = build_config({}, [f"pipeline.output={tmp_path / 'out'}"])
    version = Path(output_layout(config).serving_base) / "1796094230"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"model")
    store = FakeRunStore(tmp_path / "metadata.db")
    run = store.start_run()
    pushed = str(tmp_path / "pushed")
    properties = {pushed: {"pushed": 1, "pushed_destination": str(version)}}
    store.add_execution(run, "Pusher", "cached", {"pushed_model": [pushed]}, properties)
    if removed:
        (version / "saved_model.pb").unlink()
        version.rmdir()
    summary = build_summary(config, str(tmp_path / "metadata.db"), wall_seconds=1.0).to_json_dict()
    if not removed:
        assert summary["pushed_model_dir"] == str(version) and summary["problems"] == []
        assert summary["served_version"] == "1796094230"
        return
    assert summary["pushed_model_dir"] is None and summary["served_version"] is None
    (problem,) = summary["problems"]
    assert problem["component"] == "Pusher" and problem["path"] == str(version)
    assert "no longer exists" in problem["error"]


def _pushed_version(tmp_path: Path) -> tuple[TfxpConfig, Path, str]:
    """(config, a version under its serving base with the Pusher's record, the model identity of its files)."""
    config = build_config({}, [f"pipeline.output={tmp_path / 'out'}"])
    version = Path(output_layout(config).serving_base) / "1796094230"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"model")
    ours = model_identity(version)
    (version / "tfxp_push.json").write_text(json.dumps({"identity": ours, "version": 1796094230}))
    return config, version, ours


@pytest.mark.parametrize("holds", [False, True])
def test_the_pushed_model_dir_is_read_back_from_the_versions_push_record(tmp_path: Path, holds: bool) -> None:
    """What the run says it published is what is on disk: a version that holds another model (a Pusher that found
    its path in an earlier record, a serving base restored from elsewhere) is a problem, never the served model."""
    config, version, ours = _pushed_version(tmp_path)
    if not holds:  # the record still names our model, but the files were replaced since
        (version / "saved_model.pb").write_bytes(b"an earlier model")
    store = FakeRunStore(tmp_path / "metadata.db")
    run = store.start_run()
    pushed = str(tmp_path / "pushed")
    properties = {pushed: {"pushed": 1, "pushed_destination": str(version), "model_identity": ours}}
    store.add_execution(run, "Pusher", "complete", {"pushed_model": [pushed]}, properties)
    summary = build_summary(config, str(tmp_path / "metadata.db"), wall_seconds=1.0).to_json_dict()
    if holds:
        assert summary["pushed_model_dir"] == str(version) and summary["problems"] == []
        return
    assert summary["pushed_model_dir"] is None
    (problem,) = summary["problems"]
    assert problem["component"] == "Pusher" and problem["path"] == str(version)
    assert f"holding {ours}, but its files hold another model (changed since the push?)" in problem["error"]


def test_a_version_the_pusher_found_is_no_new_data_and_a_repush_says_why(tmp_path: Path) -> None:
    """adv3 B16: on a copied output folder the Pusher found the version (published_now 0) and the run said "pushed",
    naming it, although nothing was written; a model pushed again over an edited version says why."""
    config, version, ours = _pushed_version(tmp_path)
    for note in ("", "version 1796094100 no longer holds the model its push record names (...)"):
        store = FakeRunStore(tmp_path / f"metadata{len(note)}.db")
        run = store.start_run()
        store.add_execution(run, "Trainer", "cached", outputs={"model": [str(tmp_path / "model")]})
        blessing = str(tmp_path / "blessing")
        store.add_execution(run, "Evaluator", "cached", {"blessing": [blessing]}, {blessing: {"blessed": 1}})
        pushed = str(tmp_path / "pushed")
        found = {"pushed": 1, "pushed_destination": str(version), "model_identity": ours, "published_now": 0}
        properties = {pushed: {**found, "published_now": 1, "push_note": note} if note else found}
        store.add_execution(run, "Pusher", "complete", {"pushed_model": [pushed]}, properties)
        summary = build_summary(config, str(tmp_path / f"metadata{len(note)}.db"), wall_seconds=1.0).to_json_dict()
        if not note:
            assert summary["decision"] == "no new data", summary
            assert summary["blessing_reason"].startswith("no new data, nothing pushed: version 1796094230 already")
            continue
        assert summary["decision"] == "pushed"
        assert [problem["error"] for problem in summary["problems"]] == [note]
