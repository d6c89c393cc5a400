"""The tf.data input pipeline on small generated TFRecords."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from components.trainer.input_pipeline import InputOptions, make_batch_augmentation, make_dataset

NUM_EXAMPLES = 20


def _example(pixels: np.ndarray, label: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[buffer.getvalue()])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two gzip shards; example i is a 12×12 image of constant value 10·i with 1-based label i+1."""
    out = tmp_path_factory.mktemp("records")
    for shard in range(2):
        with tf.io.TFRecordWriter(str(out / f"part-{shard:05d}-of-00002.tfrecord.gz"), "GZIP") as writer:
            for index in range(shard, NUM_EXAMPLES, 2):
                writer.write(_example(np.full((12, 12), 10 * index, dtype=np.uint8), index + 1))
    return str(out / "*.gz")


def _options(**overrides: object) -> InputOptions:
    values: dict = {"image_size": 8, "channels": 1, "batch_size": 6, "label_offset": 1, "seed": 3}
    values.update(overrides)
    return InputOptions(**values)


def test_eval_reads_every_example_once_with_offset_labels(records: str) -> None:
    batches = list(make_dataset(records, _options(training=False, deterministic=True)))
    labels = np.concatenate([labels.numpy() for _, labels in batches])
    assert sorted(labels) == list(range(NUM_EXAMPLES))
    assert [images.shape[0] for images, _ in batches] == [6, 6, 6, 2]  # the partial last batch is kept
    for images, batch_labels in batches:
        assert images.dtype == tf.float32 and images.shape[1:] == (8, 8, 1)
        # Pixel value 10·label in [0, 255] → [0, 1]: decode and label stay paired through the pipeline.
        np.testing.assert_allclose(images.numpy()[:, 0, 0, 0], 10 * batch_labels.numpy() / 255.0, atol=1e-6)


def test_training_repeats_with_static_batch_shape(records: str) -> None:
    dataset = make_dataset(records, _options(training=True, cache=True))
    assert dataset.element_spec[0].shape == (6, 8, 8, 1)  # drop_remainder: static shapes for XLA
    labels = np.concatenate([labels.numpy() for _, labels in dataset.take(10)])
    assert len(labels) == 60 and set(labels) == set(range(NUM_EXAMPLES))


def test_deterministic_mode_repeats_the_same_order(records: str) -> None:
    def first_labels() -> list[int]:
        dataset = make_dataset(records, _options(training=True, deterministic=True, augment=("flip", "translate")))
        return [int(label) for _, labels in dataset.take(4) for label in labels]

    assert first_labels() == first_labels()


def test_augmentations_keep_shape_dtype_and_range() -> None:
    images = tf.random.stateless_uniform([5, 16, 16, 3], seed=[1, 2])
    augmented = make_batch_augmentation(["flip", "crop", "translate"], seed=7)(images)
    assert augmented.shape == images.shape and augmented.dtype == tf.float32
    assert float(tf.reduce_min(augmented)) >= 0.0 and float(tf.reduce_max(augmented)) <= 1.0
    assert not np.allclose(augmented.numpy(), images.numpy())


def test_flip_mirrors_some_images_and_keeps_others() -> None:
    images = tf.reshape(tf.range(32 * 4 * 4, dtype=tf.float32), [32, 4, 4, 1])
    flipped = make_batch_augmentation(["flip"], seed=1)(images).numpy()
    mirrored = [np.array_equal(flipped[i], images.numpy()[i, :, ::-1]) for i in range(32)]
    unchanged = [np.array_equal(flipped[i], images.numpy()[i]) for i in range(32)]
    assert all(m or u for m, u in zip(mirrored, unchanged, strict=True))
    assert 0 < sum(mirrored) < 32


def test_unknown_augmentation_lists_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown augmentation\(s\) \['rotate'\] \(trainer.augment\); valid: crop, flip"
    ):
        _options(augment=("rotate",))


def test_no_matching_files_names_the_pattern(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no TFRecord files match .*nothing-here"):
        make_dataset(str(tmp_path / "nothing-here*"), _options())


@pytest.mark.parametrize(("workers", "policy"), [(2, "FILE"), (3, "DATA")])
def test_multi_worker_auto_shard_policy(records: str, workers: int, policy: str) -> None:
    dataset = make_dataset(records, _options(num_workers=workers))
    chosen = dataset.options().experimental_distribute.auto_shard_policy
    assert chosen == getattr(tf.data.experimental.AutoShardPolicy, policy)
