"""The whole pipeline with LocalDagRunner on the digits data, through the `tfxp run` CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.summary import latest_run_components, open_store

pytestmark = pytest.mark.e2e

TRAIN_STEPS = "trainer.train_steps=300"


def run_cli(data: Path, out: Path, *overrides: str) -> tuple[int, str, dict[str, Any]]:
    args = ["run", "--config", "configs/default.yaml", "--output", str(out), "--set", f"data.path={data}"]
    for override in (TRAIN_STEPS, "edge.enabled=false", *overrides):
        args += ["--set", override]
    result = CliRunner().invoke(app, args)
    summary_path = out / "run-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return result.exit_code, result.output, summary


def versions(out: Path) -> list[str]:
    base = out / "serving" / "digits"
    return sorted(p.name for p in base.iterdir() if p.name.isdigit()) if base.exists() else []


@pytest.fixture(scope="module")
def first_run(digits_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("run") / "out"
    code, output, summary = run_cli(digits_dir, out)
    assert code == 0, output
    return out, summary


def test_first_run_blesses_and_pushes_a_servable_model(
    first_run: tuple[Path, dict[str, Any]], digits_dir: Path
) -> None:
    import tensorflow as tf

    from foundation.data.tfrecords import iter_examples

    out, summary = first_run
    assert summary["status"] == "succeeded"
    assert summary["blessed"] is True, summary["blessing_reason"]
    assert summary["blessing_reason"].startswith("pushed: eval accuracy")
    assert summary["blessing_reason"].endswith(", no served model yet")
    assert summary["decision"] == "pushed"
    assert summary["baseline"] == {"mode": "served", "version": "", "path": "", "accuracy": None}
    assert set(summary["components"]) >= {"ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
                                          "Trainer", "ServedBaseline", "Evaluator", "Pusher"}  # fmt: skip
    assert all(record["status"] == "complete" for record in summary["components"].values())
    assert summary["config"]["data"]["path"] == str(digits_dir)

    # MLMD holds the lineage: one complete execution per component in the latest run.
    records = latest_run_components(open_store(str(out / "tfxp-digits" / "metadata.db")), "tfxp-digits")
    assert records["Trainer"].status == "complete"
    assert records["Pusher"].outputs["pushed_model"]

    pushed = Path(summary["pushed_model_dir"])
    assert pushed.parent == out / "serving" / "digits" and pushed.name.isdigit()
    assert summary["served_version"] == pushed.name
    model = tf.saved_model.load(str(pushed))
    examples = list(iter_examples(sorted((digits_dir / "eval").glob("part-*"))))
    images = [e.features.feature["image/encoded"].bytes_list.value[0] for e in examples]
    labels = [e.features.feature["image/class/label"].int64_list.value[0] for e in examples]
    outputs = model.signatures["serving_default"](image_bytes=tf.constant(images))
    accuracy = float(tf.reduce_mean(tf.cast(outputs["classes"] == tf.constant(labels, tf.int64), tf.float32)))
    assert accuracy >= 0.90
    assert outputs["probabilities"].dtype == tf.float32
    assert summary["metrics"]["accuracy"] == pytest.approx(accuracy, abs=0.02)
    assert (pushed / "assets" / "labels.txt").read_text().split() == [str(i) for i in range(10)]


def test_identical_rerun_is_served_from_cache(first_run: tuple[Path, dict[str, Any]], digits_dir: Path) -> None:
    out, first = first_run
    served = Path(first["pushed_model_dir"]).name
    code, output, summary = run_cli(digits_dir, out)
    assert code == 0, output
    statuses = {name: record["status"] for name, record in summary["components"].items()}
    for name in ("ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Trainer"):
        assert statuses[name] == "cached", statuses
    # A version is served now, so the cached model is evaluated against it (itself): blessed, and not pushed twice.
    assert statuses["ServedBaseline"] == statuses["Evaluator"] == "complete", statuses
    assert summary["baseline"]["version"] == served
    assert summary["baseline"]["accuracy"] == pytest.approx(summary["metrics"]["accuracy"])
    assert summary["decision"] == "no new data"
    assert summary["blessing_reason"].startswith(f"no new data, nothing pushed: version {served} already holds")
    assert "no new data, nothing pushed" in " ".join(output.split())
    assert summary["pushed_model_dir"] == first["pushed_model_dir"]
    assert versions(out) == [served]

    # Nothing changed since: the served baseline and everything after it are cache hits too.
    code, output, again = run_cli(digits_dir, out)
    assert code == 0, output
    assert {record["status"] for record in again["components"].values()} == {"cached"}, again["components"]
    assert again["decision"] == "no new data" and versions(out) == [served]


def test_a_rolled_back_push_is_pushed_again(digits_dir: Path, tmp_path: Path) -> None:
    """Push A, push B, remove B's version: the same run as B reruns the Pusher (the baseline is A again, as when B
    ran, so everything before the Pusher is cached) and publishes B's model as a new version."""
    out = tmp_path / "out"
    quick = ("trainer.train_steps=1", "evaluator.min_accuracy=0", "evaluator.max_accuracy_drop=1")
    code, output, first = run_cli(digits_dir, out, *quick)
    assert code == 0 and first["decision"] == "pushed", output
    code, output, second = run_cli(digits_dir, out, *quick, "trainer.seed=7")
    assert code == 0 and second["decision"] == "pushed", output
    shutil.rmtree(second["pushed_model_dir"])

    code, output, again = run_cli(digits_dir, out, *quick, "trainer.seed=7")
    assert code == 0, output
    statuses = {name: record["status"] for name, record in again["components"].items()}
    assert statuses["ServedBaseline"] == statuses["Evaluator"] == statuses["Trainer"] == "cached", statuses
    assert statuses["Pusher"] == "complete", statuses
    pushed = Path(again["pushed_model_dir"])
    assert pushed.is_dir() and pushed != Path(second["pushed_model_dir"])
    assert again["decision"] == "pushed" and again["served_version"] == pushed.name
    assert again["blessing_reason"].startswith("pushed: ") and again["problems"] == []
    assert versions(out) == sorted([Path(first["pushed_model_dir"]).name, pushed.name])


