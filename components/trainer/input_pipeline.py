"""tf.data input pipeline over gzip TFRecords of ImageNet-style tf.Examples.

files → parallel interleave → parallel parse + decode + resize (the shared preprocessing) → optional cache →
shuffle → repeat → batch (static shapes when training) → augmentation on whole batches → prefetch.

Example:
    dataset = make_dataset(["/data/train/*.gz"], InputOptions(image_size=32, channels=1, batch_size=64))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tensorflow as tf

from components.trainer.preprocessing import PreprocessingSpec, decode_image

IMAGE_KEY = "image/encoded"
LABEL_KEY = "image/class/label"

_FEATURES = {
    IMAGE_KEY: tf.io.FixedLenFeature([], tf.string),
    LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
}


@dataclass(frozen=True)
class InputOptions:
    """How to read one split.

    Attributes:
        image_size: Square size images are resized to.
        channels: Channels images are decoded to.
        batch_size: Batch size of the dataset (the global batch when a strategy distributes it).
        training: Shuffle, repeat forever, drop the last partial batch (static shapes for XLA) and augment.
        label_offset: Subtracted from `image/class/label` (1 for 1-based label sets).
        cache: Cache decoded images in memory (small data sets only).
        shuffle_buffer: Shuffle buffer in examples.
        augment: Batch augmentations, any of `flip`, `crop`, `translate`.
        deterministic: Fixed element order and seeded randomness (tests); slower.
        seed: Seed for file order, shuffling and augmentation.
        num_workers: Workers reading the data; >1 sets the multi-worker auto-shard policy.
        compression: TFRecord compression (`GZIP` for TFX Examples artifacts, `""` for none).
    """

    image_size: int
    channels: int
    batch_size: int
    training: bool = True
    label_offset: int = 0
    cache: bool = False
    shuffle_buffer: int = 2048
    augment: tuple[str, ...] = ()
    deterministic: bool = False
    seed: int = 42
    num_workers: int = 1
    compression: str = "GZIP"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.augment) - set(AUGMENTATIONS))
        if unknown:
            raise ValueError(
                f"unknown augmentation(s) {unknown} (trainer.augment); valid: {', '.join(sorted(AUGMENTATIONS))}"
            )
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {self.batch_size}")

    @property
    def spec(self) -> PreprocessingSpec:
        return PreprocessingSpec(image_size=self.image_size, channels=self.channels)


def list_files(file_patterns: str | Sequence[str]) -> list[str]:
    """Files matching the patterns, sorted.

    Raises:
        FileNotFoundError: no pattern matches a file (names the patterns).
    """
    patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
    files = sorted({path for pattern in patterns for path in tf.io.gfile.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no TFRecord files match {patterns}; check the Examples artifact / data.path")
    return files


def parse_example(serialized: tf.Tensor, spec: PreprocessingSpec, label_offset: int = 0) -> tuple[tf.Tensor, tf.Tensor]:
    """One serialized tf.Example → (float32 [H, W, C] image in [0, 1], int64 label minus `label_offset`)."""
    features = tf.io.parse_single_example(serialized, _FEATURES)
    label = features[LABEL_KEY] - label_offset
    return decode_image(features[IMAGE_KEY], spec), label


def make_dataset(file_patterns: str | Sequence[str], options: InputOptions) -> tf.data.Dataset:
    """The input pipeline for one split.

    Args:
        file_patterns: Glob pattern(s) of TFRecord files (TFX passes `fn_args.train_files` / `eval_files`).
        options: See `InputOptions`.

    Returns:
        A dataset of (images float32 [B, H, W, C], labels int64 [B]).

    Raises:
        FileNotFoundError: no file matches.
    """
    files = list_files(file_patterns)
    autotune = tf.data.AUTOTUNE
    shuffle_files = options.training and not options.deterministic
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        dataset = dataset.shuffle(len(files), seed=options.seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=options.compression),
        cycle_length=min(len(files), 16),
        num_parallel_calls=autotune,
        deterministic=options.deterministic or None,
    )
    spec = options.spec
    dataset = dataset.map(
        lambda serialized: parse_example(serialized, spec, options.label_offset),
        num_parallel_calls=autotune,
        deterministic=options.deterministic or None,
    )
    if options.cache:
        dataset = dataset.cache()
    if options.training:
        dataset = dataset.shuffle(options.shuffle_buffer, seed=options.seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    dataset = dataset.batch(options.batch_size, drop_remainder=options.training)
    if options.training and options.augment:
        augment = make_batch_augmentation(options.augment, seed=options.seed if options.deterministic else None)
        dataset = dataset.map(lambda images, labels: (augment(images), labels), num_parallel_calls=autotune)
    dataset = dataset.prefetch(autotune)
    return dataset.with_options(_dataset_options(options, len(files)))


def _dataset_options(options: InputOptions, num_files: int) -> tf.data.Options:
    dataset_options = tf.data.Options()
    dataset_options.deterministic = options.deterministic
    if options.num_workers > 1:
        # FILE sharding gives each worker whole files (no redundant reads) but needs ≥ 1 file per worker.
        policy = tf.data.experimental.AutoShardPolicy
        enough_files = num_files >= options.num_workers
        dataset_options.experimental_distribute.auto_shard_policy = policy.FILE if enough_files else policy.DATA
    return dataset_options


# ---- augmentation on whole batches (vectorised: one op per batch, not per image) ----

Augmentation = Callable[[tf.Tensor, int | None], tf.Tensor]


def _flip(images: tf.Tensor, seed: int | None) -> tf.Tensor:
    flip = tf.random.uniform([tf.shape(images)[0], 1, 1, 1], seed=seed) < 0.5
    return tf.where(flip, tf.reverse(images, axis=[2]), images)


def _boxes_resample(images: tf.Tensor, boxes: tf.Tensor) -> tf.Tensor:
    size = tf.shape(images)[1:3]
    indices = tf.range(tf.shape(images)[0])
    return tf.image.crop_and_resize(images, boxes, indices, size, extrapolation_value=0.0)


def _crop(images: tf.Tensor, seed: int | None) -> tf.Tensor:
    # Random crop of 80–100 % of each side at a random position, resized back (scale augmentation).
    batch = tf.shape(images)[0]
    scale = tf.random.uniform([batch, 1], 0.8, 1.0, seed=seed)
    offset = tf.random.uniform([batch, 2], seed=seed) * (1.0 - scale)
    boxes = tf.concat([offset, offset + scale], axis=1)
    return tf.cast(_boxes_resample(tf.cast(images, tf.float32), boxes), images.dtype)


def _translate(images: tf.Tensor, seed: int | None) -> tf.Tensor:
    # Shift by up to ±10 % of each side, filling with zeros (black).
    batch = tf.shape(images)[0]
    shift = tf.random.uniform([batch, 2], -0.1, 0.1, seed=seed)
    boxes = tf.concat([shift, shift + 1.0], axis=1)
    return tf.cast(_boxes_resample(tf.cast(images, tf.float32), boxes), images.dtype)


AUGMENTATIONS: dict[str, Augmentation] = {"flip": _flip, "crop": _crop, "translate": _translate}


def make_batch_augmentation(names: Sequence[str], seed: int | None = None) -> Callable[[tf.Tensor], tf.Tensor]:
    """Composes the named augmentations into one function on image batches [B, H, W, C].

    Raises:
        ValueError: an unknown name (lists the valid ones).
    """
    unknown = sorted(set(names) - set(AUGMENTATIONS))
    if unknown:
        raise ValueError(f"unknown augmentation(s) {unknown}; valid: {', '.join(sorted(AUGMENTATIONS))}")
    steps = [AUGMENTATIONS[name] for name in names]

    def augment(images: tf.Tensor) -> tf.Tensor:
        for index, step in enumerate(steps):
            images = step(images, None if seed is None else seed + index)
        return images

    return augment
