"""Splits the Trainer cannot use are stopped by the ExampleValidator, from TFDV's statistics (issue 15, items 6-8).

The statistics are computed by TFDV itself with StatisticsGen's options, so the tests follow TFDV's real output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
import tensorflow as tf
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.coders import example_coder

from components.validation.data_checks import (
    RefusedImages,
    count_refused_images,
    data_problems,
    statistics_options,
)
from components.validation.strict_example_validator import DataValidationError
from foundation.data.tfrecords import make_example, write_shards
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


WEBP = b"RIFF\x24\0\0\0WEBPVP8 " + b"\0" * 20  # a still WebP header: TFDV does not know it, the model does
TIFF = b"II*\x00" + b"\0" * 28


def _judged(tmp_path: Path, images: list[bytes]) -> Callable[[], RefusedImages]:
    _write(tmp_path / "split", images, shards=2)
    return functools.partial(count_refused_images, str(tmp_path / "split" / "*"))


def test_values_tfdv_flags_are_judged_by_the_models_rule(tmp_path: Path) -> None:
    images = [PNG] * 110 + [WEBP] * 6 + [TIFF] * 2 + [NOT_AN_IMAGE]

    (problem,) = data_problems("train", _statistics(images), _judged(tmp_path, images))

    assert problem.startswith(
        "split 'train', feature 'image/encoded': 3 of 119 values are not images the model accepts "
        "(2 TIFF, 1 not an image); image/encoded must hold encoded images the model accepts (JPEG, PNG"
    )


def test_webp_that_tfdv_does_not_know_is_no_problem(tmp_path: Path) -> None:
    images = [PNG] * 20 + [WEBP] * 100  # mostly WebP: TFDV writes no image histogram at all

    assert data_problems("eval", _statistics(images), None) != []  # TFDV alone would refuse it
    assert data_problems("eval", _statistics(images), _judged(tmp_path, images)) == []


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
        f"records whose image/encoded the model does not accept, by file:\n  - {train[1]}: 1 of 4 records "
        "(1 not an image; record 3)"
    ) in detail
    assert explain_failure("Trainer", config, ValueError("out of memory")) is None  # only for image failures


def test_the_scan_stops_at_its_time_budget_and_says_so(tmp_path: Path) -> None:
    files = _write(tmp_path / "train", [NOT_AN_IMAGE] * 4, shards=4)

    scan = scan_records([str(tmp_path / "train" / "*")], budget_seconds=0.0)

    assert scan.unread == len(files) and scan.counts == {}
