"""An empty or tiny span is refused by name before training (issue 35, "Hardening, round 4").

ImportExampleGen merges the spans a run reads, so StatisticsGen's per-split counts hide a span that arrived empty:
the ExampleValidator counts each span's records per split in the span folders the ExampleGen read, and stops the
run when a split of a span holds fewer than `data.min_span_examples`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from layout_fixtures import example_bytes, write_records
from validator_fixtures import validator_artifacts

from components.validation.span_sizes import SpanCount, SpanSizeCheck, count_span_examples, span_size_problems
from components.validation.strict_example_validator import (
    SPAN_SIZES_KEY,
    DataValidationError,
    StrictExampleValidatorExecutor,
)
from foundation.data.spans import INPUT_BASE_PROPERTY, SPANS_PROPERTY
from pipeline.component_settings import span_size_check
from pipeline.config import ConfigError, build_config

PNG = b"\x89PNG\r\n\x1a\n"
PATTERNS = {"train": "span-*/train/*", "eval": "span-*/eval/*"}


def _records(count: int) -> list[bytes]:
    return [example_bytes(PNG, index % 10, str(index % 10)) for index in range(count)]


def _spans(data: Path, sizes: dict[int, dict[str, int]]) -> dict[str, list[bytes]]:
    """Span folders of `sizes` (span → split → records) under `data`; returns what ImportExampleGen makes of them."""
    merged: dict[str, list[bytes]] = {}
    for span, splits in sizes.items():
        for split, count in splits.items():
            write_records(data / f"span-{span}" / split / "part-00000-of-00001.tfrecord.gz", _records(count))
            merged.setdefault(split, []).extend(_records(count))
    return merged


def _validate(tmp_path: Path, sizes: dict[int, dict[str, int]], minimum: int) -> None:
    data = tmp_path / "data"
    inputs, outputs = validator_artifacts(tmp_path / "artifacts", _spans(data, sizes))
    examples = inputs["examples"][0]
    examples.set_string_custom_property(SPANS_PROPERTY, ",".join(str(span) for span in sizes))
    examples.set_string_custom_property(INPUT_BASE_PROPERTY, str(data))
    check = SpanSizeCheck(min_examples=minimum, split_patterns=PATTERNS).to_json()
    StrictExampleValidatorExecutor().Do(inputs, outputs, {"exclude_splits": "[]", SPAN_SIZES_KEY: check})


def test_a_span_that_arrived_empty_stops_the_validator_naming_it(tmp_path: Path) -> None:
    # Span 1's records fill both merged splits: the statistics alone see nothing wrong.
    with pytest.raises(DataValidationError) as raised:
        _validate(tmp_path, {1: {"train": 30, "eval": 10}, 2: {"train": 0, "eval": 4}}, minimum=1)
    message = " ".join(str(raised.value).split())
    assert f"span 2 ({tmp_path / 'data' / 'span-2'}) holds train 0, eval 4 examples" in message
    assert "split 'train' below data.min_span_examples = 1" in message
    assert "span 1" not in message and "tfxp data inspect" in message


def test_a_tiny_span_is_refused_by_a_raised_minimum_and_healthy_spans_pass(tmp_path: Path) -> None:
    sizes = {1: {"train": 30, "eval": 10}, 2: {"train": 3, "eval": 1}}
    _validate(tmp_path / "default", sizes, minimum=1)  # not empty: the default lets it through
    _validate(tmp_path / "off", {**sizes, 2: {"train": 0, "eval": 4}}, minimum=0)  # 0 = no check
    with pytest.raises(DataValidationError, match=r"span 2 \(.*span-2\) holds train 3, eval 1 examples: splits "
                       r"'train', 'eval' below data.min_span_examples = 5"):  # fmt: skip
        _validate(tmp_path / "raised", sizes, minimum=5)


def test_span_records_are_counted_per_split_in_each_span_folder(tmp_path: Path) -> None:
    write_records(tmp_path / "span-1" / "train" / "a.tfrecord.gz", _records(7))
    write_records(tmp_path / "span-1" / "train" / "b.tfrecord", _records(2))  # uncompressed, by its name
    write_records(tmp_path / "span-1" / "eval" / "a.tfrecord.gz", [])
    write_records(tmp_path / "span-3.tmp" / "train" / "a.tfrecord.gz", _records(5))  # staged: not a span
    counts = count_span_examples(str(tmp_path), [1, 2], PATTERNS)  # span 2's folder is gone: the ExampleGen says so
    assert counts == [SpanCount(1, str(tmp_path / "span-1"), {"train": 9, "eval": 0})]
    (problem,) = span_size_problems(counts, 1)
    assert problem.startswith(f"span 1 ({tmp_path / 'span-1'}) holds train 9, eval 0 examples: split 'eval' below ")
    assert "lower data.min_span_examples (0 = no check)" in problem
    assert span_size_problems(counts, 0) == []


def test_the_pipeline_counts_spans_only_with_spans_and_a_minimum() -> None:
    assert span_size_check(build_config({})) == ""  # data.spans: none
    assert span_size_check(build_config({}, ["data.spans=all", "data.min_span_examples=0"])) == ""
    check = SpanSizeCheck.from_json(span_size_check(build_config({}, ["data.spans=all"])))
    assert check == SpanSizeCheck(1, PATTERNS)
    assert build_config({}, ["data.spans=3", "data.min_span_examples=50"]).data.min_span_examples == 50
    with pytest.raises(ConfigError, match=r"`data.min_span_examples` = -1"):
        build_config({}, ["data.min_span_examples=-1"])
