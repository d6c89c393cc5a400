"""tf.data input pipeline over gzip TFRecords of ImageNet-style tf.Examples.

Large data (no cache): files → parallel interleave → shuffle records → repeat → batch the serialized records
(static shapes when training) → parallel map over batches: one vectorized `parse_example`, then an in-graph
loop of decode (+ augment) + resize per image, or, for small images, decode + resize per image and augment
the whole batch → prefetch.
Small data (cache): files → parallel interleave → parallel parse + decode → cache (uint8 pixels) → shuffle →
repeat → parallel augment + resize → batch → prefetch; without augmentation the resized inputs are cached and
later epochs only shuffle and batch.

Batching before the map ("vectorize cheap functions" in the tf.data performance guide) runs one map call
per batch instead of one per image: for 16×16 digits the per-element overhead was larger than the decode
itself (bench/input_pipeline.py: ~8,500 images/s per element, ~25,000 per batch on 2 cores); for 224×224
JPEGs both forms are within noise.

Decode, central crop and resize are the shared preprocessing (`decode_pixels` + `pixels_to_input` =
`decode_image`, with `InputOptions.spec`); augmentation works on the decoded uint8 pixels between the two, or on
resized batches of small images (augment.py says why and where the line is). Training with the `crop`
augmentation skips the central crop: its random-resized crop takes the place of it.

Shuffling serialized records instead of decoded images keeps the shuffle buffer ~10× smaller for JPEGs.

Example:
    dataset = make_dataset(["/data/train/*.gz"], InputOptions(image_size=32, channels=1, batch_size=64))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

from components.trainer.augment import (
    AugmentParams,
    augment_batch,
    augment_on_batches,
    augment_pixels,
    check_augmentations,
)
from foundation.contract import IMAGE_KEY, LABEL_KEY
from foundation.image_checks import check_image_formats
from foundation.preprocessing import decode_image, decode_pixels, pixels_to_input
from foundation.preprocessing_spec import PreprocessingSpec

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
        augment: Augmentations of each decoded training image, any of `flip`, `crop`, `scale`, `translate`.
        crop_area: `crop`: range of the random-resized crop's share of the image's area (`trainer.crop_area`).
        crop_aspect: `crop`: range of its width / height (`trainer.crop_aspect`).
        scale_range: `scale`: range of the zoom factor (`trainer.scale_range`).
        central_crop: The central square's share of the shorter side cropped before the resize
          (`trainer.eval_crop`; `PreprocessingSpec.central_crop`): every eval image, and training images
          unless `crop` augments them. 1.0 = the whole image.
        deterministic: Fixed element order and seeded randomness (tests); slower.
        seed: Seed for file order, shuffling and augmentation.
        num_workers: Workers reading the data; with >1 each worker reads its own shard (whole files when
          there are enough, else every num_workers-th record), and tf.data's auto-sharding is off.
        worker_index: This worker's shard, 0 … num_workers − 1.
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
    crop_area: tuple[float, float] = (0.08, 1.0)
    crop_aspect: tuple[float, float] = (3 / 4, 4 / 3)
    scale_range: tuple[float, float] = (0.8, 1.25)
    central_crop: float = 1.0
    deterministic: bool = False
    seed: int = 42
    num_workers: int = 1
    worker_index: int = 0
    compression: str = "GZIP"

    def __post_init__(self) -> None:
        check_augmentations(self.augment)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {self.batch_size}")
        _ = (self.spec, self.augment_params)  # bad crop settings fail here, naming the field, not at the first batch

    @property
    def spec(self) -> PreprocessingSpec:
        """The preprocessing of evaluation, the same as the exported model's."""
        return PreprocessingSpec(image_size=self.image_size, channels=self.channels, central_crop=self.central_crop)

    @property
    def augment_params(self) -> AugmentParams:
        return AugmentParams(
            crop_area=self.crop_area,
            crop_aspect=self.crop_aspect,
            fallback_crop=self.central_crop,
            scale_range=self.scale_range,
        )

    def input_spec(self, augment: Sequence[str]) -> PreprocessingSpec:
        """`spec`, without the central crop when `crop` augments the images (its random crop replaces it)."""
        return dataclasses.replace(self.spec, central_crop=1.0) if "crop" in augment else self.spec


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
    dataset = _serialized_examples(list_files(file_patterns), options)
    augment = options.augment if options.training else ()
    if options.cache:
        dataset = _cached_inputs(dataset, options, augment)
        dataset = dataset.batch(options.batch_size, drop_remainder=options.training)
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        return dataset.with_options(_dataset_options(options))
    dataset = _shuffled(dataset, options)
    dataset = dataset.enumerate().batch(options.batch_size, drop_remainder=options.training)
    dataset = dataset.map(
        lambda indices, serialized: _read_batch(indices, serialized, options, augment),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=options.deterministic or None,
    )
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(_dataset_options(options))


