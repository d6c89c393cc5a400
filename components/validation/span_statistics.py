"""Per-span statistics for the drift checks: TFDV statistics of each span's labels and image properties, cached.

A span is read once: every record's label, and the first `data.drift.image_sample` images of each split decoded
into the properties a camera, a source or a preprocessing change moves (`PROPERTY_FEATURES`: height, width,
channels, format, brightness and contrast, the mean and standard deviation of the grey levels over 255). Those
per-record values are features; TFDV computes their statistics (`tfdv.generate_statistics_from_dataframe`: the
histograms and rank histograms its drift and skew comparators read), so the distances are TFDV's own.

The per-record values are cached under `<pipeline.output>/statistics/span-N/<key>/` (`statistics_cache_dir`),
keyed by the span's fingerprint (`components.data.fingerprint.DataFiles`: its files' names, sizes and times) and
the sample size: a span whose files have not changed is not read again, on any orchestrator (the Kubeflow pods
find the same cache under the same `pipeline.output`). Nothing is ever written into `data.path`. The statistics
of any set of spans (the previous spans, pooled) are then a TFDV pass over the cached tables, a fraction of a
second on digits.

Example:
    tables = span_tables("data/digits-stream", "span-4", 4, {"train": "train/*", "eval": "eval/*"}, cache, 1000)
    statistics = split_statistics(tables["train"])
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import tensorflow as tf
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import statistics_pb2

from components.data.fingerprint import DataFiles
from components.validation.image_content import THUMBNAIL_FEATURE, thumbnail
from foundation.contract import IMAGE_KEY, LABEL_KEY
from foundation.data.tfrecords import compression_for
from foundation.image_formats import detect_image_format

logger = logging.getLogger(__name__)

STATISTICS_DIR = "statistics"
# Bump when the per-record values change meaning: older cache entries are then not read.
TABLE_VERSION = 2  # 2: the image thumbnails (`image_content`)
LABEL_FEATURE = "label"
FORMAT_FEATURE = "format"
NUMERIC_PROPERTIES = ("height", "width", "channels", "brightness", "contrast")
PROPERTY_FEATURES = (*NUMERIC_PROPERTIES, FORMAT_FEATURE)
_TABLE_FILE = "{split}.parquet"
_STATISTICS_FILE = "statistics.pb"
_RECORD_FILE = "span.json"


def statistics_cache_dir(output: str) -> str:
    """`<pipeline.output>/statistics`: where the per-span values live (never under `data.path`)."""
    return f"{output.rstrip('/')}/{STATISTICS_DIR}"


@dataclass(frozen=True)
class SpanSplitFiles:
    """One span's files, split by split.

    Attributes:
        span: The span number.
        folder: The span folder's name under `data.path` (`span-4`).
        splits: Split name → the split's files (sorted paths).
        data_files: Every file with its size and time, whose fingerprint keys the cache.
    """

    span: int
    folder: str
    splits: Mapping[str, tuple[str, ...]]
    data_files: DataFiles


def span_split_files(input_base: str, folder: str, span: int, split_patterns: Mapping[str, str]) -> SpanSplitFiles:
    """The files of span `folder` under `input_base`, per split (`split_patterns`: name → glob inside the span)."""
    splits: dict[str, tuple[str, ...]] = {}
    stats = []
    for split, pattern in split_patterns.items():
        matched = tf.io.gfile.glob(posixpath.join(input_base, folder, pattern))
        paths = sorted(path for path in matched if not tf.io.gfile.isdir(path))
        splits[split] = tuple(paths)
        for path in paths:
            stat = tf.io.gfile.stat(path)
            stats.append((path, int(stat.length), int(stat.mtime_nsec)))
    return SpanSplitFiles(span, folder, splits, DataFiles(spans=(span,), files=tuple(sorted(stats))))


def cache_key(files: SpanSplitFiles, image_sample: int) -> str:
    """16 hex digits of the span's fingerprint, the sample size and `TABLE_VERSION`."""
    text = f"{files.data_files.fingerprint()}|sample={image_sample}|v{TABLE_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_properties(encoded: bytes) -> dict[str, float | str | bytes | None]:
    """Height, width, channels, format, brightness and contrast (grey-level mean and deviation over 255), and the
    grey thumbnail the content check compares (`image_content.thumbnail`).

    Values that cannot be decoded get the format and NaN properties (the validator's format check names them).
    """
    from PIL import Image

    name = detect_image_format(encoded)
    try:
        with Image.open(io.BytesIO(encoded)) as image:
            channels = len(image.getbands())
            grey = np.asarray(image.convert("L"), dtype=np.float32) / 255.0
            width, height = image.size
            small = thumbnail(image)
    except (OSError, ValueError):
        return {"height": np.nan, "width": np.nan, "channels": np.nan, "brightness": np.nan, "contrast": np.nan,
                FORMAT_FEATURE: name, THUMBNAIL_FEATURE: None}  # fmt: skip
    return {
        "height": float(height),
        "width": float(width),
        "channels": float(channels),
        "brightness": float(grey.mean()),
        "contrast": float(grey.std()),
        FORMAT_FEATURE: name,
        THUMBNAIL_FEATURE: small,
    }


