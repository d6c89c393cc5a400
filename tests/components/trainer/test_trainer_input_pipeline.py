"""The tf.data input pipeline on small generated TFRecords."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from components.trainer import input_pipeline
from components.trainer.augment import augment_batch, augment_on_batches, augment_pixels
from components.trainer.input_pipeline import InputOptions, make_dataset
from foundation.preprocessing import pixels_to_input
from foundation.preprocessing_spec import PreprocessingSpec

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


def _ramp(width: int = 40, height: int = 30) -> tf.Tensor:
    """uint8 [height, width, 1]: each row rises left to right from 10 to 249."""
    row = tf.cast(tf.linspace(10.0, 249.0, width), tf.uint8)
    return tf.tile(row[None, :, None], [height, 1, 1])


def _seed(index: int) -> tf.Tensor:
    return tf.constant([42, index], tf.int64)


# The random-resized crop (area, aspect, seeds, fallback) is measured in tests/components/trainer/test_trainer_crops.py.


def test_flip_mirrors_about_half_the_images() -> None:
    flipped = [bool(augment_pixels(_ramp(), ["flip"], _seed(i))[0, 0, 0] == 249) for i in range(64)]
    assert 16 < sum(flipped) < 48
    np.testing.assert_array_equal(augment_pixels(_ramp(), ["flip"], _seed(flipped.index(True))), _ramp()[:, ::-1])


def test_translate_keeps_size_and_fills_zeros_at_most_10_percent() -> None:
    for index in range(20):
        shifted = augment_pixels(_ramp(), ["translate"], _seed(index)).numpy()
        assert shifted.shape == (30, 40, 1)
        zero_columns = int((shifted[10, :, 0] == 0).sum())
        assert zero_columns <= 4  # 10 % of 40


def test_same_seed_same_augmentation_and_the_resize_restores_the_input_size() -> None:
    names = ["crop", "translate", "flip"]
    first, again = (augment_pixels(_ramp(), names, _seed(3)) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    assert any(not np.array_equal(augment_pixels(_ramp(), names, _seed(i)), first) for i in range(4, 8))
    image = pixels_to_input(first, PreprocessingSpec(image_size=16, channels=1))
    assert image.shape == (16, 16, 1) and image.dtype == tf.float32


def _ramp_batch(count: int = 64) -> tf.Tensor:
    """float32 [count, 30, 40, 1] copies of the ramp in [0, 1]."""
    return tf.tile(tf.cast(_ramp(), tf.float32)[None] / 255.0, [count, 1, 1, 1])


def test_batch_augmentation_without_transforms_is_the_identity() -> None:
    images = _ramp_batch(4)
    np.testing.assert_array_equal(augment_batch(images, [], _seed(0)), images)
    assert augment_on_batches(16) and not augment_on_batches(224)


def test_batch_flip_mirrors_about_half_the_images_exactly() -> None:
    images = _ramp_batch()
    flipped = augment_batch(images, ["flip"], _seed(1)).numpy()
    mirrored = [np.allclose(image, images[0, :, ::-1].numpy(), atol=1e-6) for image in flipped]
    unchanged = [np.allclose(image, images[0].numpy(), atol=1e-6) for image in flipped]
    assert all(a != b for a, b in zip(mirrored, unchanged, strict=True))
    assert 16 < sum(mirrored) < 48


def test_batch_translate_keeps_size_and_fills_zeros_at_most_10_percent() -> None:
    shifted = augment_batch(_ramp_batch(), ["translate"], _seed(2)).numpy()
    assert shifted.shape == (64, 30, 40, 1)
    zero_columns = (shifted[:, 10, :, 0] == 0).sum(axis=1)
    assert zero_columns.max() <= 4 and zero_columns.max() > 0  # ≤ 10 % of 40, and some images did move


def test_batch_augmentation_is_seeded() -> None:
    names = ["crop", "translate", "flip"]
    first, again = (augment_batch(_ramp_batch(8), names, _seed(5)) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(augment_batch(_ramp_batch(8), names, _seed(6)), first)


@pytest.mark.parametrize("on_batches", [True, False])
def test_training_pipeline_augments_with_static_shapes(
    records: str, on_batches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_pipeline, "augment_on_batches", lambda image_size: on_batches)
    dataset = make_dataset(records, _options(training=True, augment=("crop", "flip", "translate")))
    assert dataset.element_spec[0].shape == (6, 8, 8, 1)
    images, labels = next(iter(dataset))
    assert images.shape == (6, 8, 8, 1)
    assert float(tf.reduce_min(images)) >= 0.0 and float(tf.reduce_max(images)) <= 1.0
    # Constant images stay constant under crop and flip; translate only adds zeros at the edges.
    centre = images.numpy()[:, 4, 4, 0]
    np.testing.assert_allclose(centre, 10 * labels.numpy() / 255.0, atol=1e-6)


def test_unknown_augmentation_lists_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown augmentation\(s\) \['rotate'\] \(trainer.augment\); valid: crop, flip"
    ):
        _options(augment=("rotate",))


def test_no_matching_files_names_the_pattern(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no TFRecord files match .*nothing-here"):
        make_dataset(str(tmp_path / "nothing-here*"), _options())


@pytest.mark.parametrize("workers", [2, 3])  # 2: whole files per worker; 3 (> 2 files): every 3rd record
def test_multi_worker_shards_are_disjoint_and_complete(records: str, workers: int) -> None:
    seen: list[int] = []
    for index in range(workers):
        options = _options(training=False, deterministic=True, num_workers=workers, worker_index=index)
        dataset = make_dataset(records, options)
        # Sharded by hand, so tf.data must not shard again (it refuses enumerate's second source).
        assert dataset.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF
        shard = [int(label) for _, labels in dataset for label in labels.numpy()]
        assert shard, f"worker {index} got no data"
        seen.extend(shard)
    assert sorted(seen) == list(range(NUM_EXAMPLES))
