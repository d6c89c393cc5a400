"""foundation.data.spans: span folder names and which spans `data.spans` selects (TFX RollingRange semantics)."""

from __future__ import annotations

import pytest

from foundation.data.spans import (
    SpanError,
    find_spans,
    format_spans,
    parse_policy,
    parse_spans,
    select_spans,
    span_dir_name,
    span_number,
)


@pytest.mark.parametrize(
    ("policy", "selected"),
    [
        ("latest", [7]),
        ("all", [1, 2, 3, 5, 7]),
        (1, [7]),
        (2, [7]),
        (3, [5, 7]),
        (7, [1, 2, 3, 5, 7]),
        (99, [1, 2, 3, 5, 7]),
    ],
)
def test_the_window_counts_back_from_the_newest_span_across_gaps(policy: str | int, selected: list[int]) -> None:
    # Spans 4 and 6 are missing: a window of 2 is [6, 7], so it holds only span 7 (as TFX's RollingRange).
    assert select_spans([3, 1, 7, 2, 5], policy) == selected


def test_policies_arrive_as_strings_in_the_executor() -> None:
    assert parse_policy("3") == 3
    assert parse_policy(" all ") == "all"
    assert select_spans([1, 2, 3], "2") == [2, 3]
    for bad in ("0", "-1", "newest", "", "2.5"):
        with pytest.raises(SpanError, match="expected `none`"):
            parse_policy(bad)


def test_no_spans_or_the_none_policy_cannot_select() -> None:
    with pytest.raises(SpanError, match=r"data.spans is all but there are no span folders \(span-N\)"):
        select_spans([], "all")
    with pytest.raises(SpanError, match=r"data\.spans is none"):
        select_spans([1], "none")


def test_span_folders_are_span_and_a_number() -> None:
    names = ["span-1", "span-002", "span-next", "span-3.tmp", "span-", "spans-4", "train", "span--5"]
    assert find_spans(names) == {1: "span-1", 2: "span-002"}
    assert span_number("span-10") == 10 and span_number("Span-1") is None
    assert span_dir_name(4) == "span-4"


@pytest.mark.parametrize(
    "name", ["span-5.tmp", "span-5.partial", "span-٣", "span-²", "span-5\n", "span- 5", f"span-{2**63}", "span-+5"]
)
def test_staged_and_odd_names_are_not_spans(name: str) -> None:
    assert span_number(name) is None
    assert find_spans([name, "span-1"]) == {1: "span-1"}


def test_span_numbers_reach_int64() -> None:
    assert span_number(f"span-{2**63 - 1}") == 2**63 - 1
    with pytest.raises(SpanError, match="from 0 to 9223372036854775807"):
        span_dir_name(2**63)


def test_two_folders_of_the_same_span_are_an_error() -> None:
    with pytest.raises(SpanError, match="folders span-03 and span-3 are both span 3; keep one"):
        find_spans(["span-3", "span-03"])


def test_recorded_spans_read_back() -> None:
    assert format_spans([5, 3, 4]) == "3,4,5"
    assert parse_spans("3,4,5") == [3, 4, 5]
    assert parse_spans("") == []


def test_the_run_summary_reads_the_spans_off_the_examples_artifact() -> None:
    from ml_metadata.proto import metadata_store_pb2

    from pipeline.summary import spans_seen

    examples = metadata_store_pb2.Artifact()
    assert spans_seen(examples) is None  # data without spans
    examples.custom_properties["spans"].string_value = "2,3,4"
    assert spans_seen(examples) == [2, 3, 4]