def read_split_table(paths: Sequence[str], image_sample: int) -> pd.DataFrame:
    """One row a record: its label (as text: a category for TFDV) and, for the first `image_sample`, the image
    properties (missing after that)."""
    rows: list[dict[str, object]] = []
    for path in paths:
        for record in tf.data.TFRecordDataset(path, compression_type=compression_for(path)).as_numpy_iterator():
            example = tf.train.Example.FromString(record)
            feature = example.features.feature
            labels = feature[LABEL_KEY].int64_list.value if LABEL_KEY in feature else []
            row: dict[str, object] = {LABEL_FEATURE: str(labels[0]) if labels else None}
            images = feature[IMAGE_KEY].bytes_list.value if IMAGE_KEY in feature else []
            if len(rows) < image_sample and images:
                row.update(image_properties(images[0]))
            rows.append(row)
    table = pd.DataFrame(rows, columns=[LABEL_FEATURE, *PROPERTY_FEATURES, THUMBNAIL_FEATURE])
    for column in NUMERIC_PROPERTIES:
        table[column] = table[column].astype("float64")
    return table


def span_entry(cache_dir: str, files: SpanSplitFiles, image_sample: int) -> str:
    """`<cache_dir>/span-N/<cache_key>`: the folder of one version of a span's values."""
    return f"{cache_dir.rstrip('/')}/{files.folder}/{cache_key(files, image_sample)}"


def span_tables(files: SpanSplitFiles, cache_dir: str, image_sample: int) -> tuple[dict[str, pd.DataFrame], bool]:
    """The span's per-record values per split, from the cache when its files are unchanged.

    Returns:
        (split → table, whether it came from the cache).
    """
    entry = span_entry(cache_dir, files, image_sample)
    tf.io.gfile.makedirs(entry)
    table_paths = {split: f"{entry}/{_TABLE_FILE.format(split=split)}" for split in files.splits}
    if all(tf.io.gfile.exists(path) for path in table_paths.values()):
        tables = {}
        for split, path in table_paths.items():
            with tf.io.gfile.GFile(path, "rb") as handle:
                tables[split] = pd.read_parquet(io.BytesIO(handle.read()))
        return tables, True
    started = time.monotonic()
    tables = {split: read_split_table(paths, image_sample) for split, paths in files.splits.items()}
    statistics = statistics_pb2.DatasetFeatureStatisticsList()
    for split, table in tables.items():
        dataset = statistics.datasets.add()
        dataset.CopyFrom(split_statistics(table).datasets[0])
        dataset.name = split
    _write(f"{entry}/{_STATISTICS_FILE}", statistics.SerializeToString())
    _write(
        f"{entry}/{_RECORD_FILE}",
        json.dumps(
            {"span": files.span, "fingerprint": files.data_files.fingerprint(), "image_sample": image_sample}
        ).encode(),
    )
    for split, table in tables.items():  # the tables last: their presence marks a complete entry
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        _write(table_paths[split], buffer.getvalue())
    logger.info("drift: statistics of %s computed in %.1f s (%s)", files.folder, time.monotonic() - started, entry)
    return tables, False


def split_statistics(table: pd.DataFrame) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's statistics of a table of per-record values (rows without image properties count as missing); the
    thumbnails are left to the content check (`image_content`)."""
    columns = [column for column in table.columns if column != THUMBNAIL_FEATURE]
    return tfdv.generate_statistics_from_dataframe(table[columns], stats_options=tfdv.StatsOptions(num_top_values=50))


def pooled(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The rows of several spans' tables, as one table (the previous spans, compared as one distribution)."""
    return pd.concat(list(tables), ignore_index=True)


def _write(path: str, data: bytes) -> None:
    with tf.io.gfile.GFile(path, "wb") as handle:
        handle.write(data)
