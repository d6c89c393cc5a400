"""The whole pipeline (LocalDagRunner, through `tfxp run`) on data read as it is: ImageNet's flat layout, and spans."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.summary import latest_run_components, open_store

pytestmark = pytest.mark.e2e

# Digits in ImageNet's clothes: synsets (fits the WordNet id pattern), descriptions that repeat like ImageNet's.
SYNSETS = [f"n{1000000 + digit:08d}" for digit in range(10)]


def _cli(data: Path, out: Path, *overrides: str) -> tuple[int, str, dict[str, Any]]:
    """`tfxp run` with the default config, small training and no edge export (not what these tests are about)."""
    args = ["run", "--config", "configs/default.yaml", "--output", str(out)]
    for override in (f"data.path={data}", "edge.enabled=false", *overrides):
        args += ["--set", override]
    result = CliRunner().invoke(app, args)
    summary_path = out / "run-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return result.exit_code, result.output, summary


def write_imagenet_layout(directory: Path) -> Path:
    """The digits as TensorFlow's ImageNet build scripts write ImageNet: flat, uncompressed, extension-less shards
    `train-0000N-of-00002` and `validation-00000-of-00001`, 1-based labels, synsets, texts, sizes and a variable
    number of bounding boxes per image. Returns the synset label map (`<synset> <description>` lines)."""
    import tensorflow as tf

    from components.data.dataset import stratified_split
    from components.data.digits import digits_records

    def feature(value: Any) -> tf.train.Feature:
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        if isinstance(value, list):
            return tf.train.Feature(float_list=tf.train.FloatList(value=value))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    records = digits_records()
    splits = stratified_split([record.label for record in records], 0.2, seed=0)
    rng = random.Random(0)
    shards = {"train": ["train-00000-of-00002", "train-00001-of-00002"], "validation": ["validation-00000-of-00001"]}
    directory.mkdir(parents=True)
    for split, indices in (("train", splits["train"]), ("validation", splits["eval"])):
        names = shards[split]
        writers = [tf.io.TFRecordWriter(str(directory / name)) for name in names]  # uncompressed, as ImageNet's
        for position, index in enumerate(indices):
            record = records[index]
            boxes = rng.randint(0, 2)
            example = {
                "image/encoded": record.read(),
                "image/format": b"PNG",
                "image/filename": f"{split}_{index}.png".encode(),
                "image/height": 8,
                "image/width": 8,
                "image/channels": 1,
                "image/class/label": record.label + 1,
                "image/class/synset": SYNSETS[record.label].encode(),
                "image/class/text": b"a digit",
                "image/object/bbox/xmin": [0.1] * boxes,
                "image/object/bbox/ymin": [0.2] * boxes,
                "image/object/bbox/label": [float(record.label + 1)] * boxes,
            }
            features = tf.train.Features(feature={key: feature(value) for key, value in example.items()})
            writers[position % len(names)].write(tf.train.Example(features=features).SerializeToString())
        for writer in writers:
            writer.close()
    labels = directory / "synsets.txt"
    labels.write_text("".join(f"{synset} a digit\n" for synset in SYNSETS))
    return labels


def test_imagenet_layout_is_read_as_it_is_with_only_path_and_labels(tmp_path: Path) -> None:
    import tensorflow as tf

    data = tmp_path / "imagenet"
    labels = write_imagenet_layout(data)
    before = {path.name: path.stat().st_mtime_ns for path in data.iterdir()}
    code, output, summary = _cli(data, tmp_path / "out", f"data.labels={labels}")

    assert code == 0, output
    resolved = summary["config"]["data"]
    assert (resolved["split"], resolved["train_pattern"], resolved["eval_pattern"]) == (
        "folders", "train-*", "validation-*"
    )  # fmt: skip
    assert resolved["label_offset"] == 1  # from image/class/synset against the label map
    assert summary["blessed"] is True, summary["blessing_reason"]
    validation_records = sum(1 for _ in tf.data.TFRecordDataset(str(data / "validation-00000-of-00001")))
    assert summary["metrics"]["example_count"] == validation_records  # every validation example, none of train
    pushed = Path(summary["pushed_model_dir"])
    assert (pushed / "assets" / "labels.txt").read_text().split() == SYNSETS
    model = tf.saved_model.load(str(pushed))
    first = next(iter(tf.data.TFRecordDataset(str(data / "validation-00000-of-00001")).take(1)))
    outputs = model.signatures["serving_tf_example"](examples=tf.reshape(first, [1]))
    assert outputs["probabilities"].shape == (1, 10)
    assert {path.name: path.stat().st_mtime_ns for path in data.iterdir()} == before  # nothing rewritten


def test_spans_all_records_the_spans_and_a_new_span_reruns(tmp_path: Path) -> None:
    data = tmp_path / "stream"
    for span in ("1", "2"):
        result = CliRunner().invoke(app, ["data", "digits", "--out", str(data), "--spans", "3", "--span", span])
        assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    small = ("trainer.train_steps=60", "evaluator.min_accuracy=0.3", "evaluator.max_accuracy_drop=1")
    code, output, summary = _cli(data, out, "data.spans=all", *small)

    assert code == 0, output
    assert summary["data"]["spans_seen"] == [1, 2]
    store = open_store(str(out / "tfxp-digits" / "metadata.db"))
    examples = latest_run_components(store, "tfxp-digits")["ImportExampleGen"].outputs["examples"][0]
    assert examples.custom_properties["spans"].string_value == "1,2"
    assert examples.custom_properties["span"].int_value == 2

    result = CliRunner().invoke(app, ["data", "digits", "--out", str(data), "--spans", "3", "--span", "3"])
    assert result.exit_code == 0, result.output
    code, output, summary = _cli(data, out, "data.spans=all", *small)

    assert code == 0, output
    assert summary["data"]["spans_seen"] == [1, 2, 3]
    assert summary["components"]["ImportExampleGen"]["status"] == "complete"  # same config, a new span: rerun
    assert summary["metrics"]["example_count"] == 360  # the eval splits of the three spans