def test_a_new_model_at_a_path_an_earlier_run_used_is_served_and_a_renamed_class_too(
    digits_dir: Path, tmp_path: Path
) -> None:
    """The pipeline root and its ML Metadata removed, `serving/` and `edge/` kept: execution ids restart and the
    retrained model lands at the path of the served one. It is published (served and device model the same
    model); then a class renamed in labels.txt retrains and is published as a new version."""
    from foundation.model_identity import model_identity
    from foundation.publish import read_push_record

    data, out = tmp_path / "digits", tmp_path / "out"
    shutil.copytree(digits_dir, data)
    quick = ("trainer.train_steps=1", "evaluator.min_accuracy=0", "evaluator.max_accuracy_drop=1")
    edge = ("edge.enabled=true", "edge.max_accuracy_drop=1", "edge.app_client=none", "edge.eval_samples=50")
    metadata = out / "tfxp-digits" / "metadata.db"

    def trained_at() -> str:
        return latest_run_components(open_store(str(metadata)), "tfxp-digits")["Trainer"].outputs["model"][0].uri

    code, output, first = run_cli(data, out, *quick, *edge)
    assert code == 0 and first["decision"] == "pushed", output
    first_model = trained_at()
    shutil.rmtree(out / "tfxp-digits")

    code, output, second = run_cli(data, out, *quick, *edge, "trainer.seed=7")
    assert code == 0, output
    assert trained_at() == first_model  # the case: the new model lies where the served one was trained
    served = Path(second["pushed_model_dir"])
    assert second["decision"] == "pushed" and served != Path(first["pushed_model_dir"]), second["blessing_reason"]
    assert second["served_version"] == served.name and second["problems"] == []
    assert f"served model: {served}" in " ".join(output.split())
    identity = model_identity(f"{first_model}/Format-Serving")
    assert (read_push_record(str(served)) or {}).get("identity") == identity == model_identity(served)
    assert second["edge"]["status"] == "pushed", second["edge"]["reason"]
    release = json.loads((out / "edge" / "digits" / second["edge"]["version"] / "release.json").read_text())
    assert release["saved_model"]["identity"] == identity  # the device model is the served model

    labels = (data / "labels.txt").read_text().splitlines()
    (data / "labels.txt").write_text("\n".join(["zero", *labels[1:]]) + "\n")
    code, output, renamed = run_cli(data, out, *quick, "trainer.seed=7")
    assert code == 0, output
    assert renamed["components"]["Trainer"]["status"] == "complete", renamed["components"]
    pushed = Path(renamed["pushed_model_dir"])
    assert renamed["decision"] == "pushed" and pushed not in (served, Path(first["pushed_model_dir"]))
    assert (pushed / "assets" / "labels.txt").read_text().splitlines()[:2] == ["zero", "1"]


