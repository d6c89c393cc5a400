"""Labelled images of one split, decoded with the trainer's shared preprocessing inside the tf.data pipeline.

Reads the data contract's tf.Examples (`image/encoded`, `image/class/label`) from a data directory in any layout
`tfxp run` reads (`foundation.data.layout`) or from a TFX Examples artifact (`URI/Split-<split>/*`).

Example:
    spec = PreprocessingSpec(image_size=32, channels=1)
    calibration = load_split("data/digits", "train", spec, limit=200, shuffle=True)
    calibration.images.shape  # (200, 32, 32, 1), float32 in [0, 1]: what the SavedModel takes
    calibration.frames.shape  # (200, 32, 32, 3), uint8 RGB: what the device model takes
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from edge.errors import EdgeError
from foundation.bounded import parse_json, read_document
from foundation.contract import EDGE_METADATA_FILE, IMAGE_KEY, LABEL_KEY, LABELS_FILE, read_label_map
from foundation.data.errors import DataError
from foundation.data.layout import DataSpec, read_directory
from foundation.data.probe import FileProbe, glob_files
from foundation.data.record_frames import record_frames_problem, tf_error_text
from foundation.preprocessing import center_crop, preprocess_image_bytes
from foundation.preprocessing_spec import PreprocessingSpec

_GZIP_MAGIC = b"\x1f\x8b"
_BATCH = 64


@dataclass(frozen=True)
class LabeledImages:
    """Preprocessed images and camera frames of the same examples, with their 0-based labels.

    Attributes:
        images: float32 [N, H, W, C] in [0, 1] (the `serving_preprocessed` input).
        frames: uint8 [N, H, W, 3] RGB at the model's size (the device model's input, `edge.camera`): decoded
            to RGB, cropped to the central square of `spec.central_crop` of the shorter side (the serving crop,
            which an app asks MediaPipe for as its region of interest) and resized bilinear, as an app's
            classifier resizes a camera frame.
        labels: int64 [N], 0-based (after subtracting the label offset).
        digest: SHA-256 of the serialized records, in order: the sample's identity (what went into a calibrated
            model), the same whatever the process-wide TensorFlow, Python and NumPy seeds are.
        encoded: The encoded images as the records hold them (what an app decodes into frames of their own size,
            `edge.app_frames`).
    """

    images: np.ndarray
    labels: np.ndarray
    frames: np.ndarray
    digest: str = ""
    encoded: tuple[bytes, ...] = ()

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def example_files(examples: str | Path, split: str) -> list[str]:
    """The TFRecord files of one split: a TFX Examples artifact's `Split-<split>/*`, or the split of a data
    directory as `tfxp run` reads it (`foundation.data.layout`: every layout, every span folder).

    Args:
        examples: A data directory or a TFX Examples artifact URI.
        split: Split name, e.g. `train` or `eval`.

    Returns:
        Sorted file paths (non-empty).

    Raises:
        EdgeError: neither an artifact split nor a data directory the rule reads, or data split by hash buckets
            (whose train and eval exist only in a run's Examples artifact).
    """
    root = str(examples).rstrip("/")
    artifact = f"{root}/Split-{split}"
    if tf.io.gfile.isdir(artifact):
        files = glob_files(f"{artifact}/*")
        if files:
            return files
        raise EdgeError(f"the TFX Examples artifact split {artifact} holds no files; pass another Examples artifact")
    try:
        data = read_directory(DataSpec(root, label_offset=0), FileProbe())
    except DataError as error:
        raise EdgeError(
            f"no `{split}` examples under {root}: {error} (or pass a TFX Examples artifact, whose splits are "
            f"{root}/Split-<split>/)"
        ) from None
    if split not in data.files:
        raise EdgeError(
            f"{root} is split into train and eval by hash buckets only in a run ({data.spec.file_pattern}); pass "
            "that run's Examples artifact (OUT/<pipeline>/root/ImportExampleGen/examples/N) instead"
        )
    return data.files[split]


def _compression(path: str) -> str:
    # TFX names its gzipped shards `*.gz`, tfxp data `*.tfrecord.gz`; the magic number covers any other name.
    with tf.io.gfile.GFile(path, "rb") as handle:
        return "GZIP" if handle.read(2) == _GZIP_MAGIC else ""


def camera_frame(image_bytes: tf.Tensor, spec: PreprocessingSpec) -> tf.Tensor:
    """One encoded image as the device model sees it: RGB uint8 [image_size, image_size, 3], the same central
    crop (`spec.central_crop`, `foundation.preprocessing.center_crop`) as serving, then resized."""
    rgb = tf.io.decode_image(image_bytes, channels=3, expand_animations=False)
    if spec.central_crop < 1.0:
        rgb = center_crop(rgb, spec.central_crop)
    size = spec.image_size
    resized = tf.image.resize(tf.cast(rgb, tf.float32), [size, size], method="bilinear")
    frame = tf.cast(tf.round(tf.clip_by_value(resized, 0.0, 255.0)), tf.uint8)
    return tf.ensure_shape(frame, (size, size, 3))


def _parse_and_preprocess(
    records: tf.Tensor, spec: PreprocessingSpec
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    # Runs inside tf.data's graph, batches in parallel: decoding eagerly, one op at a time, cost ~100x the
    # model's own time per image (issue 15).
    features = {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    parsed = tf.io.parse_example(records, features)
    images = preprocess_image_bytes(parsed[IMAGE_KEY], spec)  # checks the formats first
    frames = tf.map_fn(
        lambda image_bytes: camera_frame(image_bytes, spec),
        parsed[IMAGE_KEY],
        fn_output_signature=tf.TensorSpec((spec.image_size, spec.image_size, 3), tf.uint8),
        parallel_iterations=16,
    )
    return images, frames, parsed[LABEL_KEY], parsed[IMAGE_KEY]


def load_split(
    examples: str | Path,
    split: str,
    spec: PreprocessingSpec,
    limit: int | None = None,
    label_offset: int = 0,
    shuffle: bool = False,
    seed: int = 0,
) -> LabeledImages:
    """Reads, decodes and preprocesses the examples of one split.

    Args:
        examples: A `tfxp data` directory or a TFX Examples artifact URI.
        split: Split name, e.g. `train` or `eval`.
        spec: The model's preprocessing (image size, channels and central crop).
        limit: Read at most this many examples; None or 0 = all.
        label_offset: Subtracted from `image/class/label` (1 for 1-based label sets).
        shuffle: Draw a seeded random sample instead of the first examples (calibration data should cover
            every class, and shards are often written class by class); the sample depends on `seed` and the
            records alone, not on any process-wide seed.
        seed: Seed for `shuffle`.

    Returns:
        The images and labels, in file order unless `shuffle`.

    Raises:
        EdgeError: no files, records without `image/encoded`/`image/class/label`, undecodable images,
            or labels below zero after the offset.
    """
    files = example_files(examples, split)
    records = _sample_records(files, limit, shuffle, seed, split)
    result = _decode(records, spec, label_offset, f"the `{split}` examples in {files[0]} and siblings")
    if result.labels.min() < 0:
        raise EdgeError(
            f"label {int(result.labels.min() + label_offset)} in the `{split}` split is below the label offset "
            f"{label_offset}; labels must be ≥ the offset (set data.label_offset to 0 for 0-based labels)"
        )
    return result


def sample_records(examples: str | Path, split: str, limit: int, seed: int = 0) -> list[bytes]:
    """A seeded random sample of at most `limit` serialized records of one split: the records `load_split` with
    `shuffle=True` decodes, for readers that need the tf.Examples themselves (the load check sends them to a
    server).

    Raises:
        EdgeError: as `load_split`, for files or records that cannot be read.
    """
    return _sample_records(example_files(examples, split), limit, True, seed, split)


def _decode(records: list[bytes], spec: PreprocessingSpec, label_offset: int, where: str) -> LabeledImages:
    """The records' images, frames and offset labels, decoded in tf.data batches, with the records' digest."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(len(record).to_bytes(8, "little") + record)
    images, frames, labels, encoded = [], [], [], []
    try:
        for batch_images, batch_frames, batch_labels, batch_encoded in (
            tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
            .batch(_BATCH)
            .map(functools.partial(_parse_and_preprocess, spec=spec), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
        ):
            images.append(batch_images.numpy())
            frames.append(batch_frames.numpy())
            labels.append(batch_labels.numpy() - label_offset)
            encoded.extend(batch_encoded.numpy().tolist())
    except tf.errors.InvalidArgumentError as error:
        raise EdgeError(
            f"cannot read {where}: {error.message.splitlines()[0]}; "
            f"each record must be a tf.Example with `{IMAGE_KEY}` (JPEG/PNG bytes) and `{LABEL_KEY}` (int64)"
        ) from None
    return LabeledImages(
        images=np.concatenate(images),
        labels=np.concatenate(labels).astype(np.int64),
        frames=np.concatenate(frames),
        digest=digest.hexdigest(),
        encoded=tuple(encoded),
    )


def _sample_records(files: list[str], limit: int | None, shuffle: bool, seed: int, split: str) -> list[bytes]:
    """The serialized records of the sample, in the order they are used.

    The sample is drawn with NumPy generators of their own (`seed`), never with tf.data's shuffle: that one mixes
    the op seed with the process-wide `tf.random.set_seed`, which the Trainer sets, so a cached Trainer (no seed
    set in this process) drew another calibration sample and so made another int8 model.
    """
    rng = np.random.default_rng(seed)
    if shuffle:
        files = [files[index] for index in rng.permutation(len(files))]
    dataset = tf.data.TFRecordDataset(files, compression_type=_compression(files[0]))
    # A bounded pool when sampling: enough to mix classes (shards are often class by class) without reading a
    # large split whole.
    pool = max(1024, 4 * limit) if shuffle and limit else limit
    for path in files:
        problem = record_frames_problem(path, records=pool or None)
        if problem is not None:
            raise EdgeError(f"cannot read the `{split}` records in {path}: {problem}; rewrite or remove the file")
    if pool:
        dataset = dataset.take(pool)
    records: list[bytes] = []
    try:
        for batch in dataset.batch(1024):
            records.extend(batch.numpy().tolist())
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
        raise EdgeError(
            f"cannot read the `{split}` records in {files[0]} and siblings: {tf_error_text(error)}; "
            "the split must hold TFRecord files (GZIP or uncompressed)"
        ) from None
    if not records:
        raise EdgeError(f"the `{split}` split in {files[0]} and siblings holds no records ({len(files)} empty files)")
    if shuffle:
        records = [records[index] for index in rng.permutation(len(records))]
    return records[:limit] if limit else records


def central_crop_near(model: Path) -> float:
    """The serving crop of the device model at `model`, from the `edge_metadata.json` the EdgeExporter wrote
    beside it (`normalization.central_crop`); 1.0 (the whole frame) when there is none or it does not say.

    `tfxp edge eval` and `tfxp edge verify` feed frames cropped by it, so a model trained with
    `trainer.eval_crop` < 1 is judged on the pixels TF Serving and the app (MediaPipe's region of interest) use.
    """
    metadata = model.parent / EDGE_METADATA_FILE
    try:
        recorded = parse_json(read_document(metadata, str(metadata))).get("normalization", {}).get("central_crop", 1.0)
    except (OSError, ValueError, AttributeError):
        return 1.0
    return float(recorded) if isinstance(recorded, int | float) and 0 < recorded <= 1 else 1.0


def frame_spec_near(image_shape: tuple[int, int, int], model: Path) -> PreprocessingSpec:
    """How to make frames for the device model at `model` whose input is `image_shape` (height, width, channels):
    its size, RGB, and the serving crop recorded beside it (`central_crop_near`).

    Raises:
        EdgeError: the input is not a square RGB frame (not a tfxp device model).
    """
    height, width, channels = image_shape
    if height != width or channels != 3:
        raise EdgeError(
            f"{model} takes {height}×{width}×{channels} inputs; tfxp device models take square RGB frames "
            "(convert it again with `tfxp edge convert`)"
        )
    return PreprocessingSpec(height, channels, central_crop=central_crop_near(model))


def labels_near(model: Path, examples: Path) -> list[str]:
    """The class names for the device model at `model`: the EdgeModel keeps `labels.txt` beside `model.tflite`,
    a `tfxp data` directory keeps it at its top; [] when neither has one."""
    for candidate in (model.parent / LABELS_FILE, examples / LABELS_FILE):
        if candidate.is_file():
            return read_label_map(candidate)
    return []
