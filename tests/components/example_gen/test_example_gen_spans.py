"""The span-selecting ImportExampleGen executor on small TFRecords, with Beam's DirectRunner in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.example_gen.component import SpanImportExampleGen
from components.example_gen.driver import SpanDriver
from components.example_gen.executor import Executor
from foundation.contract import IMAGE_KEY, LABEL_KEY
from foundation.data.spans import SpanError


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


def _exec_properties(root: Path, patterns: dict[str, str], spans: str) -> dict[str, Any]:
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name=name, pattern=pattern) for name, pattern in patterns.items()]
    )
    return {
        "input_base": str(root),
        "input_config": proto_utils.proto_to_json(input_config),
        "output_config": proto_utils.proto_to_json(example_gen_pb2.Output()),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        "spans": spans,
    }


def _run(
    root: Path, out: Path, patterns: dict[str, str], spans: str, exec_properties: dict[str, Any] | None = None
) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    Executor().Do({}, {"examples": [examples]}, exec_properties or _exec_properties(root, patterns, spans))
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


def _driver(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """What TFX's local launcher gets from the component's driver before its cache lookup."""
    return SpanDriver(None).resolve_exec_properties(dict(exec_properties), None, None)


def test_a_staged_span_folder_is_never_read_nor_fingerprinted(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _spans(root, [1, 2])
    properties = _exec_properties(root, SPAN_PATTERNS, "all")
    before = _driver(properties)
    for staged in ("span-3.tmp", "span-3.partial", "span-٣", "span-99999999999999999999", "span-3 "):
        _write(root / staged / "train" / "part-00000-of-00001.tfrecord.gz", [99], True)
        _write(root / staged / "eval" / "eval-00000-of-00001", [99], False)
    after = _driver(properties)
    assert after["input_fingerprint"] == before["input_fingerprint"]  # the next run is a cache hit
    assert after["selected_spans"] == "1,2"
    examples = _run(root, tmp_path / "out", SPAN_PATTERNS, "all", after)
    assert _labels(examples, "train") == [10, 11, 20, 21]


def test_the_fingerprint_is_of_the_spans_that_were_read(tmp_path: Path) -> None:
    # A span moved in between the driver's listing and the executor's start: the run reads the spans it
    # fingerprinted, so the next run's new fingerprint is a real change (span 3) and the one after a cache hit.
    root = tmp_path / "data"
    _spans(root, [1, 2])
    properties = _exec_properties(root, SPAN_PATTERNS, "all")
    first = _driver(properties)
    _spans(root, [3])
    examples = _run(root, tmp_path / "out", SPAN_PATTERNS, "all", first)
    assert examples.get_string_custom_property("spans") == first["selected_spans"] == "1,2"
    assert _labels(examples, "eval") == [15, 25]
    second = _driver(properties)
    assert second["selected_spans"] == "1,2,3" and second["input_fingerprint"] != first["input_fingerprint"]
    assert _driver(properties)["input_fingerprint"] == second["input_fingerprint"]


def test_a_selected_span_gone_before_the_executor_reads_it_is_named(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _spans(root, [1, 2])
    selected = _driver(_exec_properties(root, SPAN_PATTERNS, "all"))
    (root / "span-2").rename(root / "span-2.old")
    with pytest.raises(SpanError, match=r"span 2 was selected \(and fingerprinted\) under .*its folder is gone"):
        _run(root, tmp_path / "out", SPAN_PATTERNS, "all", selected)


def test_data_without_spans_keeps_tfx_s_fingerprint(tmp_path: Path) -> None:
    _write(tmp_path / "data" / "train-00000-of-00001", [1], False)
    _write(tmp_path / "data" / "validation-00000-of-00001", [2], False)
    resolved = _driver(_exec_properties(tmp_path / "data", {"train": "train-*", "eval": "validation-*"}, "none"))
    assert resolved["input_fingerprint"].startswith("split:train,num_files:1")
    assert "selected_spans" not in resolved
