"""Splits the Trainer cannot use are stopped by the ExampleValidator, from TFDV's statistics (issue 15, items 6-8).

The statistics are computed by TFDV itself with StatisticsGen's options, so the tests follow TFDV's real output.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import tensorflow as tf
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.coders import example_coder

from components.data.tfrecords import make_example, write_shards
from components.validation.strict_example_validator import DataValidationError, data_problems, statistics_options
from pipeline.config import load_config
from pipeline.runners.diagnose import explain_failure, scan_records

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 24  # TFDV reads the format from the magic bytes only
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 24
NOT_AN_IMAGE = b"raw pixels, not an encoded image"


def _statistics(images: list[bytes]) -> statistics_pb2.DatasetFeatureStatistics:
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 3])),
                }
            )
        ).SerializeToString()
        for index, image in enumerate(images)
    ]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(examples)
    table = pa.Table.from_batches([batch])
    return stats_impl.generate_statistics_in_memory(table.to_batches()[0], statistics_options()).datasets[0]


def test_good_images_are_no_problem() -> None:
    assert data_problems("train", _statistics([PNG, JPEG] * 60)) == []


def test_a_few_values_that_are_not_images_are_counted_with_the_split() -> None:
    (problem,) = data_problems("train", _statistics([PNG] * 120 + [NOT_AN_IMAGE] * 5))

    assert problem.startswith(
        "split 'train', feature 'image/encoded': 5 of 125 values are not JPEG, PNG, GIF or BMP images; "
    )
    assert "tfxp data from-folder" in problem


def test_values_that_are_mostly_not_images_are_a_problem_though_tfdv_writes_no_histogram() -> None:
    (problem,) = data_problems("eval", _statistics([NOT_AN_IMAGE] * 100 + [PNG] * 20))

    assert problem.startswith(
        "split 'eval', feature 'image/encoded': fewer than 80% of its 120 values are JPEG, PNG, GIF or BMP images"
    )


def test_below_tfdvs_threshold_nothing_is_claimed() -> None:
    # TFDV writes image statistics for 100 values or more; the Trainer's decode names a bad format below that.
    assert data_problems("eval", _statistics([NOT_AN_IMAGE] * 10)) == []


@pytest.mark.parametrize("split", ["train", "eval"])
def test_an_empty_split_is_named_with_the_fix(split: str) -> None:
    (problem,) = data_problems(split, statistics_pb2.DatasetFeatureStatistics(num_examples=0))

    assert problem.startswith(f"split '{split}' has 0 records; the Trainer needs examples in both splits;")
    assert "tfxp data inspect DIR" in problem


def _write(split_dir: Path, images: list[bytes], shards: int) -> list[Path]:
    return write_shards(split_dir, images, shards, lambda image: make_example(image, 0).SerializeToString())


def test_after_a_validation_failure_the_diagnosis_names_the_shard_and_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    train = _write(data / "train", [PNG] * 6 + [NOT_AN_IMAGE], shards=2)  # 3 + 4 records: the last is bad
    (eval_file,) = _write(data / "eval", [], shards=1)
    (data / "labels.txt").write_text("a\nb\n")
    config = load_config(None, [f"data.path={data}", "data.split=folders"])

    detail = explain_failure("ExampleValidator", config, DataValidationError("split 'eval' has 0 records"))

    assert detail is not None
    assert f"input files with 0 records:\n  - {eval_file}" in detail
    assert (
        f"records whose image/encoded is not an image, by file:\n  - {train[1]}: 1 of 4 records (record 3; the first "
        "starts b'raw pixe')"
    ) in detail
    assert explain_failure("Trainer", config, ValueError("out of memory")) is None  # only for image failures


def test_the_scan_stops_at_its_time_budget_and_says_so(tmp_path: Path) -> None:
    files = _write(tmp_path / "train", [NOT_AN_IMAGE] * 4, shards=4)

    scan = scan_records([str(tmp_path / "train" / "*")], budget_seconds=0.0)

    assert scan.unread == len(files) and scan.counts == {}
