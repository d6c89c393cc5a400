"""The ExampleValidator's input and output artifacts as TFX makes them, for calling its executor directly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import tensorflow_data_validation as tfdv
from layout_fixtures import write_records
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils
from tfx_bsl.coders import example_coder

from components.validation.data_checks import statistics_options
from components.validation.label_map_schema import tighten_schema


def validator_artifacts(
    tmp_path: Path, splits: dict[str, list[bytes]], classes: int = 10
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The validator's inputs (examples, their statistics, the label-map schema of `classes` classes) and output.

    Args:
        tmp_path: Where the artifacts' folders go.
        splits: Split name → its serialized examples, as ImportExampleGen wrote them (every span merged).
        classes: Lines of the label map the schema is tightened with.
    """
    names = artifact_utils.encode_split_names(list(splits))
    examples = standard_artifacts.Examples()
    examples.uri, examples.split_names = str(tmp_path / "examples"), names
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri, statistics.split_names = str(tmp_path / "statistics"), names
    decoder = example_coder.ExamplesToRecordBatchDecoder()
    for split, records in splits.items():
        write_records(tmp_path / "examples" / f"Split-{split}" / "data_tfrecord-00000-of-00001.gz", records)
        batch = pa.Table.from_batches([decoder.DecodeBatch(records)]).to_batches()[0]
        stats = stats_impl.generate_statistics_in_memory(batch, statistics_options())
        os.makedirs(tmp_path / "statistics" / f"Split-{split}")
        io_utils.write_bytes_file(
            str(tmp_path / "statistics" / f"Split-{split}" / "FeatureStats.pb"),
            statistics_pb2.DatasetFeatureStatisticsList(datasets=stats.datasets).SerializeToString(),
        )
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    inferred = tfdv.infer_schema(stats)
    io_utils.write_pbtxt_file(str(tmp_path / "schema" / "schema.pbtxt"), tighten_schema(inferred, classes))
    anomalies = standard_artifacts.ExampleAnomalies()
    anomalies.uri = str(tmp_path / "anomalies")
    return (
        {"statistics": [statistics], "schema": [schema], "examples": [examples]},
        {"anomalies": [anomalies]},
    )
