"""Readers of the artifacts the report shows, each from one artifact directory: local, or a bucket on Kubeflow.

StatisticsGen's statistics (examples per split and class), ExampleValidator's anomalies, the Trainer's TensorBoard
scalars and the SavedModel's size. Files are read through `tf.io.gfile` (`foundation.paths`), so a
`gs://` pipeline root reads like a local one; TensorFlow, its protos and TensorBoard load inside the functions
that need them. Each raises what its library raises for an unreadable file; the caller records that as a problem.

Example:
    counts_from_statistics("OUT/tfxp-digits/root/StatisticsGen/statistics/3")
    # {"train": {"examples": 1438, "classes": {"0": 142, ...}}, "eval": {...}}
"""

from __future__ import annotations

import posixpath
from typing import Any

from foundation import paths
from foundation.bounded import parse_json, read_document
from foundation.contract import TEXT_KEY

SPLIT_PREFIX = "Split-"
"""TFX writes each split of an artifact into `Split-<name>/`."""
STATISTICS_FILE = "FeatureStats.pb"
ANOMALIES_FILE = "SchemaDiff.pb"
DRIFT_FILE = "drift.json"
"""Every distance the drift checks measured, in the ExampleValidator's anomalies artifact
(`components.validation.strict_example_validator`)."""
MANIFEST_FILE = "tfxp_dataset.json"  # written by `tfxp data` beside the TFRecords (components.data.dataset)
CURVE_RUNS = ("train", "validation")
"""The subdirectories Keras' TensorBoard callback writes scalars into."""
EPOCH_PREFIX = "epoch_"


def split_dirs(uri: str) -> dict[str, str]:
    """Split name → `Split-<name>` directory of a TFX artifact, train and eval first."""
    split_dirs = paths.children(uri, f"{SPLIT_PREFIX}*")
    found = {posixpath.basename(path)[len(SPLIT_PREFIX) :]: path for path in split_dirs if paths.is_dir(path)}
    order = {"train": 0, "eval": 1}
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], 2), item[0])))


def counts_from_statistics(statistics_uri: str) -> dict[str, dict[str, Any]]:
    """Examples per split, and per class when the examples carry `image/class/text` (TFDV counts each value).

    Args:
        statistics_uri: StatisticsGen's `statistics` artifact directory.

    Returns:
        {split: {"examples": n, "classes": {class name: n}}}; "classes" is {} without class names.
    """
    from tensorflow_metadata.proto.v0 import statistics_pb2

    counts: dict[str, dict[str, Any]] = {}
    for split, directory in split_dirs(statistics_uri).items():
        statistics = statistics_pb2.DatasetFeatureStatisticsList()
        statistics.ParseFromString(paths.read_bytes(f"{directory}/{STATISTICS_FILE}"))
        dataset = statistics.datasets[0]
        classes: dict[str, int] = {}
        for feature in dataset.features:
            if "/".join(feature.path.step) == TEXT_KEY and feature.HasField("string_stats"):
                buckets = feature.string_stats.rank_histogram.buckets
                classes = {bucket.label: int(bucket.sample_count) for bucket in buckets}
        counts[split] = {"examples": int(dataset.num_examples), "classes": classes}
    return counts


def drift_record(anomalies_uri: str) -> dict[str, Any] | None:
    """The drift checks' record (`drift.json`: findings, stops, warnings, accepted, label_counts, timings); None
    when the ExampleValidator ran without them."""
    path = f"{anomalies_uri.rstrip('/')}/{DRIFT_FILE}"
    if not paths.is_file(path):
        return None
    record = parse_json(read_document(path, f"drift record {path}"))
    return record if isinstance(record, dict) else None


def counts_from_manifest(data_path: str) -> dict[str, dict[str, Any]] | None:
    """Examples per split and class from the manifest `tfxp data` writes; None when `data_path` has none."""
    path = f"{data_path.rstrip('/')}/{MANIFEST_FILE}"
    if not paths.is_file(path):
        return None
    manifest = parse_json(read_document(path, f"data set manifest {path}"))
    return {
        split: {"examples": sum(per_class.values()), "classes": dict(per_class)}
        for split, per_class in manifest.get("counts", {}).items()
    }


def anomaly_lines(anomalies_uri: str) -> list[str]:
    """One line per anomaly ExampleValidator found, `split: feature: description`; [] when there are none."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    lines = []
    for split, directory in split_dirs(anomalies_uri).items():
        anomalies = anomalies_pb2.Anomalies()
        anomalies.ParseFromString(paths.read_bytes(f"{directory}/{ANOMALIES_FILE}"))
        for feature, info in sorted(anomalies.anomaly_info.items()):
            lines.append(f"{split}: {feature}: {info.short_description or info.description}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            lines.append(f"{split}: data set: {info.short_description or info.description}")
    return lines


def epoch_curves(model_run_uri: str) -> dict[str, dict[str, list[list[float]]]]:
    """The per-epoch scalars the Trainer's TensorBoard callback wrote, e.g. {"train": {"loss": [[0, 1.9], ...]}}.

    Args:
        model_run_uri: The Trainer's `model_run` artifact directory (its TensorBoard log dir).
    """
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    curves: dict[str, dict[str, list[list[float]]]] = {}
    for run in CURVE_RUNS:
        directory = f"{model_run_uri.rstrip('/')}/{run}"
        if not paths.is_dir(directory):
            continue
        accumulator = event_accumulator.EventAccumulator(  # reads through tf.io.gfile when TensorFlow is installed
            directory, size_guidance={event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0}
        )
        accumulator.Reload()
        tags = accumulator.Tags()
        series: dict[str, list[list[float]]] = {}
        for tag in tags.get("tensors", []):
            if tag.startswith(EPOCH_PREFIX):
                points = accumulator.Tensors(tag)
                series[tag[len(EPOCH_PREFIX) :]] = [
                    [point.step, float(tensor_util.make_ndarray(point.tensor_proto))] for point in points
                ]
        for tag in tags.get("scalars", []):  # TF1-style summaries
            if tag.startswith(EPOCH_PREFIX):
                series[tag[len(EPOCH_PREFIX) :]] = [[point.step, point.value] for point in accumulator.Scalars(tag)]
        if series:
            curves[run] = series
    return curves


def directory_bytes(path: str) -> int | None:
    """The size of the files under `path`; None when it is not a directory."""
    return paths.tree_bytes(path)
