"""edge.data: reading labelled splits in both layouts (the shared data and model: tests/support/edge_fixtures.py)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from edge_fixtures import SPEC, example_bytes, synthetic_images, write_dataset, write_split

from edge.data import example_files, load_split
from edge.errors import EdgeError


def test_example_files_reads_a_data_directory_and_an_artifact(tmp_path: Path, data_dir: Path) -> None:
    tfx = write_dataset(tmp_path / "artifact", tfx_layout=True)

    assert [Path(f).name for f in example_files(data_dir, "eval")] == ["part-00000-of-00001.tfrecord.gz"]
    assert [Path(f).name for f in example_files(tfx, "train")] == ["data_tfrecord-00000-of-00001.gz"]


def test_example_files_reads_every_layout_tfxp_run_reads(tmp_path: Path) -> None:
    # ImageNet's flat, uncompressed, extension-less shards; and spans, each read as the run reads them.
    flat = tmp_path / "imagenet"
    for name in ("train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00001"):
        (flat / name).parent.mkdir(parents=True, exist_ok=True)
        (flat / name).write_bytes(b"")
    assert [Path(f).name for f in example_files(flat, "eval")] == ["validation-00000-of-00001"]
    for span in (1, 2):
        write_dataset(tmp_path / "stream" / f"span-{span}")
    (tmp_path / "stream" / "span-3.tmp" / "eval").mkdir(parents=True)  # staged: never read
    files = example_files(tmp_path / "stream", "eval")
    assert [Path(f).parent.parent.name for f in files] == ["span-1", "span-2"]


def test_example_files_without_the_split_says_what_it_found_and_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(EdgeError, match=r"no `eval` examples under .*found nothing.*data.train_pattern.*Split-<split>"):
        example_files(tmp_path, "eval")
    (tmp_path / "part-0.tfrecord.gz").write_bytes(b"")
    with pytest.raises(EdgeError, match=r"split into train and eval by hash buckets only in a run.*Examples artifact"):
        example_files(tmp_path, "eval")


def test_load_split_decodes_with_the_shared_preprocessing(data_dir: Path) -> None:
    data = load_split(data_dir, "eval", SPEC)
    expected_images, expected_labels = synthetic_images(120, seed=2)

    assert data.images.shape == (120, 16, 16, 1)
    assert data.images.dtype == np.float32
    np.testing.assert_allclose(data.images, expected_images / 255.0, atol=1e-6)
    np.testing.assert_array_equal(data.labels, expected_labels)


def test_load_split_shuffled_sample_is_seeded_and_covers_classes(data_dir: Path) -> None:
    first = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=3)
    again = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=3)
    in_order = load_split(data_dir, "train", SPEC, limit=40)

    assert len(first) == 40
    np.testing.assert_array_equal(first.labels, again.labels)
    assert not np.array_equal(first.images, in_order.images)
    assert set(first.labels.tolist()) == {0, 1, 2, 3}


def test_the_shuffled_sample_does_not_depend_on_process_wide_seeds(data_dir: Path) -> None:
    # The Trainer sets these seeds; a cached Trainer leaves them unset: the calibration sample must not change.
    random.seed(1), np.random.seed(1), tf.random.set_seed(1)
    first = load_split(data_dir, "train", SPEC, limit=40, shuffle=True)
    random.seed(2), np.random.seed(2), tf.random.set_seed(2)
    second = load_split(data_dir, "train", SPEC, limit=40, shuffle=True)
    other_seed = load_split(data_dir, "train", SPEC, limit=40, shuffle=True, seed=1)

    np.testing.assert_array_equal(first.images, second.images)
    assert first.digest == second.digest and len(first.digest) == 64
    assert other_seed.digest != first.digest


def test_load_split_applies_the_label_offset(tmp_path: Path) -> None:
    # 1-based labels in ImageNet's flat layout, as its build scripts write them.
    images, labels = synthetic_images(8, seed=4)
    write_split(tmp_path / "train-00000-of-00001.gz", images, labels, label_offset=1)
    write_split(tmp_path / "validation-00000-of-00001.gz", images, labels, label_offset=1)

    assert load_split(tmp_path, "eval", SPEC, label_offset=1).labels.tolist() == labels.tolist()
    with pytest.raises(EdgeError, match=r"label 1 .* below the label offset 2.*data.label_offset"):
        load_split(tmp_path, "eval", SPEC, label_offset=2)


def test_load_split_reads_uncompressed_records(tmp_path: Path) -> None:
    images, labels = synthetic_images(4, seed=5)
    path = tmp_path / "Split-eval" / "data.tfrecord"
    path.parent.mkdir()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for pixels, label in zip(images, labels, strict=True):
            writer.write(example_bytes(pixels, int(label)))

    assert load_split(tmp_path, "eval", SPEC).labels.tolist() == labels.tolist()


def test_load_split_rejects_records_without_the_contract_features(tmp_path: Path) -> None:
    path = tmp_path / "Split-eval" / "data_tfrecord-00000-of-00001.gz"
    path.parent.mkdir()
    example = tf.train.Example(
        features=tf.train.Features(feature={"pixels": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})
    )
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        writer.write(example.SerializeToString())

    with pytest.raises(EdgeError, match=r"cannot read the `eval` examples .*`image/encoded`.*`image/class/label`"):
        load_split(tmp_path, "eval", SPEC)


def test_the_cli_reads_the_serving_crop_beside_the_device_model(tmp_path: Path) -> None:
    from edge.data import central_crop_near

    model = tmp_path / "model.tflite"
    assert central_crop_near(model) == 1.0  # no edge_metadata.json: the whole frame
    (tmp_path / "edge_metadata.json").write_text('{"normalization": {"central_crop": 0.875}}')
    assert central_crop_near(model) == 0.875
    (tmp_path / "edge_metadata.json").write_text('{"normalization": {"central_crop": "lots"}}')
    assert central_crop_near(model) == 1.0