def test_model_below_threshold_is_not_pushed(first_run: tuple[Path, dict[str, Any]], digits_dir: Path) -> None:
    out, first = first_run
    before = versions(out)
    pushed_files = sorted(p.relative_to(out) for p in Path(first["pushed_model_dir"]).rglob("*"))
    code, output, summary = run_cli(digits_dir, out, "trainer.train_steps=1", "trainer.steps_per_epoch=1")
    assert code == 0, output
    assert summary["blessed"] is False
    served = Path(first["pushed_model_dir"]).name
    assert summary["blessing_reason"].startswith("not pushed: eval accuracy")
    assert "< evaluator.min_accuracy 0.9" in summary["blessing_reason"]
    assert f"below the served version {served} (" in summary["blessing_reason"]
    assert summary["decision"] == "not pushed" and summary["served_version"] == served
    assert summary["pushed_model_dir"] is None
    assert versions(out) == before
    assert sorted(p.relative_to(out) for p in Path(first["pushed_model_dir"]).rglob("*")) == pushed_files
    assert "nothing pushed this run" in output

    # The same again: the refused model is not retrained, and the run says there was no new data.
    code, output, again = run_cli(digits_dir, out, "trainer.train_steps=1", "trainer.steps_per_epoch=1")
    assert code == 0, output
    assert again["components"]["Trainer"]["status"] == "cached"
    assert again["decision"] == "no new data"
    assert again["blessing_reason"].startswith("no new data, nothing pushed: eval accuracy")
    assert versions(out) == before


def test_retrained_model_starts_from_and_is_compared_with_the_served_version(
    first_run: tuple[Path, dict[str, Any]], digits_dir: Path
) -> None:
    out, first = first_run
    served = Path(first["pushed_model_dir"]).name
    code, output, summary = run_cli(digits_dir, out, "trainer.seed=7", "trainer.warm_start=served")
    assert code == 0, output
    assert summary["components"]["Trainer"]["status"] == "complete"
    assert summary["warm_start"]["applied"] is True, summary["warm_start"]
    assert "warm start from the served model:" in " ".join(output.split())  # said on the terminal too
    assert summary["warm_start"]["version"] == served
    assert summary["baseline"]["version"] == served
    assert summary["baseline"]["path"] == str(out / "serving" / "digits" / served)
    assert summary["metrics"]["baseline_accuracy"] is not None
    assert f"the served version {served} (" in summary["blessing_reason"]
    if summary["decision"] == "pushed":
        assert summary["blessing_reason"].startswith("pushed: eval accuracy")
        assert int(summary["served_version"]) > int(served)
    else:
        assert summary["blessing_reason"].startswith("not pushed: eval accuracy")
        assert summary["served_version"] == served


