"""ExampleValidator that stops the pipeline on anomalies, before the Trainer sees bad data.

TFX's ExampleValidator records anomalies and marks its output "not blessed", but nothing downstream
reads that mark, so the Trainer would train on bad data. tfxp fails the component instead, with the
anomalies in words.

Two problems no schema expresses are checked first, from the statistics: a split with 0 records (an empty
eval split would let the Trainer train all epochs, then fail), and `image/encoded` values that are not images.
StatisticsGen computes TFDV's image statistics (`statistics_options`: semantic-domain stats), whose
`image_format_histogram` counts each value's format from its magic bytes, unrecognised ones as UNKNOWN; when
too few values are images TFDV writes no histogram at all, which for a split of 100 or more values says the same.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2
from tfx import types
from tfx.components.example_validator import executor as example_validator_executor
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from components.contract import IMAGE_KEY, LABEL_KEY
from components.validation.label_map_schema import CONTRACT_FEATURES

ANOMALIES_FILE = "SchemaDiff.pb"
# A feature in the eval split that the train split (the schema's source) lacks; only the contract's features
# matter, so for any other feature this is not a problem.
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN
_OUT_OF_RANGE = (anomalies_pb2.AnomalyInfo.INT_TYPE_SMALL_INT, anomalies_pb2.AnomalyInfo.INT_TYPE_BIG_INT)
LABEL_RANGE_HINT = (
    f"labels outside the label map: check data.labels and data.label_offset ({LABEL_KEY} minus the offset must "
    "be a line of the label map, counted from 0; ImageNet's build scripts write 1-based labels, offset 1)"
)


# TFDV's ImageStatsGenerator (`tensorflow_data_validation/statistics/generators/image_stats_generator.py`): the
# custom statistic, its label for unrecognised values, and when it writes one (at least 100 values, 80 % images).
IMAGE_FORMAT_HISTOGRAM = "image_format_histogram"
UNKNOWN_FORMAT = "UNKNOWN"
TFDV_IMAGE_MIN_VALUES = 100
TFDV_IMAGE_MIN_FRACTION = 0.8
TFDV_IMAGE_FORMATS = "JPEG, PNG, GIF or BMP"
# The magic bytes TFDV recognises (its `_IMAGE_FORMAT_SIGNATURES`), for naming the records it counted as UNKNOWN.
IMAGE_SIGNATURES = {"bmp": b"BM", "gif": b"GIF8", "jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}
EMPTY_SPLIT_HINT = (
    "the Trainer needs examples in both splits; `tfxp data inspect DIR` counts the records per split "
    "and file: write the split again, or point data.path (data.train_pattern / data.eval_pattern) at the right files"
)
NOT_IMAGES_HINT = (
    f"{IMAGE_KEY} must hold encoded image files ({TFDV_IMAGE_FORMATS}); re-create the records from image files "
    "(`tfxp data from-folder SRC --out DIR`)"
)


class DataValidationError(RuntimeError):
    """The examples violate the schema, or cannot be trained on; the message lists every problem."""


def statistics_options() -> tfdv.StatsOptions:
    """StatisticsGen's options: TFDV's defaults plus the image statistics `data_problems` reads."""
    return tfdv.StatsOptions(enable_semantic_domain_stats=True)


def _feature_stats(
    statistics: statistics_pb2.DatasetFeatureStatistics, name: str
) -> statistics_pb2.FeatureNameStatistics | None:
    for feature in statistics.features:
        if feature.name == name or list(feature.path.step) == [name]:
            return feature
    return None


def data_problems(split: str, statistics: statistics_pb2.DatasetFeatureStatistics) -> list[str]:
    """What makes a split unusable whatever the schema says: no records, or image values that are not images.

    Args:
        split: The split's name, for the message.
        statistics: The split's statistics from StatisticsGen with `statistics_options()`.

    Returns:
        One line a problem, naming the split, the count and the fix; [] when the split is usable.
    """
    if statistics.num_examples == 0:
        return [f"split '{split}' has 0 records; {EMPTY_SPLIT_HINT}"]
    image = _feature_stats(statistics, IMAGE_KEY)
    kind = image.WhichOneof("stats") if image is not None else None
    if image is None or kind not in ("bytes_stats", "string_stats"):  # TFDV calls bytes without a schema strings
        return []  # a missing or mistyped image feature is the schema's anomaly
    common = getattr(image, kind).common_stats
    values = common.num_non_missing * common.avg_num_values
    histogram = next((stat for stat in image.custom_stats if stat.name == IMAGE_FORMAT_HISTOGRAM), None)
    if histogram is None:
        if values < TFDV_IMAGE_MIN_VALUES:
            return []  # too few values for TFDV's image statistics; the Trainer's decode names a bad format
        return [
            f"split '{split}', feature '{IMAGE_KEY}': fewer than {TFDV_IMAGE_MIN_FRACTION:.0%} of its "
            f"{values:.0f} values are {TFDV_IMAGE_FORMATS} images; {NOT_IMAGES_HINT}"
        ]
    buckets = histogram.rank_histogram.buckets
    unknown = sum(bucket.sample_count for bucket in buckets if bucket.label == UNKNOWN_FORMAT)
    if not unknown:
        return []
    total = sum(bucket.sample_count for bucket in buckets)
    return [
        f"split '{split}', feature '{IMAGE_KEY}': {unknown:.0f} of {total:.0f} values are not "
        f"{TFDV_IMAGE_FORMATS} images; {NOT_IMAGES_HINT}"
    ]


def describe_anomalies(split: str, anomalies: anomalies_pb2.Anomalies) -> list[str]:
    """One line a problem: `split 'eval', feature 'image/class/label': <TFDV's description>`.

    A feature outside the data contract that only the eval split has is not a problem (see `_NEW_COLUMN`).
    """
    lines = []
    for feature, info in sorted(anomalies.anomaly_info.items()):
        kept = [reason for reason in info.reason if feature in CONTRACT_FEATURES or reason.type != _NEW_COLUMN]
        if info.reason and not kept:
            continue
        reasons = "; ".join(reason.description or reason.short_description for reason in kept)
        line = f"split '{split}', feature '{feature}': {reasons or info.description}"
        if feature == LABEL_KEY and any(reason.type in _OUT_OF_RANGE for reason in kept):
            line += f" ({LABEL_RANGE_HINT})"
        lines.append(line)
    if anomalies.HasField("dataset_anomaly_info"):
        info = anomalies.dataset_anomaly_info
        reasons = "; ".join(reason.description for reason in info.reason)
        lines.append(f"split '{split}', whole data set: {reasons or info.description}")
    return lines


class StrictExampleValidatorExecutor(example_validator_executor.Executor):
    """Runs TFX's validation, then raises DataValidationError if any split has anomalies."""

    def Do(  # noqa: N802  (TFX's executor API)
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> Any:
        statistics = artifact_utils.get_single_instance(input_dict[standard_component_specs.STATISTICS_KEY])
        unusable: list[str] = []
        for split in artifact_utils.decode_split_names(statistics.split_names):
            datasets = stats_artifact_utils.load_statistics(statistics, split).proto().datasets
            split_statistics = datasets[0] if datasets else statistics_pb2.DatasetFeatureStatistics()
            unusable.extend(data_problems(split, split_statistics))
        if unusable:  # first: an empty split also shows as schema anomalies that would mislead
            raise DataValidationError(
                "the examples cannot be trained on, so training was not started:\n  - " + "\n  - ".join(unusable)
            )
        result = super().Do(input_dict, output_dict, exec_properties)
        anomalies_artifacts = output_dict[standard_component_specs.ANOMALIES_KEY]
        problems: list[str] = []
        for split in artifact_utils.decode_split_names(anomalies_artifacts[0].split_names):
            path = os.path.join(artifact_utils.get_split_uri(anomalies_artifacts, split), ANOMALIES_FILE)
            anomalies = anomalies_pb2.Anomalies()
            anomalies.ParseFromString(io_utils.read_bytes_file(path))
            problems.extend(describe_anomalies(split, anomalies))
        if problems:
            raise DataValidationError(
                "the examples violate the schema, so training was not started:\n  - "
                + "\n  - ".join(problems)
                + "\nFix the data (see `tfxp data inspect DIR`), or if the data is right, curate the schema "
                "(`data.schema=<path to schema.pbtxt>`)."
            )
        return result


class StrictExampleValidator(ExampleValidator):
    """ExampleValidator whose execution fails when the statistics show anomalies."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(StrictExampleValidatorExecutor)
