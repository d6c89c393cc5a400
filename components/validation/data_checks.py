"""What makes a split unusable whatever the schema says: no records, or `image/encoded` values that are not images.

An empty eval split would let the Trainer train every epoch and then fail; values that are not images would
fail it two seconds in, naming no record. Both are caught from StatisticsGen's statistics, before the Trainer:

- the record count of each split;
- TFDV's image statistics (`statistics_options`: semantic-domain stats), whose `image_format_histogram` counts
  each value's format from its magic bytes, unrecognised ones as UNKNOWN. TFDV writes the histogram only for a
  feature with 100 values or more of which 80 % are images, so its absence at 100 values or more says the same.

TFDV knows JPEG, PNG, GIF and BMP; the model also accepts WebP (`foundation.image_formats`). So where TFDV flags
values, and the split's examples are at hand, they are read once and judged by the model's own rule
(`served_format_error`): only values the served model would refuse count, by format.

Example:
    problems = data_problems("eval", statistics, functools.partial(count_refused_images, "Split-eval/*"))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import tensorflow as tf
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import statistics_pb2

from foundation.contract import IMAGE_KEY, LABEL_KEY, SYNSET_KEY, TEXT_KEY
from foundation.data.class_match import class_problems
from foundation.data.probe import LabelEvidence
from foundation.image_formats import ACCEPTED_TEXT, HEADER_BYTES, UNKNOWN, detect_image_format, served_format_error

# TFDV's ImageStatsGenerator (`tensorflow_data_validation/statistics/generators/image_stats_generator.py`): the
# custom statistic, its label for unrecognised values, and when it writes one (at least 100 values, 80 % images).
IMAGE_FORMAT_HISTOGRAM = "image_format_histogram"
UNKNOWN_FORMAT = "UNKNOWN"
TFDV_IMAGE_MIN_VALUES = 100
TFDV_IMAGE_MIN_FRACTION = 0.8
TFDV_IMAGE_FORMATS = "JPEG, PNG, GIF or BMP"
EMPTY_SPLIT_HINT = (
    "the Trainer needs examples in both splits; `tfxp data inspect DIR` counts the records per split "
    "and file: write the split again, or point data.path (data.train_pattern / data.eval_pattern) at the right files"
)
NOT_IMAGES_HINT = (
    f"{IMAGE_KEY} must hold encoded images the model accepts ({ACCEPTED_TEXT}); re-create the records from "
    "image files (`tfxp data from-folder SRC --out DIR`)"
)
CLASSES_HINT = (
    "the examples are of other classes than the label map: point data.labels at their label map, or keep these "
    "examples out of data.path (a span of other classes belongs in another directory; `tfxp data` refuses to "
    "write one beside this label map)"
)
_READ_BATCH = 1024
_CLASS_FEATURES = {LABEL_KEY: tf.int64, SYNSET_KEY: tf.string, TEXT_KEY: tf.string}


@dataclass(frozen=True)
class RefusedImages:
    """`image/encoded` values of a split judged by the served model's format rule.

    Attributes:
        values: Values read (records without the feature are the schema's concern, not counted).
        refused: Values the model refuses, by detected format (`unknown` when no format matched).
    """

    values: int
    refused: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        """How many values the model refuses."""
        return sum(self.refused.values())


def statistics_options() -> tfdv.StatsOptions:
    """StatisticsGen's options: TFDV's defaults plus the image statistics `data_problems` reads."""
    return tfdv.StatsOptions(enable_semantic_domain_stats=True)


def refused_format(value: bytes) -> str | None:
    """None when the served model accepts `value`'s format, else the format it refuses (`not an image`)."""
    if served_format_error(value) is None:
        return None
    name = detect_image_format(value)
    return name if name != UNKNOWN else "not an image"


def count_refused_images(file_pattern: str, compression: str = "GZIP") -> RefusedImages:
    """Reads a split's `image/encoded` values (their first bytes only) and counts those the model refuses.

    Args:
        file_pattern: The split's TFRecord files, e.g. an Examples artifact's `Split-train/*`.
        compression: Of the files; ExampleGen writes GZIP.
    """
    files = tf.io.gfile.glob(file_pattern)
    feature = {IMAGE_KEY: tf.io.VarLenFeature(tf.string)}
    dataset = tf.data.TFRecordDataset(files, compression_type=compression).batch(_READ_BATCH)
    dataset = dataset.map(
        lambda records: tf.strings.substr(tf.io.parse_example(records, feature)[IMAGE_KEY].values, 0, HEADER_BYTES),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    values, refused = 0, Counter[str]()
    for heads in dataset.as_numpy_iterator():
        values += len(heads)
        refused.update(name for name in map(refused_format, heads) if name is not None)
    return RefusedImages(values, refused)


def names_classes(statistics: statistics_pb2.DatasetFeatureStatistics) -> bool:
    """Whether any example of the split carries an `image/class/synset` or `image/class/text` (else its classes
    cannot be matched with the label map, and `read_class_evidence` need not read the split)."""
    for feature in statistics.features:
        name = feature.name or "/".join(feature.path.step)
        kind = feature.WhichOneof("stats")
        named = name in (SYNSET_KEY, TEXT_KEY) and kind in ("bytes_stats", "string_stats")
        if named and getattr(feature, kind).common_stats.num_non_missing > 0:
            return True
    return False


def read_class_evidence(file_pattern: str, compression: str = "GZIP") -> Counter[LabelEvidence]:
    """How many examples of a split carry each (label, synset, text), every example read (only those features).

    Examples without exactly one label are left out (the schema reports them).
    """
    files = tf.io.gfile.glob(file_pattern)
    features = {key: tf.io.RaggedFeature(dtype) for key, dtype in _CLASS_FEATURES.items()}

    def firsts(records: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(records, features)
        first = {key: value.to_tensor(shape=[None, 1])[:, 0] for key, value in parsed.items()}
        return {**first, "labels": parsed[LABEL_KEY].row_lengths()}

    dataset = tf.data.TFRecordDataset(files, compression_type=compression).batch(_READ_BATCH)
    seen = Counter[LabelEvidence]()
    for batch in dataset.map(firsts, num_parallel_calls=tf.data.AUTOTUNE).as_numpy_iterator():
        for count, label, synset, text in zip(
            batch["labels"], batch[LABEL_KEY], batch[SYNSET_KEY], batch[TEXT_KEY], strict=True
        ):
            if count == 1:
                seen[LabelEvidence(int(label), _decoded(synset), _decoded(text))] += 1
    return seen


def _decoded(value: bytes) -> str:
    return value.decode("utf-8", "replace").strip()


def class_mismatches(split: str, evidence: Counter[LabelEvidence], names: list[str], label_offset: int) -> list[str]:
    """`foundation.data.class_match.class_problems` of a split, one line each, naming the split and the fix."""
    return [f"split '{split}': {problem}; {CLASSES_HINT}" for problem in class_problems(evidence, names, label_offset)]


def data_problems(
    split: str,
    statistics: statistics_pb2.DatasetFeatureStatistics,
    count_refused: Callable[[], RefusedImages] | None = None,
) -> list[str]:
    """What makes a split unusable whatever the schema says: no records, or image values that are not images.

    Args:
        split: The split's name, for the message.
        statistics: The split's statistics from StatisticsGen with `statistics_options()`.
        count_refused: Reads the split and judges its values by the model's rule (`count_refused_images`);
            called only when TFDV flags values. None = TFDV's verdict stands.

    Returns:
        One line a problem, naming the split, the count and the fix; [] when the split is usable.
    """
    if statistics.num_examples == 0:
        return [f"split '{split}' has 0 records; {EMPTY_SPLIT_HINT}"]
    suspect = _tfdv_suspects(split, statistics)
    if suspect is None:
        return []
    if count_refused is None:
        return [f"{suspect}; {NOT_IMAGES_HINT}"]
    judged = count_refused()
    if not judged.count:
        return []  # e.g. WebP, which TFDV does not know and the model accepts
    formats = ", ".join(f"{count} {name}" for name, count in judged.refused.most_common())
    return [
        f"split '{split}', feature '{IMAGE_KEY}': {judged.count} of {judged.values} values are not images the "
        f"model accepts ({formats}); {NOT_IMAGES_HINT}"
    ]


def _tfdv_suspects(split: str, statistics: statistics_pb2.DatasetFeatureStatistics) -> str | None:
    """TFDV's reason to suspect the split's image values, or None."""
    image = next((f for f in statistics.features if f.name == IMAGE_KEY or list(f.path.step) == [IMAGE_KEY]), None)
    kind = image.WhichOneof("stats") if image is not None else None
    if image is None or kind not in ("bytes_stats", "string_stats"):  # TFDV calls bytes without a schema strings
        return None  # a missing or mistyped image feature is the schema's anomaly
    common = getattr(image, kind).common_stats
    values = common.num_non_missing * common.avg_num_values
    histogram = next((stat for stat in image.custom_stats if stat.name == IMAGE_FORMAT_HISTOGRAM), None)
    if histogram is None:
        if values < TFDV_IMAGE_MIN_VALUES:
            return None  # too few values for TFDV's image statistics; the Trainer's decode names a bad format
        return (
            f"split '{split}', feature '{IMAGE_KEY}': fewer than {TFDV_IMAGE_MIN_FRACTION:.0%} of its {values:.0f} "
            f"values are {TFDV_IMAGE_FORMATS} images"
        )
    buckets = histogram.rank_histogram.buckets
    unknown = sum(bucket.sample_count for bucket in buckets if bucket.label == UNKNOWN_FORMAT)
    if not unknown:
        return None
    total = sum(bucket.sample_count for bucket in buckets)
    return (
        f"split '{split}', feature '{IMAGE_KEY}': {unknown:.0f} of {total:.0f} values are not {TFDV_IMAGE_FORMATS} "
        "images"
    )
