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
    return sorted(p.name for p in base.iterdir()) if base.exists() else []


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

    from components.data.tfrecords import iter_examples, split_files

    out, summary = first_run
    assert summary["status"] == "succeeded"
    assert summary["blessed"] is True, summary["blessing_reason"]
    assert summary["blessing_reason"].startswith("blessed: eval accuracy")
    assert "no blessed baseline yet" in summary["blessing_reason"]
    assert set(summary["components"]) >= {"ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
                                          "Trainer", "Evaluator", "Pusher"}  # fmt: skip
    assert all(record["status"] == "complete" for record in summary["components"].values())
    assert summary["config"]["data"]["path"] == str(digits_dir)

    # MLMD holds the lineage: one complete execution per component in the latest run.
    records = latest_run_components(open_store(str(out / "tfxp-digits" / "metadata.db")), "tfxp-digits")
    assert records["Trainer"].status == "complete"
    assert records["Pusher"].outputs["pushed_model"]

    pushed = Path(summary["pushed_model_dir"])
    assert pushed.parent == out / "serving" / "digits" and pushed.name.isdigit()
    model = tf.saved_model.load(str(pushed))
    examples = list(iter_examples(split_files(digits_dir, "eval")))
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
    code, output, summary = run_cli(digits_dir, out)
    assert code == 0, output
    statuses = {name: record["status"] for name, record in summary["components"].items()}
    for name in ("ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Trainer"):
        assert statuses[name] == "cached", statuses
    # The same model is not pushed twice.
    assert summary["pushed_model_dir"] == first["pushed_model_dir"]
    assert versions(out) == [Path(first["pushed_model_dir"]).name]


def test_model_below_threshold_is_not_pushed(first_run: tuple[Path, dict[str, Any]], digits_dir: Path) -> None:
    out, first = first_run
    before = versions(out)
    pushed_files = sorted(p.relative_to(out) for p in Path(first["pushed_model_dir"]).rglob("*"))
    code, output, summary = run_cli(digits_dir, out, "trainer.train_steps=1", "trainer.steps_per_epoch=1")
    assert code == 0, output
    assert summary["blessed"] is False
    assert summary["blessing_reason"].startswith("not blessed: eval accuracy")
    assert "< evaluator.min_accuracy 0.9" in summary["blessing_reason"]
    assert summary["pushed_model_dir"] is None
    assert versions(out) == before
    assert sorted(p.relative_to(out) for p in Path(first["pushed_model_dir"]).rglob("*")) == pushed_files
    assert "nothing pushed this run" in output


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

    from components.data.tfrecords import make_example

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
    assert code == 1
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
