"""The image data format `tfxp data` writes: ImageNet-style tf.Examples in sharded GZIP TFRecords.

    DIR/train/part-00000-of-00002.tfrecord.gz    DIR/eval/part-...    DIR/labels.txt

Which files of a data directory a reader reads (this layout and the others `tfxp run` reads) is
`foundation.data.layout`'s rule.

Each example has `image/encoded` (JPEG or PNG bytes), `image/class/label` (int64, 0-based)
and optionally `image/class/text` (the names are in `foundation.contract`, as is the reader and writer
of `labels.txt`). TensorFlow is imported inside the functions that need it, so the image checks stay light.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from foundation.contract import IMAGE_KEY, LABEL_KEY, TEXT_KEY
from foundation.data.errors import DataError
from foundation.data.record_frames import check_record_frames, compression_for, tf_error_text

if TYPE_CHECKING:
    import tensorflow as tf

SPLITS = ("train", "eval")
SHARD_PATTERN = re.compile(r"^part-(\d{5})-of-(\d{5})\.tfrecord\.gz$")
COMPRESSION = "GZIP"

T = TypeVar("T")


def make_example(encoded: bytes, label: int, text: str | None = None) -> tf.train.Example:
    """Builds one image tf.Example.

    Args:
        encoded: JPEG or PNG bytes.
        label: 0-based class index.
        text: Class name; omitted from the example when None.

    Returns:
        The example with `image/encoded`, `image/class/label` and, given `text`, `image/class/text`.
    """
    import tensorflow as tf

    feature = {
        IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
        LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    if text is not None:
        feature[TEXT_KEY] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def shard_name(index: int, count: int) -> str:
    """`part-00003-of-00016.tfrecord.gz` for index 3 of 16."""
    return f"part-{index:05d}-of-{count:05d}.tfrecord.gz"


def shard_bounds(total: int, shards: int) -> list[tuple[int, int]]:
    """Splits `total` records into `shards` contiguous, near-equal [start, stop) ranges."""
    return [(total * index // shards, total * (index + 1) // shards) for index in range(shards)]


def write_shards(
    split_dir: Path,
    records: Sequence[T],
    shards: int,
    serialize: Callable[[T], bytes],
    workers: int = 1,
) -> list[Path]:
    """Writes `records` in order into `shards` GZIP TFRecord files under `split_dir`.

    Shard k holds a contiguous slice, so each file is written by one writer at a time and
    shards can be written in parallel; callers shuffle `records` beforehand.

    Args:
        split_dir: Created if missing; receives `part-NNNNN-of-MMMMM.tfrecord.gz`.
        records: Anything `serialize` turns into a serialized tf.Example.
        shards: Number of files; clamped to [1, len(records)] so no file is empty.
        serialize: Record → serialized tf.Example bytes (may read files; runs in threads).
        workers: Shards written concurrently (the GZIP writer releases the GIL).

    Returns:
        The shard paths, in order.
    """
    import tensorflow as tf

    count = max(1, min(shards, len(records)))
    split_dir.mkdir(parents=True, exist_ok=True)
    paths = [split_dir / shard_name(index, count) for index in range(count)]

    def write(index: int) -> None:
        start, stop = shard_bounds(len(records), count)[index]
        with tf.io.TFRecordWriter(str(paths[index]), options=COMPRESSION) as writer:
            for record in records[start:stop]:
                writer.write(serialize(record))

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(write, range(count)))
    return paths


def iter_examples(files: Iterable[str | Path]) -> Iterator[tf.train.Example]:
    """Reads every tf.Example of the given TFRecord files, in file order (compression from each name).

    Raises:
        DataError: a file's record headers break the length rule (`foundation.data.record_frames`), or a record
            is unreadable (the file and record index named).
    """
    import tensorflow as tf

    for path in files:
        check_record_frames(str(path))
        dataset = tf.data.TFRecordDataset(str(path), compression_type=compression_for(path))
        index = 0
        try:
            for serialized in dataset.as_numpy_iterator():
                yield tf.train.Example.FromString(serialized)
                index += 1
        except tf.errors.OpError as error:
            raise DataError(
                f"cannot read TFRecord file {path} at record {index}: {tf_error_text(error)}; rewrite the file "
                "(`tfxp data from-folder`) or remove it from the data"
            ) from None


def read_label_ids(files: Sequence[str | Path], batch_size: int = 4096) -> Iterator[list[int]]:
    """Yields batches of `image/class/label` values, parsing only that feature (fast counting).

    Files are read in parallel (compression from each name, as ImportExampleGen reads them), so the order is not
    the file order; use `iter_examples` for that.

    Raises:
        DataError: a file is not a TFRecord of examples with one int64 label.
    """
    import tensorflow as tf

    spec = {LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    by_compression: dict[str, list[str]] = {}
    for path in files:
        by_compression.setdefault(compression_for(path), []).append(str(path))
    for path in files:
        check_record_frames(str(path))
    for compression, paths in sorted(by_compression.items()):
        dataset = (
            tf.data.TFRecordDataset(paths, compression_type=compression, num_parallel_reads=4)
            .batch(batch_size)
            .map(lambda batch: tf.io.parse_example(batch, spec)[LABEL_KEY])
        )
        try:
            for labels in dataset.as_numpy_iterator():
                yield labels.tolist()
        except tf.errors.OpError as error:
            names = ", ".join(Path(path).name for path in paths[:3]) + (", ..." if len(paths) > 3 else "")
            kind = "GZIP TFRecords" if compression else "uncompressed TFRecords (the names do not end in .gz)"
            raise DataError(
                f"cannot read labels from {Path(paths[0]).parent} ({names}): {tf_error_text(error)}; "
                f"expected {kind} of tf.Examples with an int64 `{LABEL_KEY}`, as `tfxp data` writes"
            ) from None
