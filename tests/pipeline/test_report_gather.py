"""The run report's readers and gathering: artifacts written as TFX writes them, a small ML Metadata store, the
`tfxp report` command, and the SVG plumbing of the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlmd_fixtures import PIPELINE, FakeRunStore
from typer.testing import CliRunner

from components.report import plots, readers
from pipeline.cli import app
from pipeline.config import TfxpConfig
from pipeline.mlmd import open_store
from pipeline.report import history
from pipeline.report.gather import ReportError, gather_facts, same_run


def test_statistics_give_examples_per_split_and_class(tmp_path: Path) -> None:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    for split, counts in (("train", {"cat": 6, "dog": 4}), ("eval", {"cat": 2, "dog": 1})):
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        dataset = statistics.datasets.add(num_examples=sum(counts.values()))
        feature = dataset.features.add()
        feature.path.step.extend(["image/class/text"])
        for name, count in counts.items():
            feature.string_stats.rank_histogram.buckets.add(label=name, sample_count=count)
        (tmp_path / f"Split-{split}").mkdir()
        (tmp_path / f"Split-{split}" / "FeatureStats.pb").write_bytes(statistics.SerializeToString())

    assert readers.counts_from_statistics(str(tmp_path)) == {
        "train": {"examples": 10, "classes": {"cat": 6, "dog": 4}},
        "eval": {"examples": 3, "classes": {"cat": 2, "dog": 1}},
    }


def test_anomalies_are_one_line_each_and_none_is_empty(tmp_path: Path) -> None:
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    for split, found in (("train", True), ("eval", False)):
        anomalies = anomalies_pb2.Anomalies()
        if found:
            anomalies.anomaly_info["image/class/label"].short_description = "Out-of-range values"
        (tmp_path / f"Split-{split}").mkdir()
        (tmp_path / f"Split-{split}" / "SchemaDiff.pb").write_bytes(anomalies.SerializeToString())

    assert readers.anomaly_lines(str(tmp_path)) == ["train: image/class/label: Out-of-range values"]


def test_tensorboard_epoch_scalars_become_curves(tmp_path: Path) -> None:
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(tmp_path / "train"))
    with writer.as_default():
        for epoch, loss in enumerate((1.5, 0.5)):
            tf.summary.scalar("epoch_loss", loss, step=epoch)
            tf.summary.scalar("batch_noise", 9.0, step=epoch)  # not per epoch: left out
    writer.close()

    assert readers.epoch_curves(str(tmp_path)) == {"train": {"loss": [[0, 1.5], [1, 0.5]]}}


def test_manifest_counts_for_data_without_statistics(tmp_path: Path) -> None:
    (tmp_path / readers.MANIFEST_FILE).write_text(json.dumps({"counts": {"train": {"a": 3}, "eval": {"a": 1}}}))
    assert readers.counts_from_manifest(str(tmp_path)) == {
        "train": {"examples": 3, "classes": {"a": 3}},
        "eval": {"examples": 1, "classes": {"a": 1}},
    }
    assert readers.counts_from_manifest(str(tmp_path / "none")) is None


def _two_runs(metadata: Path, root: Path) -> None:
    store = FakeRunStore(metadata)
    for number, (blessed, pushed) in enumerate(((1, 1), (0, 0)), start=1):
        uris = {name: str(root / f"{name}{number}") for name in ("evaluation", "blessing", "pushed")}
        run = store.start_run()
        store.add_execution(run, "Trainer", "complete")
        store.add_execution(
            run,
            "Evaluator",
            "complete",
            outputs={"evaluation": [uris["evaluation"]], "blessing": [uris["blessing"]]},
            properties={uris["blessing"]: {"blessed": blessed}},
        )
        store.add_execution(
            run,
            "Pusher",
            "complete",
            {"pushed_model": [uris["pushed"]]},
            {uris["pushed"]: {"pushed": pushed, "pushed_version": f"v{number}" if pushed else ""}},
        )
    failed = store.start_run()
    store.add_execution(failed, "Trainer", "failed")


def test_history_has_each_runs_blessing_accuracy_and_pushed_version(tmp_path: Path) -> None:
    _two_runs(tmp_path / "metadata.db", tmp_path)
    accuracies = {str(tmp_path / "evaluation1"): 0.9, str(tmp_path / "evaluation2"): 0.4}

    runs = history.run_history(open_store(str(tmp_path / "metadata.db")), PIPELINE, accuracies.get)

    assert [(run["status"], run["blessed"], run["accuracy"], run["pushed_version"]) for run in runs] == [
        ("complete", True, 0.9, "v1"),
        ("complete", False, 0.4, None),
        ("failed", None, None, None),
    ]
    assert history.run_history(open_store(str(tmp_path / "metadata.db")), "other-pipeline", accuracies.get) == []


def _output_dir(tmp_path: Path, **summary: Any) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    config = TfxpConfig().to_dict()
    config["data"]["path"] = str(tmp_path / "no-data")
    document = {"status": "succeeded", "components": {"Trainer": {"status": "complete", "seconds": 2.0}}}
    (out / "run-summary.json").write_text(json.dumps({**document, "config": config, **summary}))
    return out


def test_a_summary_without_metadata_still_gathers_and_says_what_it_could_not_read(tmp_path: Path) -> None:
    facts = gather_facts(_output_dir(tmp_path))

    assert facts.timeline == [{"component": "Trainer", "status": "complete", "start": None, "seconds": 2.0}]
    assert [problem["component"] for problem in facts.problems] == ["pipeline"]
    assert "cannot read the label map" in facts.problems[0]["error"]
    assert facts.history == [] and facts.confusion is None


def test_a_directory_without_a_summary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"has no run-summary.json, so it is not the output of `tfxp run`"):
        gather_facts(tmp_path)


def test_report_command_writes_the_page_and_refuses_a_non_run(tmp_path: Path) -> None:
    out = _output_dir(tmp_path)
    target = tmp_path / "elsewhere" / "page.html"
    runner = CliRunner()

    written = runner.invoke(app, ["report", str(out), "--out", str(target)])
    refused = runner.invoke(app, ["report", str(tmp_path / "elsewhere")])

    assert written.exit_code == 0, written.output
    assert f"report: {target}" in written.output
    assert '<section id="history"' in target.read_text()
    assert refused.exit_code == 2
    assert "has no run-summary.json" in refused.output


def test_svg_ids_are_prefixed_and_labelled() -> None:
    raw = (
        '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg width="10pt" viewBox="0 0 10 10"><metadata>x</metadata>'
        '<defs><clipPath id="p1"><rect/></clipPath></defs>'
        '<g id="a" clip-path="url(#p1)"><use xlink:href="#a"/></g></svg>'
    )
    svg = plots.accessible_svg(raw, "loss", "Loss <1>", "falls & rises")

    assert svg.startswith('<svg role="img" aria-labelledby="loss-title loss-desc" class="plot" data-plot="loss"')
    assert '<title id="loss-title">Loss &lt;1&gt;</title><desc id="loss-desc">falls &amp; rises</desc>' in svg
    assert 'id="loss-p1"' in svg and "url(#loss-p1)" in svg and 'xlink:href="#loss-a"' in svg
    assert "<metadata>" not in svg


def test_a_plot_is_inline_svg_with_text_kept_as_text() -> None:
    svg = plots.grouped_bars("classes", "Examples", "bars", ["a", "b"], {"train": [3, 4], "eval": [1, 1]}, "examples")
    assert svg.startswith("<svg ") and svg.endswith("</svg>\n")
    assert ">examples</text>" in svg  # the axis label, as text (svg.fonttype: none)


def test_the_newest_metadata_run_is_used_only_when_it_is_the_summarys_run() -> None:
    timeline = [{"component": "ImportExampleGen", "status": "cached"}, {"component": "Trainer", "status": "complete"}]
    summary = {
        "ImportExampleGen": {"status": "cached", "seconds": 0.1},
        "Trainer": {"status": "complete", "seconds": 3},
    }

    assert same_run(summary, timeline)
    # Failed before registering: only the failed component, without seconds; the store's newest run is older.
    assert not same_run({"pipeline setup": {"status": "failed", "seconds": None}}, timeline)
    assert not same_run({**summary, "Trainer": {"status": "failed", "seconds": 1.0}}, timeline)
