"""The RunReport component's executor on fixture artifacts: the page in its artifact and next to the pushed model,
what the page says when inputs are missing (edge disabled, not blessed, no baseline) or unreadable, and that
nothing it meets fails the run.

TFMA's output is stood in for by patching its three readers (`components.report.evaluation`); the run-spec e2e
(tests/pipeline/kubeflow/test_kubeflow_run_spec.py) reads a real one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tfx.types import standard_artifacts

from components.edge_exporter.artifacts import EdgeModel
from components.report import evaluation
from components.report import executor as report_executor
from components.report.artifacts import HtmlReport
from components.report.executor import Executor, published_report_path
from foundation.publish import list_versions
from serving.manager import ModelManager
from serving.model_config import ModelConfig

VERSION = "1796091911"
CONFIG = {
    "pipeline": {"name": "tfxp-digits", "output": "/out"},
    "data": {"path": "/data/digits"},
    "evaluator": {"min_accuracy": 0.9, "max_accuracy_drop": 0.01, "baseline": "served"},
    "edge": {"enabled": True},
}
TRAINING = {"model": "small_resnet", "steps": 80, "images_per_second": 2769.7, "final_accuracy": 0.98}


def _artifact(kind: Any, uri: Path, **properties: Any) -> Any:
    artifact = kind()
    artifact.uri = str(uri)
    uri.mkdir(parents=True, exist_ok=True)
    for name, value in properties.items():
        if isinstance(value, int):
            artifact.set_int_custom_property(name, value)
        else:
            artifact.set_string_custom_property(name, value)
    return artifact


@pytest.fixture
def tfma(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """TFMA's readers, answering what the test puts in the returned dict."""
    answers: dict[str, Any] = {
        "metrics": {"candidate": {"sparse_categorical_accuracy": 0.975, "example_count": 359.0}},
        "failures": [],
        "confusion": {"labels": ["0", "1"], "matrix": [[30, 1], [2, 40]]},
    }
    monkeypatch.setattr(evaluation, "evaluation_metrics", lambda uri: answers["metrics"])
    monkeypatch.setattr(evaluation, "validation_failures", lambda uri: answers["failures"])
    monkeypatch.setattr(evaluation, "confusion_matrix", lambda uri, labels: answers["confusion"])
    return answers


def _run(tmp_path: Path, config: dict[str, Any], **inputs: Any) -> tuple[Any, str]:
    report = _artifact(HtmlReport, tmp_path / "RunReport" / "report")
    Executor().Do(
        {key: [artifact] for key, artifact in inputs.items()},
        {"report": [report]},
        {"config": json.dumps(config), "labels_path": "", "out_dir": "/out"},
    )
    return report, (Path(report.uri) / "report.html").read_text()


def _model(tmp_path: Path, training: str | None = None) -> Any:
    model = _artifact(standard_artifacts.Model, tmp_path / "Trainer" / "model")
    (Path(model.uri) / "training_metrics.json").write_text(training or json.dumps(TRAINING))
    return model


def _evaluated(tmp_path: Path, blessed: int) -> dict[str, Any]:
    """The inputs of a run that trained and evaluated: the model, its blessing (1 or 0) and the evaluation."""
    return {
        "model": _model(tmp_path),
        "model_blessing": _artifact(standard_artifacts.ModelBlessing, tmp_path / "blessing", blessed=blessed),
        "evaluation": _artifact(standard_artifacts.ModelEvaluation, tmp_path / "evaluation"),
    }


def _pushed(tmp_path: Path, pushed: bool) -> Any:
    serving = tmp_path / "serving" / "digits"
    if pushed:
        (serving / VERSION).mkdir(parents=True)
        (serving / VERSION / "saved_model.pb").write_bytes(b"")
    return _artifact(
        standard_artifacts.PushedModel,
        tmp_path / "Pusher" / "pushed_model",
        pushed=int(pushed),
        pushed_destination=str(serving / VERSION) if pushed else "",
        pushed_version=VERSION if pushed else "",
    )


