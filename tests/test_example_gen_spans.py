"""The span-selecting ImportExampleGen executor on small TFRecords, with Beam's DirectRunner in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.contract import IMAGE_KEY, LABEL_KEY
from components.data.spans import SpanError
from components.example_gen.component import SpanImportExampleGen
from components.example_gen.executor import Executor


def _write(path: Path, labels: list[int], gzip: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP" if gzip else None) as writer:
        for label in labels:
            feature = {
                IMAGE_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"png"])),
                LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _spans(root: Path, spans: list[int]) -> None:
    """Span N holds train labels [10N, 10N+1] (gzipped) and eval label [10N+5] (uncompressed, no extension)."""
    for span in spans:
        _write(root / f"span-{span}" / "train" / "part-00000-of-00001.tfrecord.gz", [10 * span, 10 * span + 1], True)
        _write(root / f"span-{span}" / "eval" / "eval-00000-of-00001", [10 * span + 5], False)


def _run(root: Path, out: Path, patterns: dict[str, str], spans: str) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name=name, pattern=pattern) for name, pattern in patterns.items()]
    )
    exec_properties = {
        "input_base": str(root),
        "input_config": proto_utils.proto_to_json(input_config),
        "output_config": proto_utils.proto_to_json(example_gen_pb2.Output()),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        "spans": spans,
    }
    Executor().Do({}, {"examples": [examples]}, exec_properties)
    return examples


def _labels(examples: standard_artifacts.Examples, split: str) -> list[int]:
    files = tf.io.gfile.glob(f"{examples.uri}/Split-{split}/*")
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return sorted(
        tf.train.Example.FromString(r).features.feature[LABEL_KEY].int64_list.value[0]
        for r in dataset.as_numpy_iterator()
    )


SPAN_PATTERNS = {"train": "span-*/train/*", "eval": "span-*/eval/*"}


def test_a_window_of_two_reads_the_newest_two_spans_and_records_them(tmp_path: Path) -> None:
    _spans(tmp_path / "data", [1, 2, 3])
    (tmp_path / "data" / "span-next").mkdir()  # not a span: ignored
    examples = _run(tmp_path / "data", tmp_path / "out", SPAN_PATTERNS, "2")

    assert _labels(examples, "train") == [20, 21, 30, 31]
    assert _labels(examples, "eval") == [25, 35]
    assert examples.get_string_custom_property("spans") == "2,3"
    assert examples.get_int_custom_property("span") == 3


def test_all_spans_across_a_gap(tmp_path: Path) -> None:
    _spans(tmp_path / "data", [1, 4])
    examples = _run(tmp_path / "data", tmp_path / "out", SPAN_PATTERNS, "all")

    assert _labels(examples, "train") == [10, 11, 40, 41]
    assert examples.get_string_custom_property("spans") == "1,4"


def test_a_selected_span_without_the_split_is_a_clear_error(tmp_path: Path) -> None:
    _spans(tmp_path / "data", [1])
    _write(tmp_path / "data" / "span-2" / "train" / "part-00000-of-00001.tfrecord.gz", [20], True)
    with pytest.raises(SpanError, match=r"span-2 has no files matching eval/\*"):
        _run(tmp_path / "data", tmp_path / "out", SPAN_PATTERNS, "latest")


def test_without_spans_it_reads_flat_uncompressed_imagenet_shards(tmp_path: Path) -> None:
    _write(tmp_path / "data" / "train-00000-of-00002", [1, 2], False)
    _write(tmp_path / "data" / "train-00001-of-00002", [3], False)
    _write(tmp_path / "data" / "validation-00000-of-00001", [4], False)
    examples = _run(tmp_path / "data", tmp_path / "out", {"train": "train-*", "eval": "validation-*"}, "none")

    assert _labels(examples, "train") == [1, 2, 3]
    assert _labels(examples, "eval") == [4]
    assert not examples.has_custom_property("spans")


def test_the_component_carries_the_policy_as_a_parameter() -> None:
    input_config = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="train", pattern="span-*/train/*")])
    component = SpanImportExampleGen(input_base="/data", input_config=input_config, spans=3)
    assert component.exec_properties["spans"] == "3"
    assert component.executor_spec.executor_class is Executor
    with pytest.raises(SpanError, match=r"data\.spans = 'newest'"):
        SpanImportExampleGen(input_base="/data", input_config=input_config, spans="newest")


def test_none_is_refused_for_a_pipeline_compiled_for_span_folders(tmp_path: Path) -> None:
    # `spans` is a Kubeflow run parameter: a run may set it to latest, all or N, but not to none, whose patterns
    # would differ (the compiled ones go through span-*/).
    _spans(tmp_path / "data", [1, 2])
    with pytest.raises(SpanError, match="compiled for data in span folders"):
        _run(tmp_path / "data", tmp_path / "out", {"train": "span-*/train/*", "eval": "span-*/eval/*"}, "none")