def _serialized_examples(files: list[str], options: InputOptions) -> tf.data.Dataset:
    """The serialized examples of this worker's share of `files`, files shuffled when training."""
    # Shard by hand: auto-sharding refuses pipelines with a second source (enumerate's counter).
    shard_files = options.num_workers > 1 and len(files) >= options.num_workers
    if shard_files:
        files = files[options.worker_index :: options.num_workers]
    shuffle_files = options.training and not options.deterministic
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        dataset = dataset.shuffle(len(files), seed=options.seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=options.compression),
        cycle_length=min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=options.deterministic or None,
    )
    if options.num_workers > 1 and not shard_files:
        dataset = dataset.shard(options.num_workers, options.worker_index)
    return dataset


def _shuffled(dataset: tf.data.Dataset, options: InputOptions) -> tf.data.Dataset:
    """Training: `dataset` shuffled and repeated forever; evaluation: as it is."""
    if options.training:
        dataset = dataset.shuffle(options.shuffle_buffer, seed=options.seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    return dataset


def _cached_inputs(dataset: tf.data.Dataset, options: InputOptions, augment: tuple[str, ...]) -> tf.data.Dataset:
    """Serialized examples → unbatched (image, label) model inputs, with the decoded images cached in memory."""
    deterministic = options.deterministic or None  # None: follow the dataset options (non-deterministic = faster)
    spec = options.input_spec(augment)
    params = options.augment_params

    def read(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = tf.io.parse_single_example(serialized, _FEATURES)
        return decode_pixels(check_image_formats(features[IMAGE_KEY], spec.max_image_pixels), spec), features[
            LABEL_KEY
        ] - options.label_offset

    def finish(index: tf.Tensor, pixels: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if augment:
            pixels = augment_pixels(pixels, augment, tf.stack([tf.constant(options.seed, tf.int64), index]), params)
        return pixels_to_input(pixels, spec), label

    if not augment:
        # Nothing random per element: cache the finished model inputs, so later epochs only shuffle and batch.
        dataset = dataset.map(
            lambda serialized: finish(tf.constant(0, tf.int64), *read(serialized)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=deterministic,
        ).cache()
        return _shuffled(dataset, options)
    dataset = _shuffled(
        dataset.map(read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic).cache(), options
    )
    return dataset.enumerate().map(
        lambda index, element: finish(index, *element),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )


def _read_batch(
    indices: tf.Tensor, serialized: tf.Tensor, options: InputOptions, augment: tuple[str, ...]
) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of serialized examples (and their element indices, for seeds) → (images, labels)."""
    spec, params = options.input_spec(augment), options.augment_params
    features = tf.io.parse_example(serialized, _FEATURES)
    on_batches = bool(augment) and augment_on_batches(spec.image_size)

    def one_image(index: tf.Tensor, image_bytes: tf.Tensor) -> tf.Tensor:
        pixels = decode_pixels(image_bytes, spec)
        if augment and not on_batches:
            pixels = augment_pixels(pixels, augment, tf.stack([tf.constant(options.seed, tf.int64), index]), params)
        return pixels_to_input(pixels, spec)

    images = tf.map_fn(
        lambda element: one_image(*element),
        (indices, check_image_formats(features[IMAGE_KEY], spec.max_image_pixels)),
        fn_output_signature=tf.TensorSpec(spec.shape, tf.float32),
        parallel_iterations=16,
    )
    if on_batches:
        images = augment_batch(images, augment, tf.stack([tf.constant(options.seed, tf.int64), indices[0]]), params)
    return images, features[LABEL_KEY] - options.label_offset


def _dataset_options(options: InputOptions) -> tf.data.Options:
    dataset_options = tf.data.Options()
    dataset_options.deterministic = options.deterministic
    if options.num_workers > 1:
        dataset_options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset_options