def test_a_pushed_run_has_its_report_in_the_artifact_and_next_to_the_served_versions(
    tmp_path: Path, tfma: dict[str, Any]
) -> None:
    edge_model = _artifact(EdgeModel, tmp_path / "EdgeExporter" / "edge_model")
    (Path(edge_model.uri) / "edge_metadata.json").write_text(
        json.dumps({"skipped": False, "blessed": True, "pushed_path": "/out/edge/digits/7", "mode": "int8",
                    "accuracy": {"tflite": 0.97, "saved_model": 0.975, "drop": 0.005}, "size_bytes": 90_000,
                    "latency": {"p50_ms": 0.2, "p99_ms": 0.4}, "reason": "within edge.max_accuracy_drop"})
    )  # fmt: skip
    report, page = _run(
        tmp_path,
        CONFIG,
        **_evaluated(tmp_path, blessed=1),
        baseline_model=_artifact(standard_artifacts.Model, tmp_path / "baseline", served_version="", served_path=""),
        pushed_model=_pushed(tmp_path, pushed=True),
        edge_model=edge_model,
        examples=_artifact(standard_artifacts.Examples, tmp_path / "examples", spans="3,4"),
    )

    serving = tmp_path / "serving" / "digits"
    published = serving / "reports" / f"{VERSION}.html"
    assert published.read_text() == page
    assert report.get_string_custom_property("published_path") == str(published)
    assert report.get_int_custom_property("problems") == 0
    assert f"Pushed version {VERSION}" in page
    assert "pushed: eval accuracy 0.975" in page  # the blessing reason, from TFMA's accuracy and min_accuracy
    assert "TFLite (int8)" in page and "Confusion matrix" in page and "3, 4" in page
    assert page.count("Not in this report: the pipeline&#x27;s RunReport component has no ML Metadata") == 2
    assert "does not run the model on the eval split" in page
    # reports/ is not a version: not for the baseline, the Pusher's scan, or the local server.
    assert list_versions(serving) == [str(serving / VERSION)]
    assert ModelManager(ModelConfig("digits", serving), loader=None).versions_on_disk() == [int(VERSION)]  # type: ignore[arg-type]


def test_edge_disabled_not_blessed_and_no_baseline_say_so_and_publish_nothing(
    tmp_path: Path, tfma: dict[str, Any]
) -> None:
    tfma["metrics"] = {"candidate": {"sparse_categorical_accuracy": 0.42, "example_count": 359.0}}
    config = {**CONFIG, "edge": {"enabled": False}, "evaluator": {**CONFIG["evaluator"], "baseline": "none"}}
    report, page = _run(
        tmp_path,
        config,
        **_evaluated(tmp_path, blessed=0),
        pushed_model=_pushed(tmp_path, pushed=False),
    )

    assert not (tmp_path / "serving").exists()
    assert report.get_string_custom_property("published_path") == ""
    assert "Not pushed: the served version (if any) is unchanged" in page
    assert "not pushed: eval accuracy 0.42 &lt; evaluator.min_accuracy 0.9" in page
    assert "none (evaluator.baseline: none)" in page
    assert "No edge model: edge.enabled is false" in page


def test_missing_and_unreadable_inputs_are_lines_on_the_page(tmp_path: Path, tfma: dict[str, Any]) -> None:
    statistics = _artifact(standard_artifacts.ExampleStatistics, tmp_path / "statistics")
    (Path(statistics.uri) / "Split-train").mkdir()  # no FeatureStats.pb in it

    report, page = _run(tmp_path, CONFIG, model=_model(tmp_path, training="{not json"), statistics=statistics)

    assert report.get_int_custom_property("problems") == 2
    assert "2 output(s) could not be read" in page
    assert "cannot read the training metrics: JSONDecodeError" in page
    assert "cannot read the statistics: FileNotFoundError" in page
    assert "No evaluation: Evaluator did not run" in page  # no Evaluator input at all
    assert "No validation result: ExampleValidator did not run" in page