def test_broken_served_version_stops_the_run_until_someone_chooses(digits_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    broken = out / "serving" / "digits" / "1700000000"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    code, output, summary = run_cli(digits_dir, out)
    assert code == 2  # a user error (ServedModelError): the message says how to go on
    flat = " ".join(output.split())
    assert "component ServedBaseline failed" in flat
    assert f"the served version 1700000000 ({broken}) cannot be loaded" in flat
    assert "evaluator.baseline: none" in flat
    assert "Evaluator" not in summary["components"] and "Pusher" not in summary["components"]
    # It raised, so ML Metadata still has it RUNNING: the summary and the report say it failed.
    assert summary["components"]["ServedBaseline"]["status"] == "failed"
    assert "<td>ServedBaseline</td><td>failed</td>" in (out / "report.html").read_text()
    assert versions(out) == ["1700000000"]

    # The documented way out: compare with nothing.
    code, output, summary = run_cli(
        digits_dir, out, "evaluator.baseline=none", "trainer.train_steps=1", "evaluator.min_accuracy=0"
    )
    assert code == 0, output
    assert "ServedBaseline" not in summary["components"]
    assert summary["blessing_reason"].endswith("evaluator.baseline is none, so not compared with the served model")
    assert summary["decision"] == "pushed" and len(versions(out)) == 2


def test_corrupt_shard_fails_naming_file_and_component(digits_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(digits_dir, data)
    shard = sorted((data / "train").iterdir())[0]
    shard.write_bytes(shard.read_bytes()[:300] + b"\x00garbage" * 50)
    code, output, summary = run_cli(data, tmp_path / "out")
    assert code == 1
    assert summary["status"] == "failed"
    assert summary["failed_component"] == "ImportExampleGen"
    flat = " ".join(output.split())
    assert "component ImportExampleGen failed" in flat
    assert shard.name in flat
    assert "tfxp_dataset.json" not in flat  # only the TFRecords ImportExampleGen reads are suspects
    assert not (tmp_path / "out" / "serving").exists()


def test_schema_violations_stop_the_run_before_training(digits_dir: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    from foundation.data.tfrecords import make_example

    data = tmp_path / "data"
    shutil.copytree(digits_dir, data)
    bad = tmp_path / "bad.tfrecord.gz"
    missing_image = tf.train.Example()
    missing_image.features.feature["image/class/label"].int64_list.value.append(3)
    png = next(iter((digits_dir / "eval").iterdir()))  # any bytes: validation looks at presence and labels
    with tf.io.TFRecordWriter(str(bad), options="GZIP") as writer:
        writer.write(make_example(png.read_bytes()[:64], 12).SerializeToString())  # label outside 0..9
        writer.write(missing_image.SerializeToString())
    shutil.copy(bad, data / "eval" / "part-00099-of-00100.tfrecord.gz")
    code, output, summary = run_cli(data, tmp_path / "out")
    assert code == 2  # DataValidationError, a user error (it was 1, as a failed run)
    flat = " ".join(output.split())
    assert "component ExampleValidator failed" in flat
    assert "training was not started" in flat
    assert "feature 'image/class/label'" in flat and "feature 'image/encoded'" in flat
    assert "Trainer" not in summary["components"]


def test_flat_data_is_split_by_hash_buckets(digits_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "flat"
    data.mkdir()
    for split in ("train", "eval"):
        for shard in (digits_dir / split).iterdir():
            # Not named train-*/eval-*: flat files named after the splits are read as those splits.
            shutil.copy(shard, data / f"part-{split}-{shard.name}")
    for name in ("labels.txt", "tfxp_dataset.json"):  # non-TFRecord files beside the data are not read
        if (digits_dir / name).exists():
            shutil.copy(digits_dir / name, data / name)
    code, output, summary = run_cli(data, tmp_path / "out", "trainer.train_steps=100", "evaluator.min_accuracy=0.5")
    assert code == 0, output
    assert summary["config"]["data"]["split"] == "hash"
    assert summary["blessed"] is True, summary["blessing_reason"]
    assert 120 < summary["metrics"]["example_count"] < 260  # one bucket of ten: about 180 of 1,797 examples


def test_bucket_output_is_refused_before_anything_runs(digits_dir: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--set", f"data.path={digits_dir}", "--output", "gs://bucket/tfxp"])
    assert result.exit_code == 2
    assert "must be local" in " ".join(result.output.split())


def test_two_workers_train_as_well_as_one(
    first_run: tuple[Path, dict[str, Any]], digits_dir: Path, tmp_path: Path
) -> None:
    """`trainer.workers=2`: the Trainer starts two local worker processes with TF_CONFIG (the path a TFJob's pods
    take on Kubeflow), they train under MultiWorkerMirroredStrategy, and the chief's model is pushed."""
    _, single = first_run
    out = tmp_path / "out"
    code, output, summary = run_cli(digits_dir, out, "trainer.workers=2")
    assert code == 0, output
    assert summary["status"] == "succeeded" and summary["decision"] == "pushed"
    assert summary["metrics"]["accuracy"] == pytest.approx(single["metrics"]["accuracy"], abs=0.02)
    (metrics_file,) = (out / "tfxp-digits" / "root" / "Trainer" / "model").glob("*/training_metrics.json")
    metrics = json.loads(metrics_file.read_text())
    assert (metrics["strategy"], metrics["workers"], metrics["replicas"]) == ("multi_worker", 2, 2)
    assert metrics["reasons"]["strategy"] == "auto: TF_CONFIG names 2 workers"
    logs = sorted(path.name for path in (out / "tfxp-digits" / "root" / "Trainer" / "model_run").glob("*/workers/*"))
    assert logs == ["worker-0.log", "worker-1.log"]
    assert (Path(summary["pushed_model_dir"]) / "saved_model.pb").is_file()