def test_an_error_building_the_page_is_a_page_not_a_failed_run(
    tmp_path: Path, tfma: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(facts: Any) -> str:
        raise RuntimeError("matplotlib has no backend")

    monkeypatch.setattr(report_executor, "report_html", broken)
    report, page = _run(tmp_path, CONFIG, pushed_model=_pushed(tmp_path, pushed=True))

    assert "Run report: could not be built" in page
    assert "RuntimeError: matplotlib has no backend" in page
    assert report.get_int_custom_property("problems") == 1
    # The short page still goes next to the pushed model, where a reader of that version looks.
    assert (tmp_path / "serving" / "digits" / "reports" / f"{VERSION}.html").read_text() == page


def test_a_serving_base_it_cannot_write_to_loses_only_the_copy(tmp_path: Path, tfma: dict[str, Any]) -> None:
    pushed = _pushed(tmp_path, pushed=True)
    (tmp_path / "serving" / "digits" / "reports").write_text("a file where the folder would go")

    report, page = _run(tmp_path, CONFIG, pushed_model=pushed)

    assert f"Pushed version {VERSION}" in page
    assert report.get_string_custom_property("published_path") == ""


def test_the_published_report_sits_beside_the_versions() -> None:
    assert published_report_path("gs://b/serving/digits/17/") == "gs://b/serving/digits/reports/17.html"
    assert published_report_path("/out/serving/digits/17") == "/out/serving/digits/reports/17.html"


def test_a_rerun_that_finds_its_model_already_pushed_keeps_the_pushing_runs_report(
    tmp_path: Path, tfma: dict[str, Any]
) -> None:
    inputs = {**_evaluated(tmp_path, blessed=1), "pushed_model": _pushed(tmp_path, pushed=True)}
    published = tmp_path / "serving" / "digits" / "reports" / f"{VERSION}.html"
    _, first = _run(tmp_path, CONFIG, **inputs)
    published.write_text(first + "<!-- the pushing run's -->")
    report, _ = _run(tmp_path, CONFIG, **inputs)  # e.g. an identical rerun: the Pusher reuses the version
    assert published.read_text().endswith("<!-- the pushing run's -->")
    assert report.get_string_custom_property("published_path") == str(published)


def _refused_by_the_load_check(tmp_path: Path) -> Any:
    """The LoadCheck's InfraBlessing of a model that did not load (`components.load_check.blessing`)."""
    from components.load_check.blessing import record_result
    from serving.load_check import LoadCheckResult

    blessing = _artifact(standard_artifacts.InfraBlessing, tmp_path / "LoadCheck" / "blessing")
    reason = "the model did not load: version 1 of digits in tfxp local server ended (UNKNOWN: bad warmup)"
    record_result(blessing, LoadCheckResult(passed=False, reason=reason, server="tfxp local server", model_name="d"))
    return blessing


def test_a_model_the_load_check_refused_says_so_in_the_page_and_the_run_record(
    tmp_path: Path, tfma: dict[str, Any]
) -> None:
    from components.notify.notice import FinalStatus, notice_text, run_outcome
    from components.notify.run_record import read_run_record

    run = "7d0c1e2f-0000-4000-8000-000000000000"
    report = _artifact(HtmlReport, tmp_path / run / "RunReport" / "ab12" / "report")
    inputs = {
        **_evaluated(tmp_path / run, blessed=1),
        "infra_blessing": _refused_by_the_load_check(tmp_path / run),
        "pushed_model": _pushed(tmp_path / run, pushed=False),
    }
    Executor().Do(
        {key: [artifact] for key, artifact in inputs.items()},
        {"report": [report]},
        {"config": json.dumps(CONFIG), "run_id": run, "run_record_dir": str(tmp_path / "runs")},
    )
    page = (Path(report.uri) / "report.html").read_text()

    assert "Not pushed: the served version (if any) is unchanged" in page
    refusal = (
        "not pushed: the load check failed: the model did not load: version 1 of digits in tfxp local server "
        "ended (UNKNOWN: bad warmup); the Evaluator had blessed it (eval accuracy 0.975"
    )
    assert refusal in page
    assert "failed in tfxp local server: the model did not load" in page  # the decision card's "load check" line
    record = read_run_record(str(tmp_path / "runs"), run)
    assert record is not None and record.blessed is True and record.pushed_version is None
    assert record.decision == (
        "not pushed: the load check failed: the model did not load: version 1 of digits in tfxp local server "
        "ended (UNKNOWN: bad warmup)"
    )
    # What the exit handler posts at 3 a.m. (components.notify.component reads this record).
    outcome = run_outcome(FinalStatus(state="SUCCEEDED"), run_id=run, blessed=True, decision=record.decision)
    text = notice_text("tfxp-digits", outcome)
    assert text == f":white_check_mark: tfxp-digits run {run} succeeded: {record.decision}"


def _write_run_artifacts(root: Path) -> None:
    """Every file the RunReport reads, as a real run writes them (TFMA's output aside: the `tfma` fixture)."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2

    for split, counts in (("train", {"0": 30, "1": 34}), ("eval", {"0": 8, "1": 9})):
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        dataset = statistics.datasets.add(num_examples=sum(counts.values()))
        feature = dataset.features.add()
        feature.path.step.extend(["image", "class", "text"])
        for label, count in counts.items():
            feature.string_stats.rank_histogram.buckets.add(label=label, sample_count=count)
        (root / "statistics" / f"Split-{split}").mkdir(parents=True)
        (root / "statistics" / f"Split-{split}" / "FeatureStats.pb").write_bytes(statistics.SerializeToString())
        anomalies = anomalies_pb2.Anomalies()
        if split == "eval":
            anomalies.anomaly_info["image/class/label"].short_description = "Out-of-range values"
        (root / "anomalies" / f"Split-{split}").mkdir(parents=True)
        (root / "anomalies" / f"Split-{split}" / "SchemaDiff.pb").write_bytes(anomalies.SerializeToString())
    for run in ("train", "validation"):
        with tf.summary.create_file_writer(str(root / "model_run" / run)).as_default() as writer:
            for epoch, loss in enumerate((1.9, 0.7, 0.3)):
                tf.summary.scalar("epoch_loss", loss, step=epoch)
                tf.summary.scalar("epoch_sparse_categorical_accuracy", 1 - loss / 2, step=epoch)
            writer.flush()
    (root / "Trainer" / "model" / "Format-Serving").mkdir(parents=True)
    (root / "Trainer" / "model" / "Format-Serving" / "saved_model.pb").write_bytes(b"\0" * 1234)
    (root / "Trainer" / "model" / "training_metrics.json").write_text(json.dumps(TRAINING))
    (root / "EdgeExporter" / "edge_model").mkdir(parents=True)
    (root / "EdgeExporter" / "edge_model" / "edge_metadata.json").write_text(
        json.dumps({"skipped": False, "blessed": True, "pushed_path": "/out/edge/digits/7", "mode": "int8",
                    "accuracy": {"tflite": 0.97, "saved_model": 0.975, "drop": 0.005}, "size_bytes": 90_000,
                    "latency": {"p50_ms": 0.2, "p99_ms": 0.4}, "reason": "within edge.max_accuracy_drop"})
    )  # fmt: skip
    (root / "labels.txt").write_text("0\n1\n")
    for name in ("evaluation", "blessing", "baseline", "examples", "Pusher/pushed_model", "RunReport/report"):
        (root / name).mkdir(parents=True)
    (root / "serving" / "digits" / VERSION).mkdir(parents=True)
    (root / "serving" / "digits" / VERSION / "saved_model.pb").write_bytes(b"")


def _copy_tree(local: Path, uri: str) -> None:
    import tensorflow as tf

    for path in sorted(local.rglob("*")):
        target = f"{uri}/{path.relative_to(local).as_posix()}"
        if path.is_dir():
            tf.io.gfile.makedirs(target)
        else:
            tf.io.gfile.copy(str(path), target)


def _report_over(root: str) -> tuple[Any, str]:
    """Runs the RunReport over the artifacts under `root` (a local path or a URI) and reads back its page."""
    import tensorflow as tf

    def artifact(kind: Any, name: str, **properties: Any) -> Any:
        made = kind()
        made.uri = f"{root}/{name}"
        for key, value in properties.items():
            setter = made.set_int_custom_property if isinstance(value, int) else made.set_string_custom_property
            setter(key, value)
        return made

    report = artifact(HtmlReport, "RunReport/report")
    inputs = {
        "statistics": artifact(standard_artifacts.ExampleStatistics, "statistics"),
        "anomalies": artifact(standard_artifacts.ExampleAnomalies, "anomalies"),
        "model": artifact(standard_artifacts.Model, "Trainer/model"),
        "model_run": artifact(standard_artifacts.ModelRun, "model_run"),
        "model_blessing": artifact(standard_artifacts.ModelBlessing, "blessing", blessed=1),
        "evaluation": artifact(standard_artifacts.ModelEvaluation, "evaluation"),
        "baseline_model": artifact(standard_artifacts.Model, "baseline", served_version="", served_path=""),
        "pushed_model": artifact(
            standard_artifacts.PushedModel,
            "Pusher/pushed_model",
            pushed=1,
            pushed_destination=f"{root}/serving/digits/{VERSION}",
            pushed_version=VERSION,
        ),
        "edge_model": artifact(EdgeModel, "EdgeExporter/edge_model"),
        "examples": artifact(standard_artifacts.Examples, "examples", spans="3,4"),
    }
    Executor().Do(
        {key: [value] for key, value in inputs.items()},
        {"report": [report]},
        {"config": json.dumps(CONFIG), "labels_path": f"{root}/labels.txt", "out_dir": "/out"},
    )
    with tf.io.gfile.GFile(f"{root}/RunReport/report/report.html") as handle:
        return report, handle.read()


def test_a_bucket_pipeline_root_gives_the_same_report_as_a_local_one(tmp_path: Path, tfma: dict[str, Any]) -> None:
    # TensorFlow's in-memory file system stands in for Kubeflow's gs:// pipeline root: a URI that only
    # tf.io.gfile can read (pathlib takes `ram://...` for a local folder and finds it empty).
    local = tmp_path / "root"
    _write_run_artifacts(local)
    bucket = f"ram://{tmp_path.name}/root"
    _copy_tree(local, bucket)

    local_report, local_page = _report_over(str(local))
    bucket_report, bucket_page = _report_over(bucket)

    # The local page has every section's evidence, so a bucket page equal to it has too.
    for shown in (
        "81 examples: 64 train, 17 eval",
        "Examples per class and split (from StatisticsGen)",
        "eval: image/class/label: Out-of-range values",
        "Train curves per epoch",
        "small_resnet: 80 steps at 2770 images/s",
        "Eval accuracy 0.9750 on 359 examples",
        "Confusion matrix",
        "TFLite (int8)",
        'SavedModel (served)</td><td class="num">1.2 KiB',
        f"Pushed version {VERSION}",
    ):
        assert shown in local_page
    assert local_report.get_int_custom_property("problems") == 0
    assert bucket_report.get_int_custom_property("problems") == 0
    assert bucket_page == local_page.replace(str(local), bucket)
    assert (
        bucket_report.get_string_custom_property("published_path") == f"{bucket}/serving/digits/reports/{VERSION}.html"
    )


@pytest.mark.parametrize("on_disk", ["model:ours", "model:an-earlier-one"])
def test_the_run_record_names_the_pushed_version_only_when_it_holds_the_pushed_model(
    tmp_path: Path, tfma: dict[str, Any], on_disk: str
) -> None:
    """What the notice says was published is read back from the version's files, not its push record."""
    from components.notify.run_record import read_run_record
    from foundation.model_identity import model_identity

    run = "7d0c1e2f-0000-4000-8000-000000000001"
    report = _artifact(HtmlReport, tmp_path / run / "RunReport" / "ab12" / "report")
    pushed = _pushed(tmp_path / run, pushed=True)
    version = Path(pushed.get_string_custom_property("pushed_destination"))
    ours = model_identity(version)
    pushed.set_string_custom_property("model_identity", ours)
    (version / "tfxp_push.json").write_text(json.dumps({"identity": ours, "version": int(VERSION)}))
    if on_disk != "model:ours":  # the record still names our model, but the files were replaced since
        (version / "saved_model.pb").write_bytes(b"an earlier model")
    inputs = {**_evaluated(tmp_path / run, blessed=1), "pushed_model": pushed}
    Executor().Do(
        {key: [artifact] for key, artifact in inputs.items()},
        {"report": [report]},
        {"config": json.dumps(CONFIG), "run_id": run, "run_record_dir": str(tmp_path / "runs")},
    )
    record = read_run_record(str(tmp_path / "runs"), run)
    assert record is not None
    if on_disk == "model:ours":
        assert record.pushed_version == VERSION and record.decision == f"pushed version {VERSION}"
    else:
        assert record.pushed_version is None and not record.decision.startswith("pushed")
